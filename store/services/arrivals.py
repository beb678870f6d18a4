"""The reput service's arrival listeners (long polling): after each dispatch pass, the new max
offset of every queue that got units, as RocketMQ's `NotifyMessageArriveListener` is told
(`ReputMessageService.doReput` -> `notifyMessageArriving`).

A pass from scan rows hands its queues over as columns (`RowsDispatched.arrivals`); the table
(queue -> new max offset) is made only when a listener wants it now (`add`'s `wants`, asked after
the units were written, as the long-polling service reads its holders). With no pull holding, a
pass over thousands of new queues then makes no entry for nobody.
"""

from __future__ import annotations

from typing import Callable, Sequence

from store.codec.message import DispatchRequest
from store.commitlog.commit_log import QUEUED_TRANSACTION_KINDS

ArrivalListener = Callable[[dict[tuple[str, int], int]], None]


class Arrivals:
    """The listeners, and the pass's arrivals from rows waiting for `notify`."""

    def __init__(self):
        self.listeners: list[ArrivalListener] = []
        self._wants: list[Callable[[], bool] | None] = []
        self._from_rows: list = []      # RowsDispatched.arrivals of this pass: dicts or columns

    def add(self, listener: ArrivalListener, wants: Callable[[], bool] | None = None) -> None:
        self.listeners.append(listener)
        self._wants.append(wants)

    def note_rows(self, arrivals) -> None:
        """A dispatch_rows pass's arrivals: a dict, or (queues, new max offsets as int64)."""
        if arrivals:
            self._from_rows.append(arrivals)

    def pending(self) -> bool:
        return bool(self._from_rows)

    def notify(self, batch: Sequence[DispatchRequest], lmq_sources: list) -> None:
        """Tell the listeners that want it: units from rows first, then the batch's requests,
        then the LMQ queues of `lmq_sources` (dispatchers with `lmq_arrivals`): later ones win."""
        from_rows, self._from_rows = self._from_rows, []
        listeners = [listener for listener, wants in zip(self.listeners, self._wants)
                     if wants is None or wants()]
        if not listeners:
            for source in lmq_sources:
                source.lmq_arrivals = {}
            return
        arrivals: dict[tuple[str, int], int] = {}
        for part in from_rows:
            arrivals.update(part if type(part) is dict else zip(part[0], part[1].tolist()))
        for request in batch:     # the last unit of each queue is its new max
            if request.sys_flag & 0x0C in QUEUED_TRANSACTION_KINDS:
                arrivals[(request.topic, request.queue_id)] = request.consume_queue_offset + 1
        for source in lmq_sources:        # LMQ queues that got units from this batch
            arrivals.update(source.lmq_arrivals)
            source.lmq_arrivals = {}
        if arrivals:
            for listener in listeners:
                listener(arrivals)
