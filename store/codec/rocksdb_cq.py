"""Key and value layout of the [5.x] RocksDB consume queue (spec §13.2, §13.3). Pure, no I/O.

`default` column family, one entry per unit. Key (19 + n bytes, n = UTF-8 length of the topic):

| field        | offset | size_bytes | meaning                        |
|--------------|--------|------------|--------------------------------|
| topic_length | 0      | 4          | n (int)                        |
| ctrl         | 4      | 1          | 0x01                           |
| topic        | 5      | n          | topic, UTF-8                   |
| ctrl         | 5+n    | 1          | 0x01                           |
| queue_id     | 6+n    | 4          | int                            |
| ctrl         | 10+n   | 1          | 0x01                           |
| queue_offset | 11+n   | 8          | long                           |

Value (28 bytes): phy_offset (long, 0), size (int, 8), tags_code (long, 12), store_timestamp_ms
(long, 20).

`offset` column family. Key (14 + n bytes): topic_length (int) | 0x01 | topic | 0x01 | "max"/"min" |
0x01 | queue_id (int). Value (16 bytes): phy_offset (long) | queue_offset (long). The global
checkpoint is the `max` key of topic `CHECKPOINT_TOPIC`, queue 0, with an 8-byte value: the largest
`phy_offset + size` dispatched so far. Bytewise order: all keys of one queue share the 11+n byte
prefix and sort by queue offset.

Checked against RocketMQ 5.3.3's own classes (tag rocketmq-all-5.3.3), field by field:
- `RocksDBConsumeQueueTable`: the unit key (`CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES` = 4+1+1+4+1+8, CTRL_1
  separators) and the 28-byte value (`PHY_OFFSET_OFFSET` 0, `PHY_MSG_LEN_OFFSET` 8,
  `MSG_TAG_HASHCODE_OFFSET` 12, `MSG_STORE_TIME_SIZE_OFFSET` 20) are the ones above; its delete-range
  keys end the queue prefix with CTRL_0 / CTRL_2 (our `CTRL_0`, `CTRL_2`).
- `RocksDBConsumeQueueOffsetTable`: the offset key (`OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES` =
  4+1+1+3+1+4, "max"/"min" as 3 UTF-8 bytes), the 16-byte value (commit-log offset, then queue offset),
  and the dispatch checkpoint under `TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC` = "CHECKPOINT_TOPIC",
  `max`, queue 0, an 8-byte `maxPhyOffset` (`appendMaxPhyOffset`; absent reads as 0).
- `ConsumeQueueRocksDBStorage`: column families `default` (units) and `offset` ("offset" bytes), the
  database directory `StorePathConfigHelper.getStorePathConsumeQueue` = `<root>/consumequeue`.
Differences that do not change a byte of the data (see `store.consumequeue.rocksdb.db`): RocketMQ writes
with the WAL disabled and no sync (`AbstractRocksDBStorage.initWriteOptions`), relying on the checkpoint
and a re-dispatch from the commit log; its column families use universal compaction, bloom filters, a
`StringAppendOperator` merge operator and a compaction filter that drops units below the commit log's
min offset (`RocksDBOptionsFactory`, `ConsumeQueueCompactionFilterFactory`). Not verified against a
database RocketMQ itself wrote: none exists among the fixtures, and RocketMQ cannot be built here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from store.codec.cq_unit import CQ_UNIT_DTYPE
from store.errors import CorruptDataError

CTRL_0 = b"\x00"
CTRL_1 = b"\x01"
CTRL_2 = b"\x02"
MAX_KIND = "max"
MIN_KIND = "min"
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
DEFAULT_CF = "default"
OFFSET_CF = "offset"

CQ_VALUE_SIZE = 28
OFFSET_VALUE_SIZE = 16
CHECKPOINT_VALUE_SIZE = 8

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_CQ_VALUE = struct.Struct(">qiqq")
_OFFSET_VALUE = struct.Struct(">qq")
OFFSET_VALUE = _OFFSET_VALUE    # `offset_value(phy_offset, queue_offset)` is OFFSET_VALUE.pack
assert _CQ_VALUE.size == CQ_VALUE_SIZE and _OFFSET_VALUE.size == OFFSET_VALUE_SIZE

CQ_VALUE_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"),
                           ("store_timestamp", ">i8")])
assert CQ_VALUE_DTYPE.itemsize == CQ_VALUE_SIZE


@dataclass(frozen=True, slots=True)
class CqValue:
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    phy_offset: int
    queue_offset: int


@lru_cache(maxsize=65536)
def topic_head(topic: str) -> bytes:
    """The bytes every unit and offset key of `topic` starts with: its UTF-8 length (>i4), CTRL_1,
    the UTF-8, CTRL_1. Memoized: dispatch builds keys in bulk (thousands of queues per batch with
    many topics); `store.kernel.cq_keys` takes it as its `head_of`."""
    topic_bytes = topic.encode("utf-8")
    return _INT.pack(len(topic_bytes)) + CTRL_1 + topic_bytes + CTRL_1


@lru_cache(maxsize=65536)
def cq_key_prefix(topic: str, queue_id: int) -> bytes:
    """The 11+n bytes every unit key of the queue starts with."""
    return topic_head(topic) + _INT.pack(queue_id) + CTRL_1


def cq_key(topic: str, queue_id: int, queue_offset: int) -> bytes:
    return cq_key_prefix(topic, queue_id) + _LONG.pack(queue_offset)


def cq_key_from_prefix(prefix: bytes, queue_offset: int) -> bytes:
    """Fast path when many keys of one queue are built (reads of a range)."""
    return prefix + _LONG.pack(queue_offset)


def decode_cq_key(key: bytes) -> tuple[str, int, int]:
    """(topic, queue_id, queue_offset) of a unit key; CorruptDataError if it is not one."""
    topic, rest = _split_topic(key)
    if len(rest) != 13 or rest[4:5] != CTRL_1:
        raise CorruptDataError(None, len(key) - len(rest), "not a consume-queue unit key")
    return topic, _INT.unpack_from(rest, 0)[0], _LONG.unpack_from(rest, 5)[0]


def queue_range_bounds(topic: str, queue_id: int) -> tuple[bytes, bytes]:
    """[begin, end) covering every unit key of the queue (spec §13.6 delete-range bounds)."""
    head = topic_head(topic) + _INT.pack(queue_id)
    return head + CTRL_0, head + CTRL_2


def cq_value(phy_offset: int, size: int, tags_code: int, store_timestamp: int) -> bytes:
    return _CQ_VALUE.pack(phy_offset, size, tags_code, store_timestamp)


def decode_cq_value(value: bytes) -> CqValue:
    if len(value) != CQ_VALUE_SIZE:
        raise CorruptDataError(None, 0, f"consume-queue value is {len(value)} bytes, expected 28")
    return CqValue(*_CQ_VALUE.unpack(value))


def decode_cq_values(values: list[bytes]) -> np.ndarray:
    """Many values at once as a CQ_VALUE_DTYPE array."""
    joined = b"".join(values)
    if len(joined) != CQ_VALUE_SIZE * len(values):
        raise CorruptDataError(None, 0, "a consume-queue value is not 28 bytes")
    return np.frombuffer(joined, dtype=CQ_VALUE_DTYPE)


def values_to_units(values: np.ndarray) -> np.ndarray:
    """Drop the store time: CQ_VALUE_DTYPE -> CQ_UNIT_DTYPE (a new array)."""
    units = np.empty(len(values), dtype=CQ_UNIT_DTYPE)
    for name in CQ_UNIT_DTYPE.names:
        units[name] = values[name]
    return units


def queue_keys(topic: str, queue_id: int) -> tuple[bytes, bytes]:
    """(unit key prefix, `max` offset key) of a queue: the two keys dispatch writes per queue, made
    together from one topic header (`cq_key_prefix`, `offset_key(..., MAX_KIND)`)."""
    head = topic_head(topic)
    queue_id_bytes = _INT.pack(queue_id)
    return head + queue_id_bytes + CTRL_1, head + _MAX_CTRL + queue_id_bytes


_MAX_CTRL = MAX_KIND.encode("ascii") + CTRL_1


@lru_cache(maxsize=65536)
def offset_key(topic: str, queue_id: int, kind: str) -> bytes:
    if kind not in (MAX_KIND, MIN_KIND):
        raise ValueError(f"offset key kind must be 'max' or 'min', not {kind!r}")
    return topic_head(topic) + kind.encode("ascii") + CTRL_1 + _INT.pack(queue_id)


def decode_offset_key(key: bytes) -> tuple[str, str, int]:
    """(topic, kind, queue_id) of an offset-CF key."""
    topic, rest = _split_topic(key)
    if len(rest) != 8 or rest[3:4] != CTRL_1:
        raise CorruptDataError(None, len(key) - len(rest), "not an offset-table key")
    return topic, rest[:3].decode("ascii", "replace"), _INT.unpack_from(rest, 4)[0]


def offset_value(phy_offset: int, queue_offset: int) -> bytes:
    return _OFFSET_VALUE.pack(phy_offset, queue_offset)


def decode_offset_value(value: bytes) -> OffsetValue:
    if len(value) != OFFSET_VALUE_SIZE:
        raise CorruptDataError(None, 0, f"offset value is {len(value)} bytes, expected 16")
    return OffsetValue(*_OFFSET_VALUE.unpack(value))


def checkpoint_key() -> bytes:
    return offset_key(CHECKPOINT_TOPIC, 0, MAX_KIND)


def checkpoint_value(max_phy_end: int) -> bytes:
    return _LONG.pack(max_phy_end)


def decode_checkpoint_value(value: bytes) -> int:
    if len(value) != CHECKPOINT_VALUE_SIZE:
        raise CorruptDataError(None, 0, f"checkpoint value is {len(value)} bytes, expected 8")
    return _LONG.unpack(value)[0]


def _split_topic(key: bytes) -> tuple[str, bytes]:
    if len(key) < 6:
        raise CorruptDataError(None, 0, "key shorter than its topic header")
    length = _INT.unpack_from(key, 0)[0]
    end = 5 + length
    if length < 0 or key[4:5] != CTRL_1 or len(key) < end + 1 or key[end:end + 1] != CTRL_1:
        raise CorruptDataError(None, 0, "bad topic header in key")
    return key[5:end].decode("utf-8", "replace"), key[end + 1:]
