"""[5.x] A batch queue's offset by store time: `BatchConsumeQueue.getOffsetInQueueByTime(timestamp,
boundaryType)` (rocketmq-all-5.3.3), step by step, over the store times the 46-byte units carry
(`MSG_STORE_TIME_OFFSET_INDEX` 20; the commit log is not read). The answer is a unit's
msgBaseOffset (`MSG_BASE_OFFSET_INDEX` 28), a message offset.

| step | 5.3.3 |
|---|---|
| the file: the last one if its first unit's time <= the time | `minForLastBcq.getStoreTimestamp() <= timestamp` |
| else the file whose first unit's time is the greatest <= the time (equal times: the later file), none: the first file | `searchTimeFromCache` (`searchBcqByCacheEnable`, default true): `timeCache.floorEntry`, the cache holding every non-empty file's first time (`refreshCache` at `recoverOffsetTable` and `correctMinOffset`, `cacheBcq` on a file's first unit) |
| that file has no unit: -1 | `getMinMsgOffset` / `getMaxMsgOffset` null |
| time >= the file's last unit's time: that unit's base | `if (timestamp >= maxQueueTimestamp)` |
| else `binarySearchRight` over byte positions [0, last unit], mid = ((l + r) / 2) floored to a unit, LOWER / UPPER moves; its unit's base, or -1 | `binarySearchRight` |

The store clamps the answer into [min, max] of the queue (`ConsumeQueueStore.getOffsetInQueueByTime`,
`Math.max(result, getMinOffsetInQueue())` then `Math.min(result, getMaxOffsetInQueue())`): so a time
before the first unit gives the file's first base (LOWER), a time after the last gives the last unit's
base (not the max), and an answer of -1 becomes the min (or stays -1 on a queue without units, whose
min is -1).

Only LOWER and UPPER exist for a batch queue (BoundaryType); 4.9.7's "nearest" is refused. A queue
with no file at all fails in 5.3.3 (`getMinMsgOffset(null)` throws a NullPointerException, the
broker's request errors); the facade answers 0 there, as for a queue it does not know.
"""

from __future__ import annotations

import struct

from store.codec.batch_cq_unit import BATCH_CQ_UNIT_SIZE

LOWER, UPPER = "lower", "upper"
MSG_STORE_TIME_OFFSET_INDEX = 20      # BatchConsumeQueue
MSG_BASE_OFFSET_INDEX = 28            # BatchConsumeQueue
_long = struct.Struct(">q").unpack_from


def _floor_unit(position: int) -> int:
    """BatchConsumeQueue's private `ceil`: (pos / CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE."""
    return position // BATCH_CQ_UNIT_SIZE * BATCH_CQ_UNIT_SIZE


def _first_time(mapped) -> int | None:
    if mapped.read_position < BATCH_CQ_UNIT_SIZE:       # isNewFile / getMinMsgOffset null
        return None
    return _long(mapped.buffer, MSG_STORE_TIME_OFFSET_INDEX)[0]


def _file_by_time_cache(files: list, timestamp_ms: int):
    """`searchTimeFromCache`: floorEntry over {first unit's time: file} (later files overwrite)."""
    best_time, best = None, None
    for mapped in files:                                   # bounded by the file count
        first = _first_time(mapped)
        if first is not None and first <= timestamp_ms and (best_time is None or first >= best_time):
            best_time, best = first, mapped
    return best if best is not None else files[0]


def binary_search_right(buffer, left: int, right: int, target: int, boundary: str) -> int:
    """`binarySearchRight` on unit byte positions [left, right] by store time; -1: none."""
    while left <= right:                   # every round returns or narrows [left, right]
        mid = _floor_unit((left + right) // 2)
        value = _long(buffer, mid + MSG_STORE_TIME_OFFSET_INDEX)[0]
        if mid == right:
            return mid if value >= target else -1
        if mid == left:
            if value >= target:
                return mid
            left = mid + BATCH_CQ_UNIT_SIZE
        elif boundary == LOWER:
            if value < target:
                left = mid + BATCH_CQ_UNIT_SIZE
            else:
                right = mid
        else:
            if value <= target:
                left = mid
            else:
                right = mid - BATCH_CQ_UNIT_SIZE
    return -1


def check_batch_boundary(boundary: str) -> None:
    if boundary not in (LOWER, UPPER):
        raise ValueError(f"a batch consume queue searches by time with boundary 'lower' or "
                         f"'upper' (BoundaryType), not {boundary!r}")


def offset_by_time(files: list, timestamp_ms: int, boundary: str) -> int:
    """`getOffsetInQueueByTime` before the store's clamp; `files` the queue's mapped files (not
    empty). A msgBaseOffset, or -1."""
    check_batch_boundary(boundary)
    assert files, "a batch queue without files has no answer (5.3.3 throws)"
    last = files[-1]
    last_first = _first_time(last)
    if last_first is not None and last_first <= timestamp_ms:
        target = last
    else:
        target = _file_by_time_cache(files, timestamp_ms)
    if target.read_position < BATCH_CQ_UNIT_SIZE:
        return -1
    buffer = target.buffer
    right = target.read_position - BATCH_CQ_UNIT_SIZE      # getMaxMsgOffset: readPosition - 46
    if timestamp_ms >= _long(buffer, right + MSG_STORE_TIME_OFFSET_INDEX)[0]:
        return _long(buffer, right + MSG_BASE_OFFSET_INDEX)[0]
    mid = binary_search_right(buffer, 0, right, timestamp_ms, boundary)
    return -1 if mid == -1 else _long(buffer, mid + MSG_BASE_OFFSET_INDEX)[0]
