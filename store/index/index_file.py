"""One index file (RocketMQ's `IndexFile` + `IndexHeader`, spec §5), memory-mapped.

Layout (all big-endian; codec and field table in `store.codec.index_codec`):

| part       | position                          | size_bytes              | meaning                            |
|------------|-----------------------------------|-------------------------|------------------------------------|
| header     | 0                                 | 40                      | times, phy offsets, counters       |
| slot table | 40                                | 4 x max_hash_slot_num   | newest entry number per hash slot  |
| entries    | 40 + 4 x max_hash_slot_num        | 20 x max_index_num      | (keyHash, phyOffset, timeDiff, prev) |

The in-memory header mirrors RocketMQ's atomics: `index_count` is at least 1 even when the disk still
holds 0 (a brand-new file), and every put writes the header straight into the map, as the broker does,
so a reader in another process sees a consistent file without a flush.

A read-only file is mapped with ACCESS_READ and re-reads its header before every query, because a
writer in another process may be appending to it.
"""

from __future__ import annotations

import mmap
import os
import sys
from dataclasses import dataclass

import numpy as np

from store.codec.index_codec import (
    ENTRY_DTYPE,
    ENTRY_STRUCT,
    HASH_SLOT_SIZE,
    HEADER_STRUCT,
    INDEX_COUNT_POSITION,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    SLOT_STRUCT,
    IndexHeader,
    index_file_size,
    time_diff_seconds,
)
from store.codec.javahash import index_key_hash
from store.errors import CorruptDataError, ReadOnlyStoreError, StoreClosedError
from store.mappedfile.mapped_file import create_sparse_file

_pack_entry = ENTRY_STRUCT.pack_into
_pack_header = HEADER_STRUCT.pack_into
_pack_slot = SLOT_STRUCT.pack_into
_unpack_slot = SLOT_STRUCT.unpack_from
_unpack_entry = ENTRY_STRUCT.unpack_from
_MASK32 = 0xFFFFFFFF
_BYTE_ORDER = sys.byteorder
try:   # the compiled kernel's Java hash of a list of strings: native int32s in a bytes object
    from store.kernel import COMPILED as _KERNEL_COMPILED
    from store.kernel import _native as _KERNEL
    _native_hashes = _KERNEL.java_hashes if _KERNEL_COMPILED else None
except (ImportError, AttributeError):
    _native_hashes = None
_INT32_MIN_UNSIGNED = 0x80000000
_PREFIX_STATES: dict[str, int] = {}   # "topic#" -> Java hash state after it (unsigned 32-bit)
_MAX_PREFIX_STATES = 4096


def query_key_hash(key_string: str, prefix_length: int = 0) -> int:
    """`index_key_hash(key_string)` (abs of Java's hashCode, 0 for Integer.MIN_VALUE), faster.

    With the compiled kernel, one C call. Otherwise Java's hash, a left-to-right loop, resumes
    from the cached state after the first `prefix_length` characters (a query's "topic#", the
    same for every query of a topic), so only the rest is hashed per query. Non-ASCII strings
    take `index_key_hash`.
    """
    if not key_string.isascii():
        return index_key_hash(key_string)
    if _native_hashes is not None:
        h = int.from_bytes(_native_hashes([key_string]), _BYTE_ORDER)  # unsigned 32-bit
    else:
        h = 0
        rest = key_string
        if prefix_length:
            prefix = key_string[:prefix_length]
            h = _PREFIX_STATES.get(prefix, -1)
            if h < 0:
                h = 0
                for byte in prefix.encode("ascii"):
                    h = (31 * h + byte) & _MASK32
                if len(_PREFIX_STATES) >= _MAX_PREFIX_STATES:
                    _PREFIX_STATES.clear()
                _PREFIX_STATES[prefix] = h
            rest = key_string[prefix_length:]
        for byte in rest.encode("ascii"):
            h = (31 * h + byte) & _MASK32
    if h < _INT32_MIN_UNSIGNED:
        return h
    return 0 if h == _INT32_MIN_UNSIGNED else (1 << 32) - h


@dataclass(frozen=True, slots=True)
class ChainStep:
    """One hop of a slot chain, for the teaching view (`IndexFile.walk_chain`)."""

    slot: int
    entry_number: int
    key_hash: int
    phy_offset: int
    time_diff_s: int
    store_time_ms: int          # begin_timestamp + time_diff_s * 1000, as the query computes it
    prev_index: int
    hash_matches: bool


