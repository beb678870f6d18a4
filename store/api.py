"""The public value types of the store: the message a caller puts, and the results it gets back.

Status names are RocketMQ's own (`PutMessageStatus`, `GetMessageStatus`), so that an operator who knows
the broker's logs reads them without translation.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from store.codec.message import MessageRecord


@dataclass(frozen=True, slots=True)
class Message:
    """A message as a producer hands it to the store.

    `keys` are business keys (indexed as `topic#key`); `tags` a single tag (its Java hash becomes the
    consume queue's tagsCode). Properties are user properties; TAGS, KEYS and (if given) UNIQ_KEY are
    added from the fields. `born_timestamp` defaults to the store's clock, `born_host` to 127.0.0.1:0.
    `prepared_transaction_offset` is the PREPARED TRANSACTION OFFSET field: a broker's
    `EndTransactionProcessor` sets it on the COMMIT / ROLLBACK record (sys_flag 0x8 / 0xC) to the
    commit-log offset of the PREPARED (half) record it ends (`MessageExtBrokerInner.
    setPreparedTransactionOffset`); 0 otherwise. The store writes it as given.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    tags: str | None = None
    keys: Sequence[str] | str = ()
    properties: Mapping[str, str] | None = None
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int | None = None
    born_host: str | None = None
    prepared_transaction_offset: int = 0

    def key_list(self) -> list[str]:
        if isinstance(self.keys, str):
            return [k for k in self.keys.split(" ") if k]
        return [k for k in self.keys if k]


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"
    # [5.x] timer messages refused at put (HookUtils.handleScheduleMessage / transformTimerMessage).
    WHEEL_TIMER_FLOW_CONTROL = "WHEEL_TIMER_FLOW_CONTROL"
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"


# Not frozen: a frozen dataclass costs ~5x more to build, and one is built per message.
# Treat instances as immutable.
@dataclass(slots=True)
class PutMessageResult:
    """Where a put landed. For a batch: the first record's offsets, all bytes, every msgId."""

    status: PutMessageStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    msg_id: str | None = None
    queue_offset: int = -1
    store_timestamp: int = 0
    message_count: int = 0
    msg_ids: tuple[str, ...] = ()
    error: str | None = None   # a sentence saying why, for any status but PUT_OK

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


GET_STATUS_EXPLANATIONS = {
    GetMessageStatus.FOUND: "Messages were found from the requested offset on.",
    GetMessageStatus.NO_MATCHED_MESSAGE:
        "Units were scanned but none matched the tag filter; continue from next_begin_offset.",
    GetMessageStatus.MESSAGE_WAS_REMOVING:
        "The consume queue points at commit log data that has been deleted (expired).",
    GetMessageStatus.OFFSET_FOUND_NULL:
        "The consume queue file holding this offset is gone; continue at the next file.",
    GetMessageStatus.OFFSET_OVERFLOW_BADLY:
        "The offset is beyond the end of the queue; next_begin_offset is the queue's max offset.",
    GetMessageStatus.OFFSET_OVERFLOW_ONE:
        "The offset equals the queue's max offset: nothing new yet (a long poll would wait here).",
    GetMessageStatus.OFFSET_TOO_SMALL:
        "The offset is below the queue's min offset (expired); next_begin_offset is the min offset.",
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: "There is no such topic/queue in this store.",
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: "The queue exists but has never had a message.",
}


# Not frozen: a frozen dataclass costs ~5x more to build, and one is built per message.
# Treat instances as immutable.
@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageRecord] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False
    waited_ms: int = 0           # time spent long polling
    # Units the pull skipped because their record is not the one the unit names (another topic,
    # queue id or queue offset): one plain-text reason each. Such a record is never returned.
    skipped: tuple[str, ...] = ()

    @property
    def explanation(self) -> str:
        text = GET_STATUS_EXPLANATIONS[self.status]
        if self.skipped:
            text += " Skipped (not served): " + "; ".join(self.skipped)
        return text


@dataclass(frozen=True)
class QueryMessageResult:
    messages: list[MessageRecord]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int
    truncated: bool = False          # the cap (max_num) cut the result short
    collisions_filtered: int = 0     # index hits whose message did not carry the key
