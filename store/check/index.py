"""Index part of the store cross-check (spec §5): headers, slot chains, and every entry's record.

Files are read straight from `index/` with the configured dimensions (maxHashSlotNum, maxIndexNum).
An entry must point at a record start, and its keyHash must be the hash of `topic#key` for one of that
record's keys (UNIQ_KEY or a KEYS token). Two different keys with the same hash are legal (queries filter
them out by re-reading the record) and are reported as info.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from store.check.commitlog import LogScan
from store.check.log_view import CommitLogView, release_map
from store.check import fast_index
from store.check.findings import Sink, utc_text
from store.codec import record_check
from store.codec.index_codec import (ENTRY_DTYPE, HASH_SLOT_SIZE, INDEX_HEADER_SIZE, decode_header,
                                     index_file_size)
from store.codec.javahash import index_key_hash
from store.check import index_runs
from store.check.index_runs import pass_run

INDEX_NAME_LENGTH = 17


def check_index_dir(index_dir: str, max_hash_slot_num: int, max_index_num: int,
                    view: CommitLogView, scan: LogScan, sink: Sink, *, unclean: bool,
                    max_entries: int | None, progress=None, chains=None) -> None:
    """`chains`: an index_chains.ChainVerdicts of `index_dir`, or None (each file's verdict is
    worked out here)."""
    names = sorted(os.listdir(index_dir)) if os.path.isdir(index_dir) else []
    if scan.records and not any(name.isdigit() for name in names):
        sink.add("error", "index", index_dir, None,
                 f"no index files, but the commit log holds {scan.records} records: queries by key "
                 f"(query-msg-by-key, by UNIQ_KEY) find nothing",
                 on_restart="IndexService.load finds no file and dispatch resumes from the consume "
                            "queues: the records already in the log are never indexed again")
    expected_size = index_file_size(max_hash_slot_num, max_index_num)
    state = _State(view, scan, sink, unclean, max_entries)
    state.chains = chains
    previous_end_phy = None
    for number, name in enumerate(names):
        path = os.path.join(index_dir, name)
        if progress is not None and number:
            progress("index", number, len(names))
        if name.endswith(".creating") and name[:-len(".creating")].isdigit():
            sink.add("info", "files", path, None, "leftover of an interrupted index file creation")
            continue
        if not name.isdigit() or not os.path.isfile(path):
            sink.add("warning", "files", path, None, "not an index file name: ignored by the store")
            continue
        if len(name) != INDEX_NAME_LENGTH:
            sink.add("warning", "index", path, None,
                     f"index file names have {INDEX_NAME_LENGTH} digits (yyyyMMddHHmmssSSS)")
        size = os.path.getsize(path)
        if size != expected_size:
            sink.add("error", "index", path, size,
                     f"index file is {size} bytes, expected {expected_size} (maxHashSlotNum="
                     f"{max_hash_slot_num}, maxIndexNum={max_index_num}): the store refuses it")
            continue
        with open(path, "rb") as handle:
            with mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as buffer:
                end_phy = _check_file(path, buffer, max_hash_slot_num, max_index_num, state)
        if end_phy is not None and previous_end_phy is not None and end_phy < previous_end_phy:
            sink.add("warning", "index", path, 24,
                     f"endPhyOffset {end_phy} is below the previous file's {previous_end_phy}")
        previous_end_phy = end_phy if end_phy is not None else previous_end_phy
        if sink.full:
            return
    if state.budget <= 0:
        sink.add("info", "index", None, None, f"max_records={max_entries} cut the index check short")
    if progress is not None:
        progress("index", len(names), len(names))


_FILTER_BITS = 1 << 24


class _KeyMemory:
    """`key_of_hash`: keyHash -> the key text first seen with it, for at most index_runs.MAX_KEYS_REMEMBERED
    hashes. A hash remembered in bulk (store.check.index_runs) holds the offset of its record
    instead; `get` reads the text from that record when it is first asked for."""

    def __init__(self, view):
        self.view = view
        self.texts: dict[int, object] = {}
        self.sorted = np.zeros(0, dtype=np.int64)
        self.pending: list[int] = []
        # A bit per low-24-bit value of the remembered hashes: most lookups miss it, and only the
        # hashes whose bit is set are searched in `sorted` (the answer is exact either way).
        self.filter = np.zeros(_FILTER_BITS >> 3, dtype=np.uint8)

    def __len__(self) -> int:
        return len(self.texts)

    def get(self, key_hash: int):
        value = self.texts.get(key_hash)
        if isinstance(value, int):
            value = self.texts[key_hash] = _key_text(self.view.check_at(value).request, key_hash)
        return value

    def __setitem__(self, key_hash: int, text) -> None:
        self.texts[key_hash] = text
        self.pending.append(key_hash)

    def remember(self, hashes: np.ndarray, phy: np.ndarray) -> None:
        self.texts.update(zip(hashes.tolist(), phy.tolist()))
        self.pending.extend(hashes.tolist())

    def known(self, hashes: np.ndarray) -> np.ndarray:
        if self.pending:
            pending = np.array(self.pending, dtype=np.int64)
            self.sorted = np.union1d(self.sorted, pending)
            self.pending = []
            low = pending & (_FILTER_BITS - 1)
            np.bitwise_or.at(self.filter, low >> 3, np.left_shift(1, low & 7).astype(np.uint8))
        answer = np.zeros(len(hashes), dtype=bool)
        if not len(self.sorted):
            return answer
        low = hashes & (_FILTER_BITS - 1)
        maybe = np.flatnonzero((self.filter[low >> 3] >> (low & 7)) & 1)
        if len(maybe):
            candidates = hashes[maybe]
            at = np.minimum(np.searchsorted(self.sorted, candidates), len(self.sorted) - 1)
            answer[maybe] = self.sorted[at] == candidates
        return answer


def _key_text(request, key_hash: int) -> str | None:
    """The first of the record's keys (UNIQ_KEY, then KEYS) whose `topic#key` hashes to key_hash."""
    keys = [request.uniq_key] if request.uniq_key is not None else []
    keys += [key for key in (request.keys or "").split(" ") if key]
    for key in keys:
        if index_key_hash(request.topic + "#" + key) == key_hash:
            return request.topic + "#" + key
    return None


