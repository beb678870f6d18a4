"""[5.x] Batch consume-queue unit codec (`BatchConsumeQueue`, tag rocketmq-all-5.3.3). Pure.

One unit is 46 bytes (`BatchConsumeQueue.CQ_STORE_UNIT_SIZE`), big-endian, one per commit-log
record of a batch topic (one record may carry many messages: an inner batch):

| field            | offset | size_bytes | meaning (BatchConsumeQueue constant)                         |
|------------------|--------|------------|--------------------------------------------------------------|
| phy_offset       | 0      | 8          | commit-log position of the record                            |
| size             | 8      | 4          | record size (TOTALSIZE)                                      |
| tags_code        | 12     | 8          | tags hash (`MSG_TAG_OFFSET_INDEX`)                           |
| store_timestamp  | 20     | 8          | the record's store time (`MSG_STORE_TIME_OFFSET_INDEX`)      |
| msg_base_offset  | 28     | 8          | queue offset of the record's first message, INNER_BASE (`MSG_BASE_OFFSET_INDEX`) |
| batch_size       | 36     | 2          | messages in the record, INNER_NUM, a short (`MSG_BATCH_SIZE_INDEX`) |
| compacted_offset | 38     | 4          | written as `INVALID_POS` = -1 (`MSG_COMPACT_OFFSET_INDEX`)   |
| reserved         | 42     | 4          | written as 0                                                 |

`putBatchMessagePositionInfo` writes the fields in this order. `BatchConsumeQueue.recover` keeps a unit
while `phy_offset >= 0 and size > 0 and msg_base_offset >= 0 and batch_size > 0`; the queue's max
offset is the last unit's msg_base_offset + batch_size (`reviseMaxOffsetInQueue`), its min offset the
first unit's msg_base_offset (`reviseMinOffsetInQueue`). No real store with batch units exists
among the fixtures: this layout is the source's, tested byte by byte against it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from store.errors import CorruptDataError

BATCH_CQ_UNIT_SIZE = 46
MSG_TAG_OFFSET_INDEX = 12
MSG_STORE_TIME_OFFSET_INDEX = 20
MSG_BASE_OFFSET_INDEX = 28
MSG_BATCH_SIZE_INDEX = 36
MSG_COMPACT_OFFSET_INDEX = 38
INVALID_POS = -1
DEFAULT_FILE_SIZE_BYTES = 300000 * BATCH_CQ_UNIT_SIZE   # mapperFileSizeBatchConsumeQueue

BATCH_UNIT_STRUCT = struct.Struct(">qiqqqhii")
BATCH_CQ_UNIT_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"),
                                ("store_timestamp", ">i8"), ("msg_base_offset", ">i8"),
                                ("batch_size", ">i2"), ("compacted_offset", ">i4"),
                                ("reserved", ">i4")])
assert BATCH_UNIT_STRUCT.size == BATCH_CQ_UNIT_SIZE == BATCH_CQ_UNIT_DTYPE.itemsize
assert BATCH_CQ_UNIT_DTYPE.fields["msg_base_offset"][1] == MSG_BASE_OFFSET_INDEX
assert BATCH_CQ_UNIT_DTYPE.fields["batch_size"][1] == MSG_BATCH_SIZE_INDEX
assert BATCH_CQ_UNIT_DTYPE.fields["compacted_offset"][1] == MSG_COMPACT_OFFSET_INDEX
assert BATCH_CQ_UNIT_DTYPE.fields["store_timestamp"][1] == MSG_STORE_TIME_OFFSET_INDEX


@dataclass(slots=True)
class BatchCqUnit:
    """One decoded batch unit. Treat as immutable."""

    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    msg_base_offset: int
    batch_size: int
    compacted_offset: int = INVALID_POS

    @property
    def end_queue_offset(self) -> int:
        """The queue offset after the record's last message."""
        return self.msg_base_offset + self.batch_size

    def is_valid(self) -> bool:
        """`BatchConsumeQueue.recover`'s test of a written unit."""
        return self.phy_offset >= 0 and self.size > 0 and self.msg_base_offset >= 0 and \
            self.batch_size > 0


def encode_batch_unit(unit: BatchCqUnit) -> bytes:
    """The 46 bytes `putBatchMessagePositionInfo` writes (reserved = 0)."""
    try:
        return BATCH_UNIT_STRUCT.pack(unit.phy_offset, unit.size, unit.tags_code,
                                      unit.store_timestamp, unit.msg_base_offset, unit.batch_size,
                                      unit.compacted_offset, 0)
    except struct.error as error:
        raise ValueError(f"batch unit field out of range: {error}") from None


def decode_batch_unit(buf, position: int = 0) -> BatchCqUnit:
    """The unit at `position` of `buf`; CorruptDataError if fewer than 46 bytes remain."""
    if position < 0 or len(buf) - position < BATCH_CQ_UNIT_SIZE:
        raise CorruptDataError(None, position, f"a batch consume-queue unit needs "
                                               f"{BATCH_CQ_UNIT_SIZE} bytes")
    phy, size, tags, store_ts, base, batch, compacted, _ = BATCH_UNIT_STRUCT.unpack_from(buf, position)
    return BatchCqUnit(phy, size, tags, store_ts, base, batch, compacted)


def valid_prefix_units(buf, count: int) -> int:
    """How many of the first `count` units of `buf` recovery keeps (up to the first invalid one)."""
    units = np.frombuffer(buf, dtype=BATCH_CQ_UNIT_DTYPE, count=count)
    bad = np.flatnonzero((units["phy_offset"] < 0) | (units["size"] <= 0) |
                         (units["msg_base_offset"] < 0) | (units["batch_size"] <= 0))
    return int(bad[0]) if len(bad) else count


def search_msg_offset(bases: np.ndarray, msg_offset: int) -> int:
    """Index of the unit holding `msg_offset` among units whose msg_base_offset are `bases`
    (ascending): the last one with base <= msg_offset, -1 if none. `BatchConsumeQueue.binarySearch`
    returns the same unit: the exact base, else where the search converges to the left, taking
    the right neighbour when its base is <= the target."""
    index = int(np.searchsorted(bases, msg_offset, side="right")) - 1
    return index
