"""The lookups' kernels (`c/lookup.c`) and their pure-Python twins.

| function          | what                                                                          |
|-------------------|-------------------------------------------------------------------------------|
| index_select      | IndexFile.selectPhyOffset over one mapped index file (spec §5.8)              |
| cq_search_nearest | 4.9.7 getOffsetInQueueByTime inside one consume-queue file (spec §10.3)       |
| cq_nearest_queue  | the same for a file consume queue of one file, from the queue object          |
| cq_nearest_in     | the same from a store's queue table, under its lock, with the Python fallback  |
| cq_search_boundary | [5.x] the LOWER / UPPER search inside one consume-queue file (spec §10.3)    |
| read_message      | the record at a position of a commit-log segment, read and decoded            |

Each name is the compiled function when the kernel is built (and `RMQ_KERNEL=python` is not set),
else the twin; either way the answers are the same. The C answers NotImplemented where the Python
path would raise or where an argument is outside what it handles (not an int64, or past +-2**62
where it is added); the dispatchers here then run the twin, which raises or answers as the Python
path always did.
May import: nothing of the store (see `store.kernel`).
"""

from __future__ import annotations

import struct

from store.kernel import _native

_unpack_slot = struct.Struct(">i").unpack_from
_unpack_entry = struct.Struct(">iqii").unpack_from
_unpack_phy_size = struct.Struct(">qi").unpack_from
_INDEX_HEADER_BYTES = 40
_SLOT_BYTES = 4
_ENTRY_BYTES = 20
_UNIT_BYTES = 20

_unpack_size_magic = struct.Struct(">ii").unpack_from
_MAGIC_V1, _MAGIC_V2 = -626843481, -626843477

_native_index_select = getattr(_native, "index_select", None)
_native_read_message = getattr(_native, "read_message", None)
_native_cq_search_nearest = getattr(_native, "cq_search_nearest", None)
_native_cq_nearest_queue = getattr(_native, "cq_nearest_queue", None)
_native_cq_nearest_in = getattr(_native, "cq_nearest_in", None)
_native_cq_search_boundary = getattr(_native, "cq_search_boundary", None)


def index_select_py(buf, key_hash: int, max_hash_slot_num: int, max_index_num: int,
                    index_count: int, begin_timestamp: int, max_num: int, begin_ms: int,
                    end_ms: int, result: list) -> None:
    """Append to `result` the phy offsets of the entries of `key_hash`'s chain in `buf` (a whole
    index file) stored in [begin_ms, end_ms], newest first, until it holds `max_num`.

    At most min(`index_count`, `max_index_num`) steps (IndexFile's header load refuses a count past
    max_index_num; a corrupt count from elsewhere must not make a cycle endless)."""
    entries_position = _INDEX_HEADER_BYTES + max_hash_slot_num * _SLOT_BYTES
    entry_number = _unpack_slot(
        buf, _INDEX_HEADER_BYTES + (key_hash % max_hash_slot_num) * _SLOT_BYTES)[0]
    if entry_number <= 0 or entry_number > index_count or index_count <= 1:
        return
    # A valid chain visits each entry at most once; the bound also stops a corrupt cycle, where the
    # broker would loop until max_num (or forever).
    for _step in range(min(index_count, max_index_num)):
        if len(result) >= max_num:
            return
        if entry_number >= max_index_num:
            return      # only possible in a corrupt file whose indexCount equals maxIndexNum
        read_hash, read_phy, time_diff_s, prev = _unpack_entry(
            buf, entries_position + entry_number * _ENTRY_BYTES)
        if time_diff_s < 0:
            return
        time_ms = begin_timestamp + time_diff_s * 1000
        if read_hash == key_hash and begin_ms <= time_ms <= end_ms:
            result.append(read_phy)
        if prev <= 0 or prev > index_count or prev == entry_number or time_ms < begin_ms:
            return
        entry_number = prev


def cq_search_nearest_py(units, low: int, high: int, timestamp_ms: int, min_phy_offset: int,
                         files, first_from: int, segment_bytes: int, count: int, reader):
    """4.9.7's nearest search over the CQ units in `units` (unit i at byte 20 * i) between relative
    indexes `low` and `high`: the index of the unit stored nearest `timestamp_ms` (ties: the earlier),
    -1 when none qualified, None when a store time could not be read.

    Store times come from `reader(phy_offset, size)` (store.lookups' store-time reader); the C reads
    the usual case straight from the commit log's segments `files[:count]` (starting at `first_from`,
    `segment_bytes` each), which that reader answers the same way.
    """
    stopped = _bisect_units_py(units, low, high, timestamp_ms, min_phy_offset, reader)
    if stopped is None:
        return None
    target, left, left_time, right, right_time = stopped
    if target != -1:
        return target
    if left_time == -1:
        return right
    if right_time == -1:
        return left
    return right if abs(timestamp_ms - left_time) > abs(timestamp_ms - right_time) else left