class _State:
    def __init__(self, view, scan, sink, unclean, max_entries):
        self.view, self.scan, self.sink, self.unclean = view, scan, sink, unclean
        self.budget = max_entries if max_entries is not None else 1 << 62
        self.key_of_hash = _KeyMemory(view)
        self.collisions_reported: set[tuple[str, str]] = set()
        self.chains = None                 # index_chains.ChainVerdicts, when one was started


def _check_file(path, buffer, slots: int, max_index_num: int, state: _State) -> int | None:
    sink = state.sink
    header = decode_header(buffer)
    if not 0 <= header.index_count <= max_index_num:
        sink.add("error", "index", path, 36,
                 f"indexCount {header.index_count} outside 0..maxIndexNum ({max_index_num})")
        return None
    index_count = max(header.index_count, 1)
    entry_count = index_count - 1
    if entry_count and header.begin_timestamp > header.end_timestamp:
        sink.add("error", "index", path, 0,
                 f"beginTimestamp {header.begin_timestamp} ({utc_text(header.begin_timestamp)}) is "
                 f"after endTimestamp {header.end_timestamp} ({utc_text(header.end_timestamp)})")
    if entry_count and header.begin_phy_offset > header.end_phy_offset:
        sink.add("error", "index", path, 16, f"beginPhyOffset {header.begin_phy_offset} is after "
                                            f"endPhyOffset {header.end_phy_offset}")
    slot_table = np.frombuffer(buffer, dtype=">i4", count=slots, offset=INDEX_HEADER_SIZE)
    entries_position = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE
    entries = np.frombuffer(buffer, dtype=ENTRY_DTYPE, count=index_count, offset=entries_position)
    occupied = int(np.count_nonzero((slot_table > 0) & (slot_table < index_count)))
    if header.hash_slot_count != occupied:
        sink.add("warning", "index", path, 32,
                 f"hashSlotCount {header.hash_slot_count} but {occupied} slots are occupied")
    bad_slots = np.nonzero((slot_table < 0) | (slot_table >= index_count))[0]
    for slot in bad_slots[:10]:
        sink.add("error", "index", path, INDEX_HEADER_SIZE + int(slot) * HASH_SLOT_SIZE,
                 f"slot {int(slot)} holds {int(slot_table[slot])}, not an entry number below "
                 f"indexCount {index_count}")
    clean = state.chains.verdict(path, header.index_count) if state.chains is not None else None
    if clean is None:
        clean = fast_index.chains_clean(slot_table, entries, slots, index_count,
                                        lambda: release_map(buffer))
    if not clean:
        _check_chains(path, slot_table, entries, slots, index_count, entries_position, sink)
    release_map(buffer)
    if entry_count:
        _check_entries(path, entries, header, entries_position, state, lambda: release_map(buffer))
        sink.summarize()
    return header.end_phy_offset if entry_count else None


