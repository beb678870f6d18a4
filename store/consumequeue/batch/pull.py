"""[5.x] A pull from a batch consume queue: `DefaultMessageStore.getMessage` (rocketmq-all-5.3.3) on
a `BatchConsumeQueue`. Queue offsets are message offsets; one unit serves its whole record (an
inner batch of `batchSize` messages), counted as that many messages.

| rule | 5.3.3 |
|---|---|
| max 0: NO_MESSAGE_IN_QUEUE; below min: OFFSET_TOO_SMALL (next = min); = max: OFFSET_OVERFLOW_ONE; above: OFFSET_OVERFLOW_BADLY (next = max) | the status ladder, `nextOffsetCorrection` on a master |
| the units: from the one holding the offset to the end of its file (`iterateFrom`, one file: `travelCqFileNumWhenGetMessage` = 1) | `getBatchMsgIndexBuffer` |
| stop when (unit base - offset) x 46 >= max(`maxFilterMessageSize` 16000, maxMsgNums x 46) | the loop's first test |
| stop when full: messages + the unit's batch > maxMsgNums, bytes + size > max(maxTotalMsgSize, 100) (at most 128 MiB), or the in-memory / on-disk transfer limits | `isTheBatchFull` (5.3.3's) |
| next = unit base + batch size, set before the record is read | "Be careful, here should before the isTheBatchFull" |
| an unreadable record: MESSAGE_WAS_REMOVING if nothing was taken, later units of that segment skipped | `rollNextFile` |
"""

from __future__ import annotations

from store.api import GetMessageResult, GetMessageStatus
from store.codec.batch_cq_unit import BATCH_CQ_UNIT_SIZE
from store.codec.message import decode_messages
from store.consumequeue.batch.batch_queue import BatchConsumeQueue

MAX_FILTER_MESSAGE_SIZE = 16000         # MessageStoreConfig.maxFilterMessageSize
MAX_PULL_MSG_SIZE = 128 * 1024 * 1024   # DefaultMessageStore.MAX_PULL_MSG_SIZE


def pull_batch(queue: BatchConsumeQueue | None, commit_log, queue_offset: int, max_msg_nums: int, *,
               accepts, limits, max_total_msg_size: int | None, decode) -> GetMessageResult:
    """`accepts(tags_code) -> bool` is the tag filter; `limits` the store's TransferLimits."""
    if queue is None or queue.max_offset() == 0:
        return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    low, high = queue.min_offset(), queue.max_offset()
    if queue_offset < low:
        return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, low, low, high)
    if queue_offset == high:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, queue_offset, low, high)
    if queue_offset > high:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, high, low, high)
    units = _units_from(queue, queue_offset)
    if units is None:
        return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, queue_offset, low, high)
    window = max(MAX_FILTER_MESSAGE_SIZE, max_msg_nums * BATCH_CQ_UNIT_SIZE)
    max_pull = min(max(MAX_PULL_MSG_SIZE if max_total_msg_size is None else max_total_msg_size,
                       100), MAX_PULL_MSG_SIZE)
    commit_log_max = commit_log.max_offset()
    in_memory_bytes = limits.physical_memory_bytes * limits.access_message_in_memory_max_ratio // 100
    status, next_offset = GetMessageStatus.NO_MATCHED_MESSAGE, queue_offset
    records, buffer_total, message_total, next_file_start = [], 0, 0, None
    for unit in units.tolist():               # bounded by one file's units
        phy, size, tags_code, _, base, batch = unit[:6]
        if next_offset >= high or (base - queue_offset) * BATCH_CQ_UNIT_SIZE >= window:
            break
        in_memory = commit_log_max - phy <= in_memory_bytes
        if _is_full(size, batch, max_msg_nums, max_pull, buffer_total, message_total, in_memory,
                    limits) or buffer_total >= max_pull:
            break
        next_offset = base + batch
        if next_file_start is not None and phy < next_file_start:
            continue
        if not accepts(tags_code):
            continue
        raw = commit_log.read(phy, size)
        if raw is None:
            if buffer_total == 0:
                status = GetMessageStatus.MESSAGE_WAS_REMOVING
            next_file_start = commit_log.next_file_start(phy)
            continue
        records.append(raw)
        buffer_total += size
        message_total += batch
        status, next_file_start = GetMessageStatus.FOUND, None
    messages = decode_messages(records) if decode is True else records
    return GetMessageResult(status, next_offset, low, high, messages)


def _units_from(queue: BatchConsumeQueue, queue_offset: int):
    """The units from the one holding `queue_offset` to the end of its file (None: none)."""
    unit = queue.get_unit(queue_offset)
    if unit is None:
        return None
    for mapped in queue.mapped_files.files:
        units = BatchConsumeQueue._units_of(mapped)
        hits = (units["phy_offset"] == unit.phy_offset).nonzero()[0]
        if len(hits):
            return units[int(hits[0]):]
    return None


def _is_full(size, batch, max_msg_nums, max_pull, buffer_total, message_total, in_memory,
             limits) -> bool:
    """5.3.3's `isTheBatchFull`."""
    if buffer_total == 0 or message_total == 0:
        return False
    if message_total + batch > max_msg_nums or buffer_total + size > max_pull:
        return True
    if in_memory:
        return buffer_total + size > limits.max_transfer_bytes_in_memory or \
            message_total > limits.max_transfer_count_in_memory - 1
    return buffer_total + size > limits.max_transfer_bytes_in_disk or \
        message_total > limits.max_transfer_count_in_disk - 1