def _bisect_units_py(units, low: int, high: int, timestamp_ms: int, min_phy_offset: int, reader):
    """RocketMQ's probe loop over the units between relative indexes `low` and `high`, which both
    searches share (c/lookup.c's bisect_units): where it stopped, (target, left, left_time, right,
    right_time) (-1: none), or None when a store time could not be read."""
    target = left = right = -1
    left_time = right_time = -1
    while high >= low:
        mid = (low + high) // 2
        phy_offset, size = _unpack_phy_size(units, mid * _UNIT_BYTES)
        if phy_offset < min_phy_offset:
            low = mid + 1
            left = mid
            continue
        store_time = reader(phy_offset, size)
        if store_time is None or store_time < 0:
            return None
        if store_time == timestamp_ms:
            target = mid
            break
        if store_time > timestamp_ms:
            high = mid - 1
            right, right_time = mid, store_time
        else:
            low = mid + 1
            left, left_time = mid, store_time
    return target, left, left_time, right, right_time


def cq_nearest_queue_py(queue, timestamp_ms: int, reader):
    """store.consumequeue.file.time_search.nearest_offset_by_time for a file consume queue of at
    most one file (`queue.mapped_files.files`, `queue.min_logic_offset`,
    `queue.commit_log_min_offset`), the units searched by `cq_search_nearest_py` over
    `reader.segments`. NotImplemented for a queue of more files (4.9.7 picks the file by its mtime)
    or a reader without segments: the caller runs that Python path, which answers for every queue.
    """
    segments = getattr(reader, "segments", None)
    files = queue.mapped_files.files
    if segments is None or len(files) > 1:
        return NotImplemented
    if not files:
        return 0
    mapped = files[0]
    read_position = mapped.read_position
    if read_position == 0:
        return 0
    from_offset = mapped.file_from_offset
    low_bytes = queue.min_logic_offset - from_offset
    index = cq_search_nearest_py(mapped.buffer, low_bytes // _UNIT_BYTES if low_bytes > 0 else 0,
                                 read_position // _UNIT_BYTES - 1, timestamp_ms,
                                 queue.commit_log_min_offset, *segments, reader)
    if index is None:
        return 0
    if index < 0:       # (from_offset - 1) / 20 in Java: toward zero
        numerator = from_offset - 1
        return numerator // _UNIT_BYTES if numerator >= 0 else -(-numerator // _UNIT_BYTES)
    return (from_offset + index * _UNIT_BYTES) // _UNIT_BYTES


def cq_nearest_in_py(queues: dict, lock, fallback, topic, queue_id, timestamp_ms, reader):
    """A 4.9.7 time lookup in a file consume-queue store: 0 when `queues` has no (topic, queue_id);
    else, holding `lock`, `cq_nearest_queue` of that queue, or `fallback(queue, timestamp_ms,
    reader)` (the store's Python path) where it asks."""
    queue = queues.get((topic, queue_id))
    if queue is None:
        return 0
    with lock:
        answer = cq_nearest_queue_fast(queue, timestamp_ms, reader)
        return fallback(queue, timestamp_ms, reader) if answer is NotImplemented else answer


def cq_search_boundary_py(units, floor: int, ceiling: int, timestamp_ms: int,
                          min_phy_offset: int, files, first_from: int, segment_bytes: int,
                          count: int, reader, upper, base: int, all_later_lower: int) -> int:
    """[5.x] The LOWER (or UPPER, when `upper`) search over the CQ units in `units` between relative
    indexes `floor` and `ceiling`: a queue offset (`base` is relative index 0's), not yet clamped.

    store.consumequeue.time_search.search_boundary_units step for step, store times from
    `reader(phy_offset, size)` (the C reads the usual case from the segments, as cq_search_nearest).
    """
    def time_at(index: int):
        return reader(*_unpack_phy_size(units, index * _UNIT_BYTES))

    ceiling_time = time_at(ceiling)
    if ceiling_time is not None and ceiling_time < timestamp_ms:
        return base + ceiling if upper else base + ceiling + 1
    floor_time = time_at(floor)
    if floor_time is not None and floor_time > timestamp_ms:
        return 0 if upper else all_later_lower
    stopped = _bisect_units_py(units, floor, ceiling, timestamp_ms, min_phy_offset, reader)
    if stopped is None:
        return 0           # a store time not readable: RocketMQ answers 0
    target, left, _, right, _ = stopped
    if target != -1:
        step = 1 if upper else -1
        while (target + step <= ceiling if upper else target + step >= floor) and \
                time_at(target + step) == timestamp_ms:
            target += step
        return base + target
    found = left if upper else right
    return base + found if found >= 0 else max(base - 1, 0)