class IndexFile:
    """A single index file. Callers serialize writes (dispatch is single-threaded)."""

    def __init__(self, path: str | os.PathLike, max_hash_slot_num: int, max_index_num: int, *,
                 read_only: bool = False, create: bool = False,
                 prev_end_phy_offset: int = 0, prev_end_timestamp: int = 0):
        """Open (or with `create=True` make) the index file at `path`.

        For a new file, `prev_end_phy_offset` / `prev_end_timestamp` are the previous file's end
        values: spec §5.7 initializes begin and end of the new header from them when they are > 0.
        """
        assert max_hash_slot_num > 0 and max_index_num > 1
        self.path = os.fspath(path)
        self.name = os.path.basename(self.path)
        self.max_hash_slot_num = max_hash_slot_num
        self.max_index_num = max_index_num
        self.read_only = read_only
        self.file_size_bytes = index_file_size(max_hash_slot_num, max_index_num)
        self._entries_position = INDEX_HEADER_SIZE + max_hash_slot_num * HASH_SLOT_SIZE
        if create:
            if read_only:
                raise ReadOnlyStoreError(f"cannot create index file {self.path} read-only")
            if os.path.exists(self.path):
                raise FileExistsError(f"index file {self.path} already exists")
            # Created at full size under a temporary name, then renamed (and the directory synced):
            # a crash never leaves a short index file behind.
            create_sparse_file(self.path, self.file_size_bytes)
        actual_size = os.path.getsize(self.path)
        if actual_size != self.file_size_bytes:
            raise CorruptDataError(
                self.path, actual_size,
                f"index file is {actual_size} bytes, expected {self.file_size_bytes} "
                f"(maxHashSlotNum={max_hash_slot_num}, maxIndexNum={max_index_num})")
        with open(self.path, "rb" if read_only else "r+b") as handle:
            access = mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE
            self._map: mmap.mmap | None = mmap.mmap(handle.fileno(), self.file_size_bytes,
                                                    access=access)
        self.closed = False
        self.dirty = False
        self._load_header()
        if create:
            # IndexFile(..., endPhyOffset, endTimestamp): set only when > 0, written into the map.
            if prev_end_phy_offset > 0:
                self.begin_phy_offset = self.end_phy_offset = prev_end_phy_offset
            if prev_end_timestamp > 0:
                self.begin_timestamp = self.end_timestamp = prev_end_timestamp
            self._write_header(disk_index_count=0)

    # -- header ------------------------------------------------------------------------------------

    def _load_header(self) -> None:
        """Read the header from the map (IndexHeader.load): index_count <= 0 counts as 1."""
        values = HEADER_STRUCT.unpack_from(self._require_map(), 0)
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, index_count) = values
        if index_count > self.max_index_num:
            raise CorruptDataError(self.path, INDEX_COUNT_POSITION,
                                   f"indexCount {index_count} > maxIndexNum {self.max_index_num}")
        self.index_count = index_count if index_count > 0 else 1

    def _write_header(self, disk_index_count: int | None = None) -> None:
        count = self.index_count if disk_index_count is None else disk_index_count
        _pack_header(self._require_map(), 0, self.begin_timestamp, self.end_timestamp,
                     self.begin_phy_offset, self.end_phy_offset, self.hash_slot_count, count)

    def header(self) -> IndexHeader:
        """The header as stored on disk (a read-only file re-reads it first)."""
        if self.read_only:
            self._load_header()
        return IndexHeader(*HEADER_STRUCT.unpack_from(self._require_map(), 0))

    def refresh(self) -> None:
        """Re-read the header (for a read-only file another process writes to)."""
        self._load_header()

    def is_full(self) -> bool:
        """isWriteFull: no entry left (capacity is max_index_num - 1 entries)."""
        return self.index_count >= self.max_index_num

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """Spec §5.8 timeMatched."""
        first, last = self.begin_timestamp, self.end_timestamp
        return ((begin_ms < first and end_ms > last) or (first <= begin_ms <= last)
                or (first <= end_ms <= last))

    # -- write -------------------------------------------------------------------------------------

    def put_key(self, key_string: str, phy_offset: int, store_timestamp: int, *,
                key_hash: int | None = None, write_header: bool = True) -> bool:
        """Insert `key_string` (``topic#key``) per spec §5.5; False when the file is full.

        `key_hash` may be passed precomputed (batch dispatch hashes many keys at once).
        `write_header=False` leaves the on-disk header to a later `write_header()`: a reader never
        follows a slot to an entry number above the header's count, so a stale header is safe.
        """
        if self.read_only:
            raise ReadOnlyStoreError(f"index file {self.path} is read-only")
        index_count = self.index_count
        if index_count >= self.max_index_num:
            return False
        buf = self._require_map()
        if key_hash is None:
            key_hash = index_key_hash(key_string)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.max_hash_slot_num) * HASH_SLOT_SIZE
        slot_value = _unpack_slot(buf, slot_pos)[0]
        if slot_value <= 0 or slot_value > index_count:
            slot_value = 0
        time_diff_s = time_diff_seconds(store_timestamp, self.begin_timestamp)
        _pack_entry(buf, self._entries_position + index_count * INDEX_ENTRY_SIZE,
                    key_hash, phy_offset, time_diff_s, slot_value)
        _pack_slot(buf, slot_pos, index_count)
        if index_count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count = index_count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        if write_header:
            _pack_header(buf, 0, self.begin_timestamp, store_timestamp, self.begin_phy_offset,
                         phy_offset, self.hash_slot_count, index_count + 1)
        else:
            self._header_stale = True
        self.dirty = True
        return True

    def put_keys(self, key_hashes: np.ndarray, phy_offsets: np.ndarray,
                 store_timestamps: np.ndarray) -> int:
        """Insert many keys at once, exactly as that many `put_key` calls would (spec §5.5).

        Arrays are int64, in dispatch order. Returns how many were inserted (fewer when the file
        fills up; the caller continues in a new file). Entries, chains and slots are computed with
        numpy: inside the batch, a key's `prevIndex` is the previous key of the batch in the same
        slot, or the slot's value before the batch (0 when that is out of range).
        """
        if self.read_only:
            raise ReadOnlyStoreError(f"index file {self.path} is read-only")
        start_count = self.index_count
        count = min(len(key_hashes), self.max_index_num - start_count)
        if count <= 0:
            return 0
        key_hashes = key_hashes[:count]
        phy_offsets = phy_offsets[:count]
        store_timestamps = store_timestamps[:count]
        buf = self._require_map()
        slots_view = np.frombuffer(buf, dtype=">i4", count=self.max_hash_slot_num,
                                   offset=INDEX_HEADER_SIZE)
        slots = key_hashes % self.max_hash_slot_num
        entry_numbers = np.arange(start_count, start_count + count, dtype=np.int64)
        # Keys grouped by slot, keeping dispatch order inside a group (stable sort).
        order = np.argsort(slots, kind="stable")
        sorted_slots = slots[order]
        first_in_group = np.ones(count, dtype=bool)
        first_in_group[1:] = sorted_slots[1:] != sorted_slots[:-1]
        previous = np.empty(count, dtype=np.int64)
        previous[1:] = entry_numbers[order][:-1]
        old_values = slots_view[sorted_slots].astype(np.int64)
        old_values[(old_values <= 0) | (old_values > start_count)] = 0
        previous[first_in_group] = old_values[first_in_group]
        prev_index = np.empty(count, dtype=np.int64)
        prev_index[order] = previous
        # timeDiff against the header's begin time as it was before each put: the first put of a
        # fresh file uses the begin time inherited from the previous file (spec §5.7 quirk).
        begin = self.begin_timestamp
        fresh = start_count <= 1
        first_ts = int(store_timestamps[0])
        begins = np.full(count, first_ts if fresh else begin, dtype=np.int64)
        begins[0] = begin
        diffs = store_timestamps - begins
        time_diff = np.where(diffs < 0, -((-diffs) // 1000), diffs // 1000)  # Java truncation
        time_diff = np.clip(time_diff, 0, 2**31 - 1)
        time_diff[begins <= 0] = 0
        entries = np.frombuffer(buf, dtype=ENTRY_DTYPE, count=count,
                                offset=self._entries_position + start_count * INDEX_ENTRY_SIZE)
        entries["key_hash"] = key_hashes
        entries["phy_offset"] = phy_offsets
        entries["time_diff_s"] = time_diff
        entries["prev_index"] = prev_index
        last_in_group = np.ones(count, dtype=bool)
        last_in_group[:-1] = sorted_slots[1:] != sorted_slots[:-1]
        slots_view[sorted_slots[last_in_group]] = entry_numbers[order][last_in_group]
        del slots_view, entries
        if fresh:
            self.begin_phy_offset = int(phy_offsets[0])
            self.begin_timestamp = first_ts
        self.hash_slot_count += int(np.count_nonzero(previous[first_in_group] == 0))
        self.index_count = start_count + count
        self.end_phy_offset = int(phy_offsets[-1])
        self.end_timestamp = int(store_timestamps[-1])
        self._header_stale = True
        self.dirty = True
        return count

    def write_header(self) -> None:
        """Write the in-memory header fields into the map (after puts with write_header=False)."""
        if getattr(self, "_header_stale", False) and not self.read_only and self._map is not None:
            self._header_stale = False
            _pack_header(self._map, 0, self.begin_timestamp, self.end_timestamp,
                         self.begin_phy_offset, self.end_phy_offset, self.hash_slot_count,
                         self.index_count)

    def flush(self) -> None:
        """IndexFile.flush: write the in-memory header (index_count >= 1) and force the map."""
        if self.read_only or self._map is None:
            return
        self._write_header()
        self._map.flush()
        self.dirty = False

    # -- read --------------------------------------------------------------------------------------

    def select(self, result: list[int], key_string: str, max_num: int, begin_ms: int,
               end_ms: int, key_hash: int | None = None) -> None:
        """selectPhyOffset (spec §5.8): append matching phy offsets, newest first, to `result`.

        `key_hash` may be passed precomputed (`query_key_hash(key_string)`; a query walks several
        files with the same key)."""
        if self.read_only:
            self._load_header()
        buf = self._require_map()
        index_count = self.index_count
        if key_hash is None:
            key_hash = query_key_hash(key_string)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.max_hash_slot_num) * HASH_SLOT_SIZE
        entry_number = _unpack_slot(buf, slot_pos)[0]
        if entry_number <= 0 or entry_number > index_count or index_count <= 1:
            return
        begin_timestamp = self.begin_timestamp
        entries_position = self._entries_position
        # A valid chain visits each entry at most once; the bound also stops a corrupt cycle,
        # where the broker would loop until max_num (or forever).
        for _step in range(index_count):
            if len(result) >= max_num:
                return
            if entry_number >= self.max_index_num:
                return      # only possible in a corrupt file whose indexCount equals maxIndexNum
            read_hash, read_phy, time_diff_s, prev = _unpack_entry(
                buf, entries_position + entry_number * INDEX_ENTRY_SIZE)
            if time_diff_s < 0:
                return
            time_ms = begin_timestamp + time_diff_s * 1000
            if read_hash == key_hash and begin_ms <= time_ms <= end_ms:
                result.append(read_phy)
            if prev <= 0 or prev > index_count or prev == entry_number or time_ms < begin_ms:
                return
            entry_number = prev

    def walk_chain(self, key_string: str) -> list[ChainStep]:
        """Every hop of the chain `key_string` hashes to (whatever the time), for the teaching view.

        Follows the same stop rules as `select` except the time window; at most index_count steps.
        """
        if self.read_only:
            self._load_header()
        buf = self._require_map()
        key_hash = query_key_hash(key_string)
        slot = key_hash % self.max_hash_slot_num
        entry_number = _unpack_slot(buf, INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE)[0]
        steps: list[ChainStep] = []
        if entry_number <= 0 or entry_number > self.index_count or self.index_count <= 1:
            return steps
        for _step in range(self.index_count):
            if entry_number >= self.max_index_num:
                break
            read_hash, read_phy, time_diff_s, prev = _unpack_entry(
                buf, self._entries_position + entry_number * INDEX_ENTRY_SIZE)
            steps.append(ChainStep(slot, entry_number, read_hash, read_phy, time_diff_s,
                                   self.begin_timestamp + time_diff_s * 1000, prev,
                                   read_hash == key_hash))
            if time_diff_s < 0 or prev <= 0 or prev > self.index_count or prev == entry_number:
                break
            entry_number = prev
        return steps

    def slot_table(self) -> np.ndarray:
        """All hash slots as a native int32 array (a copy, so the map can be closed)."""
        view = np.frombuffer(self._require_map(), dtype=">i4", count=self.max_hash_slot_num,
                             offset=INDEX_HEADER_SIZE)
        return view.astype(np.int32)

    def entries(self) -> np.ndarray:
        """Entries 0 .. index_count-1 as a structured array (a copy; row number = entry number,
        row 0 is the unused entry 0)."""
        if self.read_only:
            self._load_header()
        count = min(self.index_count, self.max_index_num)
        view = np.frombuffer(self._require_map(), dtype=ENTRY_DTYPE, count=count,
                             offset=self._entries_position)
        return view.copy()

    def read_bytes(self) -> bytes:
        """The whole file content (for tests and dumps)."""
        return bytes(self._require_map())

    # -- lifecycle ---------------------------------------------------------------------------------

    def _require_map(self) -> mmap.mmap:
        if self._map is None:
            raise StoreClosedError(f"index file {self.path} is closed")
        return self._map

    def close(self) -> None:
        """Unmap (does not flush: callers flush first when they want the header forced)."""
        if self._map is not None:
            self._map.close()
            self._map = None
        self.closed = True

    def destroy(self) -> None:
        """Close and delete the file."""
        if self.read_only:
            raise ReadOnlyStoreError(f"cannot delete index file {self.path} read-only")
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return (f"IndexFile({self.name!r}, index_count={self.index_count}, "
                f"end_phy_offset={self.end_phy_offset}, end_timestamp={self.end_timestamp})")

