"""Re-dispatch after a crash: which records already have their consume-queue unit and index entries.

After a crash, recovery re-dispatches from a checkpoint up to a minute old. Most of those records
already have their consume-queue unit, and often their index entries (unless the index files newer
than the checkpoint were dropped). RocketMQ's dispatchers skip them one by one
(`ConsumeQueue.putMessagePositionInfo`: phy end <= the queue's max phy end; `IndexService.buildIndex`:
phy offset < the index's endPhyOffset). `uncovered_rows` applies the same rules to a whole batch of
`kernel.scan` rows before the reput service makes any request from them, and indexes directly the rows
that only lack index entries. The reput service (`store.services.dispatch`) decides whether it applies
(only the built-in dispatchers registered) and keeps the counters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from store import kernel
from store.commitlog.commit_log import queued_transaction_mask
from store.kernel.scan_groups import queue_groups

_C = kernel.COL


@dataclass(slots=True)
class Coverage:
    """What `uncovered_rows` found in one batch of scan rows."""

    rows: np.ndarray                          # the rows that still need dispatch requests
    covered: int = 0                          # rows dropped: every index already had them
    indexed_directly: int = 0                 # rows indexed here without requests
    last_rebuilt_unit: tuple[int, int] | None = None   # (phy_offset, store_timestamp), see below


def uncovered_rows(buf, rows, *, consume_queues, index_service, may_index_directly: bool,
                   note_rebuilt_unit: bool) -> Coverage:
    """The rows of `rows` (scan rows over `buf`, log order) that still need dispatch requests.

    `consume_queues` / `index_service` are those of the built-in dispatchers (None: not registered).
    Rows already in their consume queue and in the index are dropped. When the leading rows only
    lack index entries and nothing is waiting in the batch (`may_index_directly`: log order is
    kept), their keys are hashed by the kernel and inserted without requests. With
    `note_rebuilt_unit`, the result names the last row whose unit already exists (RocketMQ counts a
    unit built again as written: the checkpoint's logics time moves to its store time).
    """
    phy = rows[:, _C["phy_offset"]]
    if consume_queues is not None:
        queued = queued_transaction_mask(rows[:, _C["sys_flag"]])   # the others get no unit
        keys, inverse = queue_groups(buf, rows)
        ends = np.array([consume_queues.get_max_phy_end(topic, queue_id) for topic, queue_id in keys],
                        dtype=np.int64)
        in_queues = ~queued | (phy + rows[:, _C["size"]] <= ends[inverse])
    else:
        in_queues = np.ones(len(rows), dtype=bool)
    if not in_queues[0]:
        return Coverage(rows)                                 # new records: the usual way
    coverage = Coverage(rows)
    if note_rebuilt_unit:
        skipped = np.flatnonzero(queued & in_queues)
        if len(skipped):
            last = rows[skipped[-1]]
            coverage.last_rebuilt_unit = (int(last[_C["phy_offset"]]), int(last[_C["store_ts"]]))
    index_end = index_service.end_phy_offset if index_service is not None else None
    in_index = phy < index_end if index_service is not None else np.ones(len(rows), dtype=bool)
    # The leading run of rows already in their consume queue.
    prefix = len(rows) if in_queues.all() else int(np.argmin(in_queues))
    if may_index_directly and index_service is not None and not in_index[:prefix].all():
        lacking = rows[:prefix][~in_index[:prefix]]
        if _index_directly(buf, index_service, lacking):
            coverage.indexed_directly = len(lacking)
            coverage.covered = int(in_index[:prefix].sum())
            coverage.rows = rows[prefix:]
            return coverage
    covered = in_queues & in_index
    if not covered.any():
        return coverage
    coverage.covered = int(covered.sum())
    coverage.rows = rows[~covered]
    return coverage


def _index_directly(buf, index_service, rows) -> bool:
    """Index entries for `rows` (in the consume queues already) without requests; False when the
    kernel asks for the Python way (a key or topic that is not ASCII) and for records with a DELAY
    (a SCHEDULE_TOPIC_XXXX record whose DELAY Java cannot parse is not dispatched)."""
    if (rows[:, _C["delay_pos"]] >= 0).any():
        return False
    found = kernel.row_key_hashes(buf, rows)
    if found is None:
        return False
    hashes, numbers = found
    index_service.build_index_hashed(hashes, rows[numbers, _C["phy_offset"]],
                                     rows[numbers, _C["store_ts"]])
    return True
