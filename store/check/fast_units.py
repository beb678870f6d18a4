"""Which consume-queue units and index entries need no finding, judged column-wise.

`UnitChecker.check` (store.check.consumequeue) and the index check (store.check.index) give every
unit or entry their record-by-record test. These functions mark, with numpy over the walk's
`RecordColumns`, those for which that test would add nothing to the sink and change nothing but the
budget (and a unit's `previous_phy`); only the others go through the record-by-record code, in order.
A unit or entry is clean only when the walk accepted a record at its offset whose columns match it
exactly (found during the walk: store.check.stream_units, stream_index); anything else (no columns, a record the walk did not reach, an odd record) is left to the
record-by-record code, which decides.
"""

from __future__ import annotations

import numpy as np

from store.codec.cq_unit import PREFILL_SIZE

EXT_ADDRESS_MAX = -2_147_483_649        # tagsCode <= this is a ConsumeQueueExt address (§4.6)


def clean_units(scan, queue_key, first_queue_offset: int, units: np.ndarray,
                previous_phy: int, matchable: bool = True) -> np.ndarray:
    """Mask of the `units` (consecutive, from `first_queue_offset`) of queue `queue_key` that
    `UnitChecker.check` would pass without a finding. `matchable`: the units are those the walk's
    matcher read for `queue_key` (store.check.stream_units)."""
    phy = units["phy_offset"].astype(np.int64)
    size = units["size"].astype(np.int64)
    prefill = (size == PREFILL_SIZE) & (phy == 0)
    real = np.flatnonzero(~prefill)
    before = np.empty(len(real), dtype=np.int64)      # the previous real unit's phy_offset
    if len(real):
        before[0] = previous_phy
        before[1:] = phy[real[:-1]]
    ordered = np.ones(len(units), dtype=bool)
    ordered[real] = phy[real] > before
    expired = phy < scan.min_offset
    beyond = (phy >= scan.end_offset) & (not scan.capped)
    matches = matched_units(scan, queue_key, first_queue_offset + np.arange(len(units))) \
        if matchable else np.zeros(len(units), dtype=bool)
    matches &= ~beyond & ~expired & ~prefill & (phy < scan.walked_to)
    return prefill | (ordered & (expired | matches))


def matched_units(scan, queue_key, queue_offsets: np.ndarray) -> np.ndarray:
    """Which of the queue offsets hold a unit that matches, exactly, the walked record it points
    at (found during the walk, store.check.stream_units); all False when nothing is known."""
    if scan.unit_matches is None:
        return np.zeros(len(queue_offsets), dtype=bool)
    return scan.unit_matches.matched(queue_key, queue_offsets)


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
