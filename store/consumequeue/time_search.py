"""Binary searches behind `getOffsetInQueueByTime` (spec §10.3), shared by both consume-queue backends.

Both searches work on a window of units addressed by a relative index `0..n-1` through two callables:
`phy_at(i)` (commit-log position of unit i, None when the unit is missing, which only the RocksDB
backend reports) and `time_at(i)` (its store time in ms; negative when the commit log cannot supply it,
None when the unit is missing).
They reproduce RocketMQ's loops step by step (same probes, same tie rules), because a different but
"equivalent" search gives different answers on equal or non-monotonic store times.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from store.kernel.lookup import cq_search_boundary, cq_search_nearest

NEAREST = "nearest"
LOWER = "lower"
UPPER = "upper"
BOUNDARIES = (NEAREST, LOWER, UPPER)

PhyAt = Callable[[int], int]
TimeAt = Callable[[int], "int | None"]


def java_div(numerator: int, denominator: int) -> int:
    """Java's `/` on longs: truncates toward zero (Python's // floors)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator > 0) else -quotient


def _nearest(target: int, left: int, left_time: int, right: int, right_time: int,
             timestamp_ms: int) -> int:
    """The end of 4.9.7's search: the exact hit, else the nearer neighbour (ties: the earlier)."""
    if target != -1:
        return target
    if left_time == -1:
        return right
    if right_time == -1:
        return left
    return right if abs(timestamp_ms - left_time) > abs(timestamp_ms - right_time) else left


def search_nearest(phy_at: PhyAt, time_at: TimeAt, low: int, high: int, timestamp_ms: int,
                   min_phy_offset: int) -> int | None:
    """4.9.7 `ConsumeQueue.getOffsetInQueueByTime` inside one file.

    Returns the relative index of the unit stored nearest `timestamp_ms` (ties: the earlier one),
    -1 when no unit qualified, or None when a store time could not be read (RocketMQ returns 0).
    """
    target = left = right = -1
    left_time = right_time = -1
    while high >= low:
        mid = (low + high) // 2
        if phy_at(mid) < min_phy_offset:
            low = mid + 1
            left = mid
            continue
        store_time = time_at(mid)
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
    return _nearest(target, left, left_time, right, right_time, timestamp_ms)


def search_boundary(phy_at: PhyAt, time_at: TimeAt, floor: int, ceiling: int, timestamp_ms: int,
                    min_phy_offset: int, boundary: str, base: int, all_later_lower: int) -> int:
    """[5.x] LOWER / UPPER search over the window [floor, ceiling] (relative indexes).

    `base` is the queue offset of relative index 0. The result is a queue offset (not yet clamped to
    the queue's [min, max]): LOWER = first unit stored at or after the time, UPPER = last unit stored
    at or before it. `all_later_lower` is what LOWER answers when even the first unit is later (the
    file's first offset for files, the window floor for RocksDB).
    """
    assert boundary in (LOWER, UPPER)
    outside = _outside_window(time_at, floor, ceiling, timestamp_ms, boundary, base,
                              all_later_lower)
    if outside is not None:
        return outside
    low, high = floor, ceiling
    target = left = right = -1
    while high >= low:
        mid = (low + high) // 2
        phy_offset = phy_at(mid)
        if phy_offset is None:
            low = mid + 1  # a hole (RocksDB): RocketMQ moves right
            continue
        if phy_offset < min_phy_offset:
            low = mid + 1
            left = mid
            continue
        store_time = time_at(mid)
        if store_time is None or store_time < 0:
            return 0
        if store_time == timestamp_ms:
            target = mid
            break
        if store_time > timestamp_ms:
            high = mid - 1
            right = mid
        else:
            low = mid + 1
            left = mid
    return _boundary_end(time_at, target, left, right, floor, ceiling, timestamp_ms, boundary, base)


def _outside_window(time_at: TimeAt, floor: int, ceiling: int, timestamp_ms: int, boundary: str,
                    base: int, all_later_lower: int) -> int | None:
    """The answer when the time lies after the window's last unit or before its first, else None."""
    ceiling_time = time_at(ceiling)
    if ceiling_time is not None and ceiling_time < timestamp_ms:
        return base + ceiling + 1 if boundary == LOWER else base + ceiling
    floor_time = time_at(floor)
    if floor_time is not None and floor_time > timestamp_ms:
        return all_later_lower if boundary == LOWER else 0
    return None


def _boundary_end(time_at: TimeAt, target: int, left: int, right: int, floor: int, ceiling: int,
                  timestamp_ms: int, boundary: str, base: int) -> int:
    """The end of the LOWER / UPPER search: from an exact hit, walk equal store times to the first
    (LOWER) / last (UPPER) of them (bounded by the window); without one, the neighbour."""
    if target != -1:
        step, limit_ok = (-1, lambda i: i >= floor) if boundary == LOWER else \
            (1, lambda i: i <= ceiling)
        while limit_ok(target + step) and time_at(target + step) == timestamp_ms:
            target += step
        return base + target
    found = right if boundary == LOWER else left
    return relative_to_queue_offset(base, found)