def _check_chains(path, slot_table, entries, slots, index_count, entries_position, sink) -> None:
    """Every chain runs backwards through entries of its own slot; every entry is on a chain."""
    reached = np.zeros(index_count, dtype=bool)
    key_hashes = entries["key_hash"].astype(np.int64)
    prev = entries["prev_index"].astype(np.int64)
    for slot in np.nonzero((slot_table > 0) & (slot_table < index_count))[0]:
        entry = int(slot_table[slot])
        linker = None                         # the entry whose prevIndex led here (None: the slot)
        for _ in range(index_count):          # a chain is at most every entry once
            if entry <= 0 or entry >= index_count:
                break
            if reached[entry]:
                # Each entry is linked from exactly one place: its slot (the newest of the slot)
                # or the next newer entry of the same slot (IndexFile.putKey stores the slot's old
                # head as prevIndex). A second link is damage, even if queries then filter by
                # keyHash and return nothing wrong.
                where = (INDEX_HEADER_SIZE + int(slot) * HASH_SLOT_SIZE if linker is None
                         else entries_position + linker * 20 + 16)
                source = f"slot {int(slot)}" if linker is None else f"entry {linker}"
                sink.add("error", "index", path, where,
                         f"{source} links to entry {entry}, which another slot chain already "
                         f"reaches: every entry has exactly one predecessor in its slot's chain")
                break
            reached[entry] = True
            if key_hashes[entry] >= 0 and key_hashes[entry] % slots != slot:
                sink.add("error", "index", path, entries_position + entry * 20,
                         f"entry {entry} (keyHash {int(key_hashes[entry])}) is on the chain of "
                         f"slot {int(slot)}, not of slot {int(key_hashes[entry] % slots)}")
            following = int(prev[entry])
            if following >= entry or following < 0:
                sink.add("error", "index", path, entries_position + entry * 20 + 16,
                         f"entry {entry} links to {following}: chains must point to older entries "
                         f"(or 0, the end of the chain)")
                break
            linker, entry = entry, following
    unreached = np.nonzero(~reached[1:])[0]
    if len(unreached):
        first = int(unreached[0]) + 1
        sink.add("warning", "index", path, entries_position + first * 20,
                 f"{len(unreached)} entries (first: {first}) are on no slot chain: queries "
                 f"never find them")


def _check_entries(path, entries, header, entries_position, state: _State, release) -> None:
    """Every entry in order, a chunk at a time; entries the walk found right
    (store.check.fast_index) pass in bulk (`index_runs.pass_run`), the others go through
    `_check_entry`."""
    name, sink = os.path.basename(path), state.sink
    for first in range(0, len(entries), fast_index.CHUNK):
        part = entries[first:first + fast_index.CHUNK]
        kinds = fast_index.entry_kinds(part, first, header, state.scan, name)
        position = 1 if first == 0 else 0
        for stop in np.flatnonzero(kinds == fast_index.DIRTY).tolist() + [len(part)]:
            while position < stop:
                if sink.full or state.budget <= 0:
                    return
                take = min(stop - position, state.budget)
                slow = pass_run(state.key_of_hash, part, kinds, position, position + take)
                state.budget -= slow - position
                if slow == position + take:
                    position = slow
                    if position < stop:
                        return                 # the budget ran out inside the run
                    break
                state.budget -= 1              # a KEYED entry: the walk saw its record start
                _check_entry(path, entries, header, entries_position, state, first + slow, True)
                position = slow + 1
            if stop == len(part):
                break
            if sink.full or state.budget <= 0:
                return
            state.budget -= 1
            _check_entry(path, entries, header, entries_position, state, first + stop)
            position = stop + 1
        release()
        state.view.release_pages()     # the records read for this chunk's entries


