"""Which consume-queue units and index entries need no finding, judged column-wise.

`UnitChecker.check` (store.check.consumequeue) and the index check (store.check.index) give every
unit or entry their record-by-record test. These functions mark, with numpy over the walk's
`RecordColumns`, those for which that test would add nothing to the sink and change nothing but the
budget (and a unit's `previous_phy`); only the others go through the record-by-record code, in order.
A unit or entry is clean only when the walk accepted a record at its offset whose columns match it
exactly; anything else (no columns, a record the walk did not reach, an odd record) is left to the
record-by-record code, which decides.
"""

from __future__ import annotations

import numpy as np

from store.codec.cq_unit import PREFILL_SIZE

EXT_ADDRESS_MAX = -2_147_483_649        # tagsCode <= this is a ConsumeQueueExt address (§4.6)


def record_numbers(scan, phy_offsets: np.ndarray) -> np.ndarray:
    """The walk's record number starting exactly at each offset, -1 where none does (or where the
    walk did not go, or the record's columns are not exact)."""
    columns, starts = scan.columns, scan.starts
    found = np.full(len(phy_offsets), -1, dtype=np.int64)
    if columns is None or not len(starts) or len(starts) != columns.count:
        return found
    index = np.searchsorted(starts, phy_offsets)
    inside = index < len(starts)
    hit = inside.copy()
    hit[inside] = starts[index[inside]] == phy_offsets[inside]
    hit &= phy_offsets < scan.walked_to
    hit[hit] = columns.exact[index[hit]]
    found[hit] = index[hit]
    return found


def clean_units(scan, queue_key, first_queue_offset: int, units: np.ndarray,
                previous_phy: int) -> np.ndarray:
    """Mask of the `units` (consecutive, from `first_queue_offset`) of queue `queue_key` that
    `UnitChecker.check` would pass without a finding."""
    columns = scan.columns
    phy = units["phy_offset"].astype(np.int64)
    size = units["size"].astype(np.int64)
    tags = units["tags_code"].astype(np.int64)
    prefill = (size == PREFILL_SIZE) & (phy == 0)
    real = np.flatnonzero(~prefill)
    before = np.empty(len(real), dtype=np.int64)      # the previous real unit's phy_offset
    if len(real):
        before[0] = previous_phy
        before[1:] = phy[real[:-1]]
    ordered = np.ones(len(units), dtype=bool)
    ordered[real] = phy[real] > before
    expired = phy < scan.min_offset
    number = columns.queue_numbers.get(queue_key) if columns is not None else None
    matches = np.zeros(len(units), dtype=bool)
    if number is not None:
        beyond = (phy >= scan.end_offset) & (not scan.capped)
        found = record_numbers(scan, phy)
        hit = np.flatnonzero((found >= 0) & ~beyond & ~expired & ~prefill)
        record = found[hit]
        queue_offsets = first_queue_offset + hit
        matches[hit] = ((columns.size[record] == size[hit]) & (columns.queue[record] == number) &
                        (columns.queue_offset[record] == queue_offsets) &
                        ((columns.tags_code[record] == tags[hit]) | (tags[hit] <= EXT_ADDRESS_MAX)))
    return prefill | (ordered & (expired | matches))


def run_clean(check_one, clean: np.ndarray, budget: list[int], sink, previous_phy: int,
              phy: np.ndarray, prefill: np.ndarray) -> int:
    """Walk units in order like `UnitChecker.check`: clean runs only use up budget and move
    `previous_phy`; `check_one(index, previous_phy)` judges the others. Returns previous_phy."""
    dirty = np.flatnonzero(~clean).tolist()
    real = np.flatnonzero(~prefill)
    position = 0
    for stop in dirty + [len(clean)]:
        if sink.full or budget[0] <= 0:
            break
        take = min(stop - position, budget[0])
        if take:
            budget[0] -= take
            last = np.searchsorted(real, position + take) - 1
            if last >= 0 and real[last] >= position:
                previous_phy = int(phy[real[last]])
            if take < stop - position:
                break
        if stop == len(clean) or sink.full or budget[0] <= 0:
            break
        previous_phy = check_one(stop, previous_phy)
        position = stop + 1
    return previous_phy
