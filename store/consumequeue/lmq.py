"""LMQ (light message queue) multi-dispatch: one record, a unit in each of several queues.

Used by MQTT deployments of RocketMQ (tag rocketmq-all-5.3.3; the settings exist in 4.9.7 too,
whose code was not checked here). Off by default: `enableLmq` and `enableMultiDispatch`
(`MessageStoreConfig`). Nothing new on disk: an LMQ queue is an ordinary consume queue
(`consumequeue/%LMQ%<name>/0/`, 20-byte units) whose units point at records of other topics.

| rule | RocketMQ |
|---|---|
| a put is multi-dispatched iff enableLmq, its INNER_MULTI_DISPATCH property is not blank and its topic allows LMQ (not `%RETRY%*`, `rmq_sys_*`, `SCHEDULE_TOPIC_XXXX`) | `CommitLog.DefaultAppendMessageCallback.doAppend`: `isEnableLmq() && msgInner.needDispatchLMQ()`; `MixAll.topicAllowsLMQ` |
| INNER_MULTI_DISPATCH names queues separated by `,`; a name starting with `%LMQ%` is an LMQ (queue id 0) | `MixAll.LMQ_DISPATCH_SEPARATOR`, `MixAll.isLmq`, `MixAll.LMQ_QUEUE_ID` |
| inside the put lock, each LMQ name gets the next offset of its queue (first use: the queue's max offset); other names get an empty string; the list, `,`-joined, is written into the record as INNER_MULTI_QUEUE_OFFSET | `LmqDispatch.wrapLmqDispatch` (`StringUtils.join` of a null is ""), `QueueOffsetOperator.getLmqOffset` (`lmqTopicQueueTable`, on a miss `maxConsumeQueueOffset`), `handlePropertiesForLmqMsg` |
| after the append each LMQ offset moves up by 1 (a name listed twice: by 2, both units share an offset) | `LmqDispatch.updateLmqOffsets`, `QueueOffsetOperator.increaseLmqOffset` |
| dispatch: after a record's own unit, if enableMultiDispatch, its topic allows LMQ and both properties are not blank, each name (unless it holds `/`) gets a unit at its offset in queue (name, 0 if enableLmq and an LMQ name, else the record's queue id); lists of different lengths: none | `ConsumeQueue.putMessagePositionInfoWrapper` -> `MultiDispatchUtils.checkMultiDispatchQueue`, `multiDispatchLmqQueue`, `doDispatchLmqQueue` ("[bug] queues.length!=queueOffsets.length") |
| recovery: the LMQ queues are recovered like any queue; re-dispatch reads the offsets back from the records | `ConsumeQueue.recover`; the property is in the log |

Lists are split like Java's `String.split(",")` (trailing empty strings dropped). Where RocketMQ's
`Long.parseLong` would throw on an offset that is not a number (the reput thread logs and retries
the record forever), this module skips that name and logs it.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Mapping

from store.codec.message import DispatchRequest

log = logging.getLogger(__name__)

PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"        # MessageConst
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # MessageConst
LMQ_PREFIX = "%LMQ%"                    # MixAll.LMQ_PREFIX
LMQ_QUEUE_ID = 0                        # MixAll.LMQ_QUEUE_ID
LMQ_DISPATCH_SEPARATOR = ","            # MixAll.LMQ_DISPATCH_SEPARATOR
_RETRY_PREFIX = "%RETRY%"               # MixAll.RETRY_GROUP_TOPIC_PREFIX
_SYSTEM_PREFIX = "rmq_sys_"             # TopicValidator.SYSTEM_TOPIC_PREFIX
_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
MARKER = (PROPERTY_INNER_MULTI_DISPATCH + "\x01").encode()   # the property's bytes in a record


def is_lmq(name: str | None) -> bool:
    """`MixAll.isLmq`."""
    return name is not None and name.startswith(LMQ_PREFIX)


def topic_allows_lmq(topic: str) -> bool:
    """`MixAll.topicAllowsLMQ` (the same test as `MultiDispatchUtils.isNeedHandleMultiDispatch`)."""
    return not topic.startswith(_RETRY_PREFIX) and not topic.startswith(_SYSTEM_PREFIX) and \
        topic != _SCHEDULE_TOPIC


def java_split(text: str) -> list[str]:
    """`String.split(",")`: trailing empty strings are dropped (no separator: the text itself)."""
    if LMQ_DISPATCH_SEPARATOR not in text:
        return [text]
    parts = text.split(LMQ_DISPATCH_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _blank(value: str | None) -> bool:
    return value is None or value.strip() == ""


class LmqOffsets:
    """The put side (`enableLmq`): the next offset of every LMQ queue (`lmqTopicQueueTable`).

    `max_offset_of(topic, queue_id)` gives a queue's max offset on first use. Hold `lock` from
    `assign` to `advance`, around the append: LMQ offsets then follow log order."""

    def __init__(self, max_offset_of: Callable[[str, int], int]):
        self.max_offset_of = max_offset_of
        self.lock = threading.Lock()
        self._next: dict[str, int] = {}

    @staticmethod
    def names_of(topic: str, properties: Mapping[str, str] | None) -> list[str] | None:
        """The queue names of a put that is multi-dispatched, else None (`needDispatchLMQ`)."""
        if not properties:
            return None
        names = properties.get(PROPERTY_INNER_MULTI_DISPATCH)
        if _blank(names) or not topic_allows_lmq(topic):
            return None
        return java_split(names)

    def assign(self, names: list[str]) -> str:
        """INNER_MULTI_QUEUE_OFFSET for `names` (`wrapLmqDispatch`)."""
        values = []
        for name in names:
            if not is_lmq(name):
                values.append("")
                continue
            offset = self._next.get(name)
            if offset is None:
                offset = self._next[name] = self.max_offset_of(name, LMQ_QUEUE_ID)
            values.append(str(offset))
        return LMQ_DISPATCH_SEPARATOR.join(values)

    def advance(self, names: list[str]) -> None:
        """`updateLmqOffsets`: after the append, every LMQ name's next offset + 1."""
        for name in names:
            if is_lmq(name):
                self._next[name] += 1


