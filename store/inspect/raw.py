"""Store files read as they are, for `rmqstore dump`: no open store needed.

Like Kafka's dump-log tool, these work on a directory the engine refuses to open (a torn tail, a
wrong-sized index file): they map the files read-only and decode them with the codecs. Every function
returns at most `limit` rows (dicts with the column names mqadmin-style tools print).
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from store.check.log_view import CommitLogView, body_crc_matches, iter_records
from store.codec import prop_crc, record_check
from store.codec.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE
from store.codec.index_codec import ENTRY_STRUCT, decode_header, entry_position, index_file_size
from store.dledger.layout import log_dirs    # a DLedger store: dledger-<id>/data
from store.errors import StoreError
from store.inspect.record_hex import RecordHexView, record_hex_view

__all__ = ["DUMP_LIMIT_DEFAULT", "dump_index_entries", "dump_queue_units", "dump_records",
           "record_hex_views"]

DUMP_LIMIT_DEFAULT = 100


def dump_records(config, *, start_phy_offset: int = 0, limit: int = DUMP_LIMIT_DEFAULT,
                 verify: bool = False) -> list[dict]:
    """Up to `limit` rows from `start_phy_offset`: every record, BLANK filler and the first invalid
    spot, as `checkMessageAndReturnSize` sees them. `verify` adds `valid` (BODYCRC, PHYSICALOFFSET and,
    [5.x] for a record with a `__CRC32#` trailer or under forceVerifyPropCRC, the property CRC) and
    `problem` for an invalid record."""
    rows = []
    force_prop_crc = config.force_verify_prop_crc and config.check_crc_on_recover
    with CommitLogView(log_dirs(config), config.mapped_file_size_commit_log) as view:
        for phy_offset, result in iter_records(view, start_phy_offset):
            if len(rows) >= limit:
                break
            segment = view.find(phy_offset)
            position = phy_offset - segment.file_from_offset
            row = {"phyOffset": phy_offset, "file": os.path.basename(segment.path),
                   "position": position, "kind": result.kind, "size": result.size}
            if result.kind == record_check.CHECK_RECORD:
                r = result.request
                row.update(topic=r.topic, queueId=r.queue_id, queueOffset=r.consume_queue_offset,
                           storeTimestamp=r.store_timestamp, tagsCode=r.tags_code, keys=r.keys,
                           uniqKey=r.uniq_key, sysFlag=r.sys_flag)
                if verify:
                    problem = _record_problem(segment.buffer, position, result, phy_offset,
                                              force_prop_crc)
                    row["valid"] = not problem
                    if problem:
                        row["problem"] = problem
            elif result.kind == record_check.CHECK_INVALID and _never_written(view, segment,
                                                                               position):
                row.update(kind=END_OF_DATA, size=0)     # zeros to the end: not damage
            elif result.kind == record_check.CHECK_INVALID and verify:
                row["valid"] = False
            rows.append(row)
    return rows


END_OF_DATA = "END"      # dump_records' row where the written data ends (zeros follow)
PROP_CRC_PROBLEM = "__CRC32#:"    # what dump_records' `problem` holds for a failed property CRC


def _record_problem(buffer, position: int, result, phy_offset: int, force_prop_crc: bool) -> str:
    """Why a record `check_message` accepts is still wrong ("" when it is not)."""
    problems = []
    if result.request.commit_log_offset != phy_offset:
        problems.append(f"PHYSICALOFFSET says {result.request.commit_log_offset}")
    if not body_crc_matches(buffer, position):
        problems.append("BODYCRC does not match the body")
    if force_prop_crc or prop_crc.has_reserved_trailer(buffer, position, result.size):
        ok, reason = prop_crc.check_property_crc(buffer, result.request.properties,
                                                 position + result.size, result.size)
        if not ok:
            problems.append(f"{PROP_CRC_PROBLEM} {reason}")
    return "; ".join(problems)


def record_hex_views(config, phy_offsets, *, limit: int = 3) -> list[RecordHexView]:
    """The hex view (its `__CRC32#` field marked) of the records at `phy_offsets` (the first
    `limit`), read from the segment files; an offset that is not a record start is skipped."""
    views = []
    with CommitLogView(log_dirs(config), config.mapped_file_size_commit_log) as view:
        for phy_offset in list(phy_offsets)[:limit]:
            result = view.check_at(phy_offset)
            if result.kind != record_check.CHECK_RECORD:
                continue
            segment = view.find(phy_offset)
            position = phy_offset - segment.file_from_offset
            views.append(record_hex_view(segment.buffer[position:position + result.size], phy_offset))
    return views


def _never_written(view, segment, position: int) -> bool:
    """True when the rest of `segment` from `position` is zeros and no later segment starts with
    data: the preallocated tail after the last record, where recovery ends the log."""
    buffer = segment.buffer
    chunk = 1 << 20
    for start in range(position, segment.size_bytes, chunk):    # bounded by the segment size
        if any(buffer[start:min(start + chunk, segment.size_bytes)]):
            return False
    later = [s for s in view.segments if s.file_from_offset > segment.file_from_offset]
    return all(s.size_bytes < 4 or not any(s.buffer[:4]) for s in later)


def dump_queue_units(config, topic: str, queue_id: int, *, start_queue_offset: int = 0,
                     limit: int = DUMP_LIMIT_DEFAULT, verify: bool = False) -> list[dict]:
    """Up to `limit` units of one file consume queue from `start_queue_offset`, read from its files.
    `verify` adds `valid`: the unit points at a record start of that size, topic and queue offset."""
    queue_dir = os.path.join(config.consume_queue_dir, topic, str(queue_id))
    if not os.path.isdir(queue_dir):
        raise StoreError(f"no consume queue directory {queue_dir}")
    start = start_queue_offset
    rows = []
    view = CommitLogView(log_dirs(config), config.mapped_file_size_commit_log) \
        if verify else None
    try:
        for name in sorted(n for n in os.listdir(queue_dir) if n.isdigit() and len(n) == 20):
            with open(os.path.join(queue_dir, name), "rb") as handle:
                data = handle.read()
            units = np.frombuffer(data, dtype=CQ_UNIT_DTYPE, count=len(data) // CQ_UNIT_SIZE)
            first = int(name) // CQ_UNIT_SIZE
            for index in range(max(0, start - first), len(units)):
                if len(rows) >= limit:
                    return rows
                phy, size, tags = (int(v) for v in units[index])
                if phy == 0 and size == 0 and tags == 0:
                    break            # end of the queue
                row = {"queueOffset": first + index, "file": name, "position": index * CQ_UNIT_SIZE,
                       "phyOffset": phy, "size": size, "tagsCode": tags}
                if view is not None:
                    result = view.check_at(phy)
                    row["valid"] = result.kind == record_check.CHECK_RECORD and result.size == size \
                        and result.request.topic == topic \
                        and result.request.consume_queue_offset == first + index
                rows.append(row)
    finally:
        if view is not None:
            view.close()
    return rows


def dump_index_entries(config, *, file_name: str | None = None, start_entry: int = 0,
                       limit: int = DUMP_LIMIT_DEFAULT, verify: bool = False) -> list[dict]:
    """Up to `limit` entries of the index files (or of `file_name`), from entry `start_entry`.
    `verify` adds `valid` and `problem`: the entry points at a record start whose `topic#key`
    (UNIQ_KEY or a KEYS token) hashes to keyHash, and prevIndex links to an older entry of the same
    slot (IndexFile.putKey)."""
    if verify:
        with CommitLogView(log_dirs(config), config.mapped_file_size_commit_log) as view:
            return _dump_index(config, file_name, start_entry, limit, view)
    return _dump_index(config, file_name, start_entry, limit, None)


def _entry_problem(view, slots: int, number: int, key_hash: int, phy: int, prev: int,
                   prev_hash: int | None) -> str:
    """Why one index entry is wrong ("" when it is right); see dump_index_entries."""
    from store.codec.javahash import index_key_hash
    if prev < 0 or prev >= number:
        return f"prevIndex {prev} is not an older entry"
    if prev and prev_hash is not None and prev_hash % slots != key_hash % slots:
        return f"prevIndex {prev} is an entry of slot {prev_hash % slots}, not {key_hash % slots}"
    result = view.check_at(phy)
    if result.kind != record_check.CHECK_RECORD or result.request.commit_log_offset != phy:
        return f"phyOffset {phy} is not the start of a record"
    request = result.request
    keys = ([request.uniq_key] if request.uniq_key else []) + \
        [k for k in (request.keys or "").split(" ") if k]
    if not any(index_key_hash(f"{request.topic}#{k}") == key_hash for k in keys):
        return f"keyHash matches none of the record's keys ({', '.join(keys) or 'none'})"
    return ""


def _dump_index(config, file_name, start_entry, limit, view) -> list[dict]:
    directory = config.index_dir
    names = sorted(n for n in os.listdir(directory) if n.isdigit()) if os.path.isdir(directory) else []
    if file_name:
        if file_name not in names:
            raise StoreError(f"no index file {file_name!r} in {directory}")
        names = [file_name]
    slots, entries = config.max_hash_slot_num, config.max_index_num
    rows = []
    for name in names:
        path = os.path.join(directory, name)
        size = os.path.getsize(path)
        if size != index_file_size(slots, entries):
            rows.append({"file": name, "entry": None, "error": f"size {size} does not match config"})
            continue
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), size,
                                                   access=mmap.ACCESS_READ) as buffer:
            header = decode_header(buffer)
            count = min(max(header.index_count, 1), entries)
            for number in range(max(1, start_entry), count):
                if len(rows) >= limit:
                    return rows
                key_hash, phy, diff, prev = ENTRY_STRUCT.unpack_from(
                    buffer, entry_position(slots, number))
                row = {"file": name, "entry": number, "keyHash": key_hash, "slot":
                       key_hash % slots, "phyOffset": phy, "timeDiffS": diff, "prevIndex": prev,
                       "storeTimeMs": header.begin_timestamp + diff * 1000}
                if view is not None:
                    prev_hash = ENTRY_STRUCT.unpack_from(buffer, entry_position(slots, prev))[0] \
                        if 0 < prev < number else None
                    problem = _entry_problem(view, slots, number, key_hash, phy, prev, prev_hash)
                    row.update(valid=not problem, problem=problem or None)
                rows.append(row)
    return rows