def read_message_py(buffer, position: int, limit: int, record_type, decode_properties,
                    decode_message):
    """The record at `position` of a commit-log segment readable up to `limit`: None when no record
    starts there (the head or the whole record past `limit`, not a message magic, TOTALSIZE <= 0),
    else `decode_message` of its bytes (store.codec.message's; `record_type` and `decode_properties`
    are what the C builds the same record with)."""
    if position < 0 or position + 8 > limit:
        return None
    size, magic = _unpack_size_magic(buffer, position)
    if (magic != _MAGIC_V1 and magic != _MAGIC_V2) or size <= 0 or position + size > limit:
        return None
    return decode_message(buffer[position:position + size])


if _native_read_message is not None:
    def read_message(buffer, position, limit, record_type, decode_properties, decode_message):
        """`read_message_py`, compiled."""
        record = _native_read_message(buffer, position, limit, record_type, decode_properties,
                                      decode_message)
        if record is NotImplemented:
            return read_message_py(buffer, position, limit, record_type, decode_properties,
                                   decode_message)
        return record
else:
    read_message = read_message_py

if _native_index_select is not None:
    def index_select(buf, key_hash, max_hash_slot_num, max_index_num, index_count,
                     begin_timestamp, max_num, begin_ms, end_ms, result) -> None:
        """`index_select_py`, compiled."""
        if _native_index_select(buf, key_hash, max_hash_slot_num, max_index_num, index_count,
                                begin_timestamp, max_num, begin_ms, end_ms,
                                result) is NotImplemented:
            index_select_py(buf, key_hash, max_hash_slot_num, max_index_num, index_count,
                            begin_timestamp, max_num, begin_ms, end_ms, result)
else:
    index_select = index_select_py

if _native_cq_search_nearest is not None:
    def cq_search_nearest(units, low, high, timestamp_ms, min_phy_offset, files, first_from,
                          segment_bytes, count, reader):
        """`cq_search_nearest_py`, compiled."""
        answer = _native_cq_search_nearest(units, low, high, timestamp_ms, min_phy_offset, files,
                                           first_from, segment_bytes, count, reader)
        if answer is NotImplemented:
            return cq_search_nearest_py(units, low, high, timestamp_ms, min_phy_offset, files,
                                        first_from, segment_bytes, count, reader)
        return answer
else:
    cq_search_nearest = cq_search_nearest_py

# For the hottest call sites: the C function itself when built (a caller runs the twin when it
# answers NotImplemented), else the twin (which never does). One Python frame less than the above.
index_select_fast = _native_index_select or index_select_py
read_message_fast = _native_read_message or read_message_py
cq_search_nearest_fast = _native_cq_search_nearest or cq_search_nearest_py
cq_nearest_queue_fast = _native_cq_nearest_queue or cq_nearest_queue_py
cq_nearest_in = _native_cq_nearest_in or cq_nearest_in_py

if _native_cq_search_boundary is not None:
    def cq_search_boundary(units, floor, ceiling, timestamp_ms, min_phy_offset, files, first_from,
                           segment_bytes, count, reader, upper, base, all_later_lower):
        """`cq_search_boundary_py`, compiled."""
        answer = _native_cq_search_boundary(units, floor, ceiling, timestamp_ms, min_phy_offset,
                                            files, first_from, segment_bytes, count, reader, upper,
                                            base, all_later_lower)
        if answer is NotImplemented:
            return cq_search_boundary_py(units, floor, ceiling, timestamp_ms, min_phy_offset,
                                         files, first_from, segment_bytes, count, reader, upper,
                                         base, all_later_lower)
        return answer
else:
    cq_search_boundary = cq_search_boundary_py

COMPILED = (_native_index_select is not None and _native_cq_search_nearest is not None
            and _native_read_message is not None and _native_cq_nearest_queue is not None
            and _native_cq_nearest_in is not None and _native_cq_search_boundary is not None)