def lmq_requests(request: DispatchRequest, properties: Mapping[str, str] | None, *,
                 enable_lmq: bool) -> list[DispatchRequest]:
    """The extra units of one dispatched record (`multiDispatchLmqQueue`), given its properties
    (the caller checked enableMultiDispatch)."""
    if not properties or not topic_allows_lmq(request.topic):
        return []
    names = properties.get(PROPERTY_INNER_MULTI_DISPATCH)
    offsets = properties.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET)
    if _blank(names) or _blank(offsets):
        return []
    names, offsets = java_split(names), java_split(offsets)
    if len(names) != len(offsets):
        log.error("record at %d: %d queues but %d queue offsets; no LMQ unit",
                  request.commit_log_offset, len(names), len(offsets))
        return []
    extra = []
    for name, offset in zip(names, offsets):
        if "/" in name:                     # File.separator: never a directory name
            continue
        try:
            queue_offset = int(offset)
        except ValueError:
            log.error("record at %d: queue offset %r of %s is not a number; no unit",
                      request.commit_log_offset, offset, name)
            continue
        queue_id = LMQ_QUEUE_ID if enable_lmq and is_lmq(name) else request.queue_id
        extra.append(DispatchRequest(
            name, queue_id, request.commit_log_offset, request.msg_size, request.tags_code,
            request.store_timestamp, queue_offset, request.keys, request.uniq_key,
            request.sys_flag, request.prepared_transaction_offset, request.properties))
    return extra


def record_lists_unit(raw: bytes, topic: str, queue_id: int, queue_offset: int) -> bool:
    """Whether the record `raw` carries a multi-dispatch unit at `queue_offset` of (topic,
    queue_id) (with or without enableLmq's queue id 0): an LMQ unit names a record of another
    topic."""
    if MARKER not in raw:
        return False
    from store.codec.message import decode_message
    from store.errors import CorruptDataError
    try:
        record = decode_message(raw)
    except CorruptDataError:
        return False
    request = DispatchRequest(record.topic, record.queue_id, record.commit_log_offset,
                              record.store_size, 0, 0, record.queue_offset, "", None,
                              record.sys_flag, 0, None)
    return any((extra.topic, extra.queue_id, extra.consume_queue_offset) ==
               (topic, queue_id, queue_offset)
               for enable_lmq in (True, False)
               for extra in lmq_requests(request, record.properties, enable_lmq=enable_lmq))


class MultiDispatcher:
    """`dispatch(requests)` -> the LMQ units of those records (enableMultiDispatch). A request made
    from scan rows carries no properties: the record is read (`read(phy_offset, size)`) and decoded
    only when the property's name is in its bytes."""

    def __init__(self, read: Callable[[int, int], bytes | None], *, enable_lmq: bool):
        self.read = read
        self.enable_lmq = enable_lmq

    def __call__(self, requests) -> list[DispatchRequest]:
        from store.codec.message import decode_message
        extra: list[DispatchRequest] = []
        for request in requests:
            properties = request.properties
            if properties is None:
                raw = self.read(request.commit_log_offset, request.msg_size)
                if raw is None or MARKER not in raw:
                    continue
                properties = decode_message(raw).properties
            elif PROPERTY_INNER_MULTI_DISPATCH not in properties:
                continue
            extra += lmq_requests(request, properties, enable_lmq=self.enable_lmq)
        return extra
