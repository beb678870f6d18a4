"""[5.x] Dispatch into batch consume queues: a record of a batch topic gets a batch unit, and no
ordinary unit (`ConsumeQueueStore.findOrCreateConsumeQueue` makes a `BatchConsumeQueue` for a topic
whose `queue.type` is `BatchCQ`; `BatchConsumeQueue.putMessagePositionInfoWrapper`).

The unit's msgBaseOffset and batchSize come from the record's INNER_BASE and INNER_NUM properties
(`CommitLog.setBatchSizeIfNeeded`: only when both are there); without them RocketMQ's
DispatchRequest keeps msgBaseOffset -1 and the batch queue refuses it ("[NOTIFYME]unexpected
dispatch request in batch consume queue"): no unit, a logged line. A request made from scan rows
carries no properties: the record is read (`read(phy_offset, size)`) and decoded.
"""

from __future__ import annotations

import logging
from typing import Callable

from store.codec.batch_cq_unit import BatchCqUnit
from store.codec.message import decode_message
from store.consumequeue.batch.queue_store import BatchQueueStore

log = logging.getLogger(__name__)

PROPERTY_INNER_NUM = "INNER_NUM"        # MessageConst
PROPERTY_INNER_BASE = "INNER_BASE"      # MessageConst


class BatchRouter:
    """`take(requests)`: writes the batch units of batch-topic records, returns the others."""

    def __init__(self, store: BatchQueueStore, is_batch_topic: Callable[[str], bool],
                 read: Callable[[int, int], bytes | None]):
        self.queues = store
        self.is_batch_topic = is_batch_topic
        self.read = read
        self.refused = 0

    def take(self, requests: list) -> list:
        others = []
        for request in requests:
            if not self.is_batch_topic(request.topic):
                others.append(request)
                continue
            properties = request.properties
            if properties is None:
                raw = self.read(request.commit_log_offset, request.msg_size)
                properties = decode_message(raw).properties if raw is not None else {}
            unit = _unit_of(request, properties)
            if unit is None:
                self.refused += 1
                log.warning("batch queue %s/%d: record at %d has no INNER_BASE/INNER_NUM: no unit",
                            request.topic, request.queue_id, request.commit_log_offset)
                continue
            self.queues.put(request.topic, request.queue_id, unit)
        return others


def _unit_of(request, properties) -> BatchCqUnit | None:
    try:
        base = int(properties[PROPERTY_INNER_BASE])
        num = int(properties[PROPERTY_INNER_NUM])
    except (KeyError, ValueError):
        return None
    if base < 0 or not 0 < num < (1 << 15):
        return None
    return BatchCqUnit(request.commit_log_offset, request.msg_size, request.tags_code,
                       request.store_timestamp, base, num)
