"""`getOffsetInQueueByTime` for one file-based consume queue (spec §10.3).

* "nearest" (4.9.7): the file is the first whose filesystem mtime >= the time (else the last); then the
  nearest-match binary search inside it. No clamping.
* "lower" / "upper" (5.x): the file is chosen from the store times of each file's first / last unit
  (cached per file, like RocketMQ's start/stop timestamps); then the boundary search inside the written
  part; the result is clamped to the queue's [min, max] offset as `DefaultMessageStore` does.
"""

from __future__ import annotations

from store.codec.cq_unit import CQ_UNIT_SIZE, UNIT_STRUCT
from store.consumequeue.base import StoreTimeOf, check_boundary
from store.kernel.lookup import cq_search_nearest_fast, cq_search_nearest_py
from store.consumequeue.time_search import (
    LOWER,
    NEAREST,
    UPPER,
    java_div,
    relative_to_queue_offset,
    search_boundary_units,
    search_nearest_units,
)


def offset_by_time(queue, timestamp_ms: int, boundary: str, store_time_of: StoreTimeOf) -> int:
    check_boundary(boundary)
    if boundary == NEAREST:
        return nearest_offset_by_time(queue, timestamp_ms, store_time_of)
    result = _boundary(queue, timestamp_ms, boundary, store_time_of)
    return min(max(result, queue.min_offset()), queue.max_offset())


def nearest_offset_by_time(queue, timestamp_ms: int, store_time_of: StoreTimeOf) -> int:
    """`offset_by_time(queue, timestamp_ms, "nearest", store_time_of)` (4.9.7)."""
    files = queue.mapped_files.files
    if not files:
        return 0
    # The first file modified at or after the time, else the last one: the last file is the answer
    # either way, so only the others need a stat.
    if len(files) == 1:
        mapped = files[0]
    else:
        mapped = next((f for f in files[:-1] if f.mtime_ms() >= timestamp_ms), files[-1])
    read_position = mapped.read_position
    if read_position == 0:
        return 0
    low_bytes = queue.min_logic_offset - mapped.file_from_offset
    # Units are read from the map as the search probes them (~log2(n) of them): copying the file
    # (300,000 units by default) per lookup would dominate its cost.
    segments = getattr(store_time_of, "segments", None)
    if segments is not None:     # search_nearest_units' compiled case, called directly
        args = (mapped.buffer, low_bytes // CQ_UNIT_SIZE if low_bytes > 0 else 0,
                read_position // CQ_UNIT_SIZE - 1, timestamp_ms, queue.commit_log_min_offset,
                *segments, store_time_of)
        index = cq_search_nearest_fast(*args)
        if index is NotImplemented:          # the C asks its twin
            index = cq_search_nearest_py(*args)
    else:
        index = search_nearest_units(mapped.buffer, store_time_of,
                                     low_bytes // CQ_UNIT_SIZE if low_bytes > 0 else 0,
                                     read_position // CQ_UNIT_SIZE - 1, timestamp_ms,
                                     queue.commit_log_min_offset)
    if index is None:
        return 0
    if index < 0:
        return java_div(mapped.file_from_offset - 1, CQ_UNIT_SIZE)
    return (mapped.file_from_offset + index * CQ_UNIT_SIZE) // CQ_UNIT_SIZE


def _unit_time(queue, mapped, position: int, kind: str, store_time_of: StoreTimeOf) -> int:
    key = (mapped.file_from_offset, kind)
    cached = queue.time_cache.get(key)
    if cached is not None:
        return cached
    if position + CQ_UNIT_SIZE > mapped.read_position:
        return -1
    phy_offset, size, _ = UNIT_STRUCT.unpack_from(mapped.buffer, position)
    store_time = store_time_of(phy_offset, size)
    if store_time > 0:
        queue.time_cache[key] = store_time  # RocketMQ caches only successful reads
    return store_time


def _choose_file(queue, timestamp_ms: int, boundary: str, store_time_of: StoreTimeOf):
    files = queue.mapped_files.files
    if not files:
        return None
    last_index = len(files) - 1
    if boundary == LOWER:
        for index, mapped in enumerate(files[:-1]):
            stop = _unit_time(queue, mapped, queue.file_size_bytes - CQ_UNIT_SIZE, "stop",
                              store_time_of)
            if stop >= timestamp_ms:
                return mapped
        return files[last_index]
    for mapped in reversed(files):
        if _unit_time(queue, mapped, 0, "start", store_time_of) <= timestamp_ms:
            return mapped
    return None


def _boundary(queue, timestamp_ms: int, boundary: str, store_time_of: StoreTimeOf) -> int:
    mapped = _choose_file(queue, timestamp_ms, boundary, store_time_of)
    if mapped is None:
        return 0
    range_bytes = queue.file_size_bytes
    if 0 < mapped.wrote_position < queue.file_size_bytes:
        range_bytes = mapped.wrote_position  # the file being written
    if range_bytes > mapped.read_position:
        return 0  # selectMappedBuffer(0, range) fails
    base = mapped.file_from_offset // CQ_UNIT_SIZE
    floor = max(queue.min_logic_offset - mapped.file_from_offset, 0) // CQ_UNIT_SIZE
    ceiling = range_bytes // CQ_UNIT_SIZE - 1
    if floor > ceiling:
        # RocketMQ would read past its buffer here; the min offset is the only sensible answer.
        return relative_to_queue_offset(base, floor)
    return search_boundary_units(mapped.buffer, store_time_of, floor, ceiling, timestamp_ms,
                                 queue.commit_log_min_offset, boundary, base, all_later_lower=base)


__all__ = ["LOWER", "NEAREST", "UPPER", "offset_by_time"]
