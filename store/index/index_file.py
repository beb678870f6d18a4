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
writer in another process may be appending to it. The query side (key hashing, chain walks, the dumps)
is `store.index.index_query`; this module opens, writes and closes the file.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from store.codec.index_codec import (
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
from store.index.index_query import IndexFileQueries
from store.kernel import index_put
from store.mappedfile.mapped_file import create_sparse_file

_pack_entry = ENTRY_STRUCT.pack_into
_pack_header = HEADER_STRUCT.pack_into
_pack_slot = SLOT_STRUCT.pack_into
_unpack_slot = SLOT_STRUCT.unpack_from


class IndexFile(IndexFileQueries):
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
        fills up; the caller continues in a new file). Entries, chains and slots are written by
        `store.kernel.index_put` (C, outside the GIL; its twin does it with numpy). The header is
        left to `write_header`.
        """
        if self.read_only:
            raise ReadOnlyStoreError(f"index file {self.path} is read-only")
        start_count = self.index_count
        count, new_chains = index_put(
            self._require_map(), self.max_hash_slot_num, self.max_index_num, start_count,
            self.begin_timestamp, np.ascontiguousarray(key_hashes, dtype=np.int64),
            np.ascontiguousarray(phy_offsets, dtype=np.int64),
            np.ascontiguousarray(store_timestamps, dtype=np.int64))
        if count <= 0:
            return 0
        if start_count <= 1:
            self.begin_phy_offset = int(phy_offsets[0])
            self.begin_timestamp = int(store_timestamps[0])
        self.hash_slot_count += new_chains
        self.index_count = start_count + count
        self.end_phy_offset = int(phy_offsets[count - 1])
        self.end_timestamp = int(store_timestamps[count - 1])
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

