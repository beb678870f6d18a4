"""[5.x] Queue offsets of a put to a batch topic (rocketmq-all-5.3.3).

| rule | 5.3.3 |
|---|---|
| the record's QUEUEOFFSET is the queue's next message offset (`batchTopicQueueTable`) | `BatchConsumeQueue.assignQueueOffset` |
| an inner batch (sysFlag `INNER_BATCH_FLAG` 0x80) gets INNER_BASE = that offset in its properties | same, `MessageAccessor.putProperty(msg, PROPERTY_INNER_BASE, ...)` |
| the offset then moves by INNER_NUM (a short; no INNER_NUM: 1) | `CommitLog.asyncPutMessage` (`messageNum`), `increaseQueueOffset` -> `increaseBatchQueueOffset` |

INNER_NUM that is not a positive short is refused here as MESSAGE_ILLEGAL (RocketMQ's
`Short.parseShort` throws for text; a zero or negative count would move offsets backwards).

A batch topic on a RocksDB store (`storeType=defaultRocksDB`, `batch_queue=False`):
`RocksDBConsumeQueueStore.findOrCreateConsumeQueue` makes a `RocksDBConsumeQueue` whatever the
topic's `queue.type` (no BatchConsumeQueue, no batchconsumequeue/), so:

| rule | 5.3.3 |
|---|---|
| QUEUEOFFSET is the ordinary offset table's next offset; no INNER_BASE is written | `RocksDBConsumeQueue.assignQueueOffset` |
| the offset then moves by max(1, INNER_NUM) (no INNER_NUM: 1), the topic being BatchCQ by its attributes | `CommitLog.getMessageNum` (`CQType.BatchCQ.equals(getCqType(msg))`), `RocksDBConsumeQueue.increaseQueueOffset` |
| dispatch writes one ordinary RocksDB unit per record, keyed by its QUEUEOFFSET: the keys of a queue have gaps (a record of INNER_NUM n at q, the next at q + n) | `RocksDBConsumeQueueTable` (key = consumeQueueOffset) |
| max offset = the last key + 1 (so after a restart the next put gets last + 1, inside the last record's span) | `RocksDBConsumeQueueStore.getMaxOffsetInQueue` |

INNER_NUM that is no short at all is refused as on file stores (RocketMQ throws after the append).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable

from store.api import Message, PutMessageResult, PutMessageStatus

INNER_BATCH_FLAG = 0x1 << 7            # MessageSysFlag.INNER_BATCH_FLAG
PROPERTY_INNER_NUM = "INNER_NUM"       # MessageConst
PROPERTY_INNER_BASE = "INNER_BASE"     # MessageConst


def refuse_inner_batch(message: Message,
                       is_batch_topic: Callable[[str], bool]) -> PutMessageResult | None:
    """[5.x] `DefaultMessageStore.asyncPutMessage`'s checks after the put hooks, before the append:
    INNER_NUM without sysFlag INNER_BATCH_FLAG ("[BUG]The message had property INNER_NUM but is
    not an inner batch") and INNER_BATCH_FLAG on a topic that is not BatchCQ ("[BUG]The message is
    an inner batch but cq type is not batch cq") are MESSAGE_ILLEGAL. None: neither."""
    inner = message.sys_flag & INNER_BATCH_FLAG
    if not inner and message.properties and PROPERTY_INNER_NUM in message.properties:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                error="the message has property INNER_NUM but is not an inner "
                                      "batch (sysFlag INNER_BATCH_FLAG 0x80)")
    if inner and not is_batch_topic(message.topic):
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                error=f"an inner batch (sysFlag INNER_BATCH_FLAG 0x80) to topic "
                                      f"{message.topic!r}, whose queue.type is not BatchCQ")
    return None


def put_batch_topic(message: Message, queue_offsets: dict, lock: threading.Lock,
                    put_one: Callable[[Message], PutMessageResult], *,
                    batch_queue: bool = True) -> PutMessageResult:
    """Put `message` (its topic is a batch topic) with `put_one`, which gives the record the queue
    offset `queue_offsets[(topic, queue_id)]` and adds 1; here the table then moves by INNER_NUM.
    Every put to a batch topic goes through here, under `lock`. `batch_queue` False: a RocksDB
    store (no INNER_BASE; an INNER_NUM below 1 counts 1)."""
    properties = dict(message.properties or {})
    count = 1
    if PROPERTY_INNER_NUM in properties:
        try:
            count = int(properties[PROPERTY_INNER_NUM])
        except ValueError:
            count = 1 << 15
        if not batch_queue and -(1 << 15) <= count < 1:
            count = 1                     # getMessageNum: messageNum >= 1 ? messageNum : 1
        if not 0 < count < (1 << 15):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    error=f"INNER_NUM {properties[PROPERTY_INNER_NUM]!r} is not a "
                                          f"positive short")
    key = (message.topic, message.queue_id)
    with lock:
        base = queue_offsets.get(key, 0)
        if batch_queue and message.sys_flag & INNER_BATCH_FLAG:
            properties[PROPERTY_INNER_BASE] = str(base)
        result = put_one(dataclasses.replace(message, properties=properties))
        if result.ok:
            queue_offsets[key] = base + count
        return result
