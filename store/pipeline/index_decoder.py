"""Index files -> Arrow: headers, entries and occupied slots (spec §5).

Header (40 bytes): begin_timestamp 0/8, end_timestamp 8/8, begin_phy_offset 16/8, end_phy_offset 24/8,
hash_slot_count 32/4, index_count 36/4. Slot table: `max_hash_slot_num` ints at 40. Entry `e`
(1 <= e < index_count) at `40 + 4*max_hash_slot_num + 20*e`: key_hash 0/4, phy_offset 4/8,
time_diff_s 12/4, prev_index 16/4.

An index file does not record its geometry (`maxHashSlotNum`, `maxIndexNum`), yet every position depends
on it. `IndexGeometry.resolve` takes it from, in order: explicit values, the store's `store.properties`,
a full file of the same size in the same directory (full means index_count == max_index_num), the
defaults if the size matches, and finally a vectorised search over all geometries that fit the file
size, keeping the one where the newest entry is the head of its own slot (always true for a real file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from store.errors import CorruptDataError
from store.pipeline.arrowkit import gather_int
from store.pipeline.layout import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, config_int, read_store_properties
from store.pipeline.segment_reader import map_file

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
HEADER_DTYPE = np.dtype([
    ("begin_timestamp", ">i8"), ("end_timestamp", ">i8"), ("begin_phy_offset", ">i8"),
    ("end_phy_offset", ">i8"), ("hash_slot_count", ">i4"), ("index_count", ">i4"),
])
ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff_s", ">i4"), ("prev_index", ">i4")])
assert HEADER_DTYPE.itemsize == INDEX_HEADER_SIZE and ENTRY_DTYPE.itemsize == INDEX_ENTRY_SIZE

INDEX_HEADER_COLUMNS: dict[str, pa.DataType] = {
    "file_name": pa.string(), "file_size": pa.int64(), "begin_timestamp": pa.int64(), "end_timestamp": pa.int64(),
    "begin_phy_offset": pa.int64(), "end_phy_offset": pa.int64(), "hash_slot_count": pa.int32(),
    "index_count": pa.int32(), "max_hash_slot_num": pa.int32(), "max_index_num": pa.int32(),
}
INDEX_ENTRY_COLUMNS: dict[str, pa.DataType] = {
    "file_name": pa.string(), "entry_number": pa.int32(), "key_hash": pa.int32(), "slot": pa.int32(),
    "phy_offset": pa.int64(), "time_diff_s": pa.int32(), "prev_index": pa.int32(),
    "store_timestamp": pa.int64(),  # begin_timestamp + time_diff_s * 1000, as a query computes it
    "slot_head": pa.bool_(),  # the slot points at this entry (the newest of its chain)
}
INDEX_SLOT_COLUMNS: dict[str, pa.DataType] = {"file_name": pa.string(), "slot": pa.int32(), "entry_number": pa.int32()}
INDEX_SCHEMAS = {
    "entries": pa.schema(list(INDEX_ENTRY_COLUMNS.items())),
    "headers": pa.schema(list(INDEX_HEADER_COLUMNS.items())),
    "slots": pa.schema(list(INDEX_SLOT_COLUMNS.items())),
}


@dataclass(frozen=True, slots=True)
class IndexGeometry:
    max_hash_slot_num: int
    max_index_num: int

    @property
    def file_size(self) -> int:
        return INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * self.max_hash_slot_num + INDEX_ENTRY_SIZE * self.max_index_num

    @staticmethod
    def resolve(paths: list[str], store_dir: str | None, hint: "IndexGeometry | None" = None) -> dict[str, "IndexGeometry"]:
        """Geometry of every index file in `paths` (see the module docstring for the order of sources)."""
        config = read_store_properties(store_dir) if store_dir else {}
        configured = hint
        if configured is None and ("maxHashSlotNum" in config or "maxIndexNum" in config):
            configured = IndexGeometry(config_int(config, "maxHashSlotNum", DEFAULT_MAX_HASH_SLOT_NUM),
                                       config_int(config, "maxIndexNum", DEFAULT_MAX_INDEX_NUM))
        by_size: dict[int, IndexGeometry] = {}
        sizes = {p: os.path.getsize(p) for p in paths}
        if configured is not None:
            by_size = {size: configured for size in sizes.values() if size == configured.file_size}
        for path, size in sizes.items():
            if size in by_size or size < INDEX_HEADER_SIZE:
                continue
            header = read_header(map_file(path))
            candidate = IndexGeometry((size - INDEX_HEADER_SIZE - INDEX_ENTRY_SIZE * header["index_count"]) // 4,
                                      header["index_count"])
            if header["index_count"] > 1 and candidate.file_size == size and _consistent(map_file(path), candidate):
                by_size[size] = candidate  # a full file pins the geometry down
        default = IndexGeometry(DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM)
        by_size.setdefault(default.file_size, default)
        result = {}
        for path, size in sizes.items():
            if size not in by_size:
                by_size[size] = _search_geometry(path, size)
            result[path] = by_size[size]
        return result


def read_header(buf: np.ndarray) -> dict[str, int]:
    if buf.shape[0] < INDEX_HEADER_SIZE:
        raise CorruptDataError(None, 0, f"index file of {buf.shape[0]} bytes has no 40-byte header")
    header = buf[:INDEX_HEADER_SIZE].view(HEADER_DTYPE)[0]
    return {name: int(header[name]) for name in HEADER_DTYPE.names}


def _consistent(buf: np.ndarray, geometry: IndexGeometry) -> bool:
    """The newest entry must be the head of the slot its key hash maps to."""
    count = read_header(buf)["index_count"]
    if count <= 1 or geometry.max_hash_slot_num <= 0:
        return count <= 1
    newest_at = INDEX_HEADER_SIZE + 4 * geometry.max_hash_slot_num + INDEX_ENTRY_SIZE * (count - 1)
    key_hash = int(gather_int(buf, np.array([newest_at]), 4)[0])
    slot_at = INDEX_HEADER_SIZE + 4 * (key_hash % geometry.max_hash_slot_num)
    return key_hash >= 0 and int(gather_int(buf, np.array([slot_at]), 4)[0]) == count - 1


def _search_geometry(path: str, size: int) -> IndexGeometry:
    buf = map_file(path)
    count = read_header(buf)["index_count"]
    if count <= 1:
        raise CorruptDataError(path, 0, "cannot infer maxHashSlotNum/maxIndexNum of an empty index file; "
                                        "pass them explicitly")
    entry_nums = np.arange(count, (size - INDEX_HEADER_SIZE) // INDEX_ENTRY_SIZE + 1, dtype=np.int64)
    slots = (size - INDEX_HEADER_SIZE - INDEX_ENTRY_SIZE * entry_nums) // 4
    fits = (slots > 0) & (INDEX_HEADER_SIZE + 4 * slots + INDEX_ENTRY_SIZE * entry_nums == size)
    entry_nums, slots = entry_nums[fits], slots[fits]
    newest_at = INDEX_HEADER_SIZE + 4 * slots + INDEX_ENTRY_SIZE * (count - 1)
    key_hash = gather_int(buf, newest_at, 4)
    slot_at = INDEX_HEADER_SIZE + 4 * (np.abs(key_hash) % slots)
    good = (key_hash >= 0) & (gather_int(buf, slot_at, 4) == count - 1)
    if int(good.sum()) != 1:
        raise CorruptDataError(path, 0, f"{int(good.sum())} index geometries fit this file; pass "
                                        "max_hash_slot_num/max_index_num explicitly")
    i = int(np.argmax(good))
    return IndexGeometry(int(slots[i]), int(entry_nums[i]))


def header_batch(paths: list[str], geometries: dict[str, IndexGeometry]) -> pa.RecordBatch:
    rows = []
    for path in paths:
        header = read_header(map_file(path))
        geometry = geometries[path]
        rows.append({"file_name": os.path.basename(path), "file_size": os.path.getsize(path), **header,
                     "max_hash_slot_num": geometry.max_hash_slot_num, "max_index_num": geometry.max_index_num})
    return pa.RecordBatch.from_pylist(rows, schema=INDEX_SCHEMAS["headers"])


def entry_batch(path: str, geometry: IndexGeometry) -> pa.RecordBatch:
    """Entries 1 .. index_count-1 of one file (entry 0 is never used)."""
    buf = map_file(path)
    header = read_header(buf)
    count = min(max(header["index_count"], 1), geometry.max_index_num)
    table_at = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * geometry.max_hash_slot_num
    entries = buf[table_at + INDEX_ENTRY_SIZE : table_at + INDEX_ENTRY_SIZE * count].view(ENTRY_DTYPE)
    slot_table = buf[INDEX_HEADER_SIZE:table_at].view(">i4")
    numbers = np.arange(1, count, dtype=np.int32)
    key_hash = entries["key_hash"].astype(np.int32)
    slot = (np.abs(key_hash.astype(np.int64)) % geometry.max_hash_slot_num).astype(np.int32)
    time_diff = entries["time_diff_s"].astype(np.int32)
    arrays = {
        "file_name": pa.array([os.path.basename(path)], pa.string()).take(pa.array(np.zeros(count - 1, np.int64))),
        "entry_number": pa.array(numbers), "key_hash": pa.array(key_hash), "slot": pa.array(slot),
        "phy_offset": pa.array(entries["phy_offset"].astype(np.int64)), "time_diff_s": pa.array(time_diff),
        "prev_index": pa.array(entries["prev_index"].astype(np.int32)),
        "store_timestamp": pa.array(header["begin_timestamp"] + time_diff.astype(np.int64) * 1000),
        "slot_head": pa.array(slot_table[slot].astype(np.int64) == numbers),
    }
    return pa.RecordBatch.from_arrays([arrays[c] for c in INDEX_ENTRY_COLUMNS], schema=INDEX_SCHEMAS["entries"])


def slot_batch(path: str, geometry: IndexGeometry) -> pa.RecordBatch:
    """Occupied slots (value > 0) of one file."""
    buf = map_file(path)
    slot_table = buf[INDEX_HEADER_SIZE : INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * geometry.max_hash_slot_num].view(">i4")
    occupied = np.flatnonzero(slot_table > 0).astype(np.int32)
    n = occupied.shape[0]
    return pa.RecordBatch.from_arrays(
        [pa.array([os.path.basename(path)], pa.string()).take(pa.array(np.zeros(n, np.int64))),
         pa.array(occupied), pa.array(slot_table[occupied].astype(np.int32))],
        schema=INDEX_SCHEMAS["slots"],
    )
