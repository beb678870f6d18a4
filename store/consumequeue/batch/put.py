"""[5.x] Queue offsets of a put to a batch topic (rocketmq-all-5.3.3).

| rule | 5.3.3 |
|---|---|
| the record's QUEUEOFFSET is the queue's next message offset (`batchTopicQueueTable`) | `BatchConsumeQueue.assignQueueOffset` |
| an inner batch (sysFlag `INNER_BATCH_FLAG` 0x80) gets INNER_BASE = that offset in its properties | same, `MessageAccessor.putProperty(msg, PROPERTY_INNER_BASE, ...)` |
| the offset then moves by INNER_NUM (a short; no INNER_NUM: 1) | `CommitLog.asyncPutMessage` (`messageNum`), `increaseQueueOffset` -> `increaseBatchQueueOffset` |

INNER_NUM that is not a positive short is refused here as MESSAGE_ILLEGAL (RocketMQ's
`Short.parseShort` throws for text; a zero or negative count would move offsets backwards).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable

from store.api import Message, PutMessageResult, PutMessageStatus

INNER_BATCH_FLAG = 0x1 << 7            # MessageSysFlag.INNER_BATCH_FLAG
PROPERTY_INNER_NUM = "INNER_NUM"       # MessageConst
PROPERTY_INNER_BASE = "INNER_BASE"     # MessageConst


def put_batch_topic(message: Message, queue_offsets: dict, lock: threading.Lock,
                    put_one: Callable[[Message], PutMessageResult]) -> PutMessageResult:
    """Put `message` (its topic is a batch topic) with `put_one`, which gives the record the queue
    offset `queue_offsets[(topic, queue_id)]` and adds 1; here the table then moves by INNER_NUM.
    Every put to a batch topic goes through here, under `lock`."""
    properties = dict(message.properties or {})
    count = 1
    if PROPERTY_INNER_NUM in properties:
        try:
            count = int(properties[PROPERTY_INNER_NUM])
        except ValueError:
            count = 0
        if not 0 < count < (1 << 15):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    error=f"INNER_NUM {properties[PROPERTY_INNER_NUM]!r} is not a "
                                          f"positive short")
    key = (message.topic, message.queue_id)
    with lock:
        base = queue_offsets.get(key, 0)
        if message.sys_flag & INNER_BATCH_FLAG:
            properties[PROPERTY_INNER_BASE] = str(base)
        result = put_one(dataclasses.replace(message, properties=properties))
        if result.ok:
            queue_offsets[key] = base + count
        return result