def _check_entry(path, entries, header, entries_position, state: _State, entry: int,
                 walked: bool = False) -> None:
    """`walked`: the walk found the entry GOOD (KEYED), so its phyOffset is a walked record start
    and `is_record_start`, which may walk part of a segment again, need not be asked."""
    sink, scan, view = state.sink, state.scan, state.view
    key_hash, phy_offset, time_diff_s, _prev = (int(v) for v in entries[entry])
    where = entries_position + entry * 20
    if key_hash < 0:
        sink.add("error", "index", path, where, f"entry {entry} has a negative keyHash {key_hash}")
        return
    if time_diff_s < 0:
        sink.add("error", "index", path, where + 12,
                 f"entry {entry} has a negative timeDiff {time_diff_s}: queries stop at it")
    if phy_offset < 0:             # not "expired": no record ever starts below 0
        sink.add("error", "index", path, where + 4,
                 f"entry {entry} has a negative phyOffset {phy_offset}")
        return
    if phy_offset < scan.min_offset:
        return                     # the record's segment expired
    if phy_offset >= scan.end_offset and not scan.capped:
        sink.add_limited(f"{os.path.basename(path)} entries beyond the log end",
                         "warning" if state.unclean else "error", "index", path, where,
                 f"entry {entry} points at {phy_offset}, beyond the end of the log "
                 f"({scan.end_offset})")
        return
    result = view.check_at(phy_offset)
    if (not walked and scan.is_record_start(phy_offset) is False) or \
            result.kind != record_check.CHECK_RECORD or \
            result.request.commit_log_offset != phy_offset:
        sink.add_limited(f"{os.path.basename(path)} entries not at record starts", "error",
                         "index", path, where,
                         f"entry {entry} points at {phy_offset}, which is not the start of a record")
        return
    _check_entry_key(path, where, entry, key_hash, result.request, state)
    _check_entry_time(path, where, entry, time_diff_s, header, result.request, state)


def _check_entry_time(path, where, entry, time_diff_s, header, request, state: _State) -> None:
    """timeDiff is whole seconds from the header's beginTimestamp (the first entry's store time)
    to the record's store time, clamped to 0..2^31-1. Entry 1 is skipped: it was computed against
    the previous file's end time, which the header no longer holds."""
    if entry == 1 or time_diff_s < 0:
        return
    expected = min(max(0, (request.store_timestamp - header.begin_timestamp) // 1000), 2**31 - 1)
    if time_diff_s != expected:
        state.sink.add_limited(f"{os.path.basename(path)} entries with a wrong timeDiff", "error",
                               "index", path, where + 12,
                               f"entry {entry} has timeDiff {time_diff_s} s, but its record was "
                               f"stored {expected} s after the file's beginTimestamp: time-bounded "
                               f"queries skip or misplace it")


def _check_entry_key(path, where, entry, key_hash, request, state: _State) -> None:
    keys = [request.uniq_key] if request.uniq_key is not None else []
    keys += [key for key in (request.keys or "").split(" ") if key]
    key_strings = {request.topic + "#" + key: index_key_hash(request.topic + "#" + key)
                   for key in keys}
    matching = [text for text, value in key_strings.items() if value == key_hash]
    if not matching:
        state.sink.add("error", "index", path, where,
                       f"entry {entry} keyHash {key_hash} matches none of the keys of the record at "
                       f"{request.commit_log_offset} ({', '.join(key_strings) or 'no keys'})")
        return
    text = matching[0]
    known = state.key_of_hash.get(key_hash)
    if known is None:
        if len(state.key_of_hash) < index_runs.MAX_KEYS_REMEMBERED:
            state.key_of_hash[key_hash] = text
    elif known != text and (known, text) not in state.collisions_reported:
        state.collisions_reported.add((known, text))
        state.sink.add("info", "index", path, where,
                       f"hash collision: {known!r} and {text!r} share keyHash {key_hash}; "
                       f"queries for either return both and filter by the real keys")