def relative_to_queue_offset(base: int, index: int) -> int:
    """Queue offset of relative index `index`; index -1 maps like Java's `(fileFrom - 1) / 20`."""
    if index >= 0:
        return base + index
    return max(base - 1, 0)


# -- the same searches over a buffer of 20-byte CQ units ---------------------------------------------
#
# `search_nearest` / `search_boundary` with phy_at(i) = the phy offset of unit i of `units` and
# time_at(i) = store_time_of(phy offset, size of unit i), inlined: a lookup makes ~log2(n) probes and
# two closure calls per probe were most of its cost. They must stay step-for-step copies of the
# generic loops above (tests/test_lookup_speed_paths.py compares them on random and adversarial
# units).
#
# A `store_time_of` may carry `memo`, a dict phy offset -> store time that its owner guarantees
# stays true (store.lookups: records never change while a writable store is open), and `floor`,
# the offset below which the memo must not be used (the commit log's start). The first
# MEMO_DEPTH probes of a search are the same units for every search of a file, so their times are
# remembered there; deeper probes differ from search to search and are read each time.

_unpack_phy_size = struct.Struct(">qi").unpack_from
_UNIT_BYTES = 20
MEMO_DEPTH = 11          # probes 1..11: at most 2**11 - 1 distinct units per search window


def _remembered_time(memo: dict, store_time_of, phy_offset: int, size: int) -> int | None:
    """store_time_of(phy_offset, size) through `memo` (readable times only are remembered)."""
    store_time = memo.get(phy_offset)
    if store_time is None:
        store_time = store_time_of(phy_offset, size)
        if store_time is not None and store_time >= 0:
            memo[phy_offset] = store_time
    return store_time


def _memo_of(store_time_of):
    memo = getattr(store_time_of, "memo", None)
    return memo, (store_time_of.floor if memo is not None else 0)


def search_nearest_units(units, store_time_of: Callable[[int, int], int], low: int, high: int,
                         timestamp_ms: int, min_phy_offset: int) -> int | None:
    """`search_nearest` over the CQ units in `units` (a buffer; unit i at byte 20 * i).

    When `store_time_of` carries `segments` (files, first_from, segment_bytes, count: the commit log
    it reads, see store.lookups), the search is store.kernel.lookup's `cq_search_nearest`: compiled,
    one call, store times read straight from those segments.
    """
    segments = getattr(store_time_of, "segments", None)
    if segments is not None:
        return cq_search_nearest(units, low, high, timestamp_ms, min_phy_offset, *segments,
                                 store_time_of)
    memo, memo_floor = _memo_of(store_time_of)
    depth = 0
    target = left = right = -1
    left_time = right_time = -1
    while high >= low:
        mid = (low + high) // 2
        depth += 1
        phy_offset, size = _unpack_phy_size(units, mid * _UNIT_BYTES)
        if phy_offset < min_phy_offset:
            low = mid + 1
            left = mid
            continue
        if depth <= MEMO_DEPTH and memo is not None and phy_offset >= memo_floor:
            store_time = _remembered_time(memo, store_time_of, phy_offset, size)
        else:
            store_time = store_time_of(phy_offset, size)
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
    return _nearest(target, left, left_time, right, right_time, timestamp_ms)


def search_boundary_units(units, store_time_of: Callable[[int, int], int], floor: int, ceiling: int,
                          timestamp_ms: int, min_phy_offset: int, boundary: str, base: int,
                          all_later_lower: int) -> int:
    """`search_boundary` over the CQ units in `units` (a buffer; unit i at byte 20 * i).

    When `store_time_of` carries `segments`, the search is store.kernel.lookup's
    `cq_search_boundary`, as `search_nearest_units`' is `cq_search_nearest`.
    """
    assert boundary in (LOWER, UPPER)
    segments = getattr(store_time_of, "segments", None)
    if segments is not None:
        return cq_search_boundary(units, floor, ceiling, timestamp_ms, min_phy_offset, *segments,
                                  store_time_of, boundary == UPPER, base, all_later_lower)
    memo, memo_floor = _memo_of(store_time_of)

    def time_at(index: int) -> int:
        return store_time_of(*_unpack_phy_size(units, index * _UNIT_BYTES))

    outside = _outside_window(time_at, floor, ceiling, timestamp_ms, boundary, base,
                              all_later_lower)
    if outside is not None:
        return outside
    low, high = floor, ceiling
    depth = 0
    target = left = right = -1
    while high >= low:
        mid = (low + high) // 2
        depth += 1
        phy_offset, size = _unpack_phy_size(units, mid * _UNIT_BYTES)
        # (no holes in a file CQ: phy_at never answers None here)
        if phy_offset < min_phy_offset:
            low = mid + 1
            left = mid
            continue
        if depth <= MEMO_DEPTH and memo is not None and phy_offset >= memo_floor:
            store_time = _remembered_time(memo, store_time_of, phy_offset, size)
        else:
            store_time = store_time_of(phy_offset, size)
        if store_time is None or store_time < 0:
            return 0
        if store_time == timestamp_ms:
            target = mid
            break
        if store_time > timestamp_ms:
            high = mid - 1
            right = mid
        else:
            low = mid + 1
            left = mid
    return _boundary_end(time_at, target, left, right, floor, ceiling, timestamp_ms, boundary, base)
