"""The `checkpoint` file (spec §6.1, RocketMQ `StoreCheckpoint`).

A 4096-byte file; only the head is used, the rest is zero. Every field is a big-endian signed long.

| field                | offset | size_bytes | meaning                                                        |
|----------------------|--------|------------|----------------------------------------------------------------|
| physic_msg_timestamp | 0      | 8          | store time (ms) of the last commit-log record known flushed    |
| logics_msg_timestamp | 8      | 8          | store time (ms) of the last record durable in a consume queue  |
| index_msg_timestamp  | 16     | 8          | end time (ms) of the last index file completed and flushed     |
| master_flushed_offset| 24     | 8          | [5.x] HA bookkeeping: the master's flushed phy_offset          |
| confirm_phy_offset   | 32     | 8          | [5.x] last confirmed phy_offset                                |

4.9.7 writes 24 bytes (`style="4.9"`), 5.x writes 40 (`style="5.x"`). A 4.9.7 broker ignores bytes 24..39;
a 5.x broker reading a 4.9.7 file sees zeros there, so decoding always reads all five longs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from store.errors import CorruptDataError

CHECKPOINT_FILE_SIZE_BYTES = 4096
CHECKPOINT_USED_BYTES_4_9 = 24
CHECKPOINT_USED_BYTES_5_X = 40
STYLES = ("4.9", "5.x")
# Recovery starts this far before the checkpoint so records flushed in the same instant are rescanned.
MIN_TIMESTAMP_SAFETY_MS = 3000

_HEAD_4_9 = struct.Struct(">qqq")
_HEAD_5_X = struct.Struct(">qqqqq")
assert _HEAD_4_9.size == CHECKPOINT_USED_BYTES_4_9
assert _HEAD_5_X.size == CHECKPOINT_USED_BYTES_5_X

_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The decoded head of a checkpoint file. Timestamps are epoch milliseconds."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0


def used_bytes(style: str) -> int:
    """How many head bytes a broker of `style` writes (24 for "4.9", 40 for "5.x")."""
    if style == "4.9":
        return CHECKPOINT_USED_BYTES_4_9
    if style == "5.x":
        return CHECKPOINT_USED_BYTES_5_X
    raise ValueError(f"unknown checkpoint style {style!r}; expected one of {STYLES}")


def encode_checkpoint(cp: Checkpoint, style: str = "4.9") -> bytes:
    """Encode `cp` as a whole 4096-byte checkpoint file.

    "4.9" writes only the first three longs and zeros after them: a 4.9.7 broker ignores bytes 24..39, so
    the 5.x fields are not representable in that style. Raises ValueError for a value that is not a Java long.
    """
    used = used_bytes(style)
    values = (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp,
              cp.master_flushed_offset, cp.confirm_phy_offset)
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool) or not _LONG_MIN <= value <= _LONG_MAX:
            raise ValueError(f"checkpoint field {value!r} is not a Java long")
    if style == "4.9":
        head = _HEAD_4_9.pack(*values[:3])
    else:
        head = _HEAD_5_X.pack(*values)
    return head + bytes(CHECKPOINT_FILE_SIZE_BYTES - used)


def decode_checkpoint(data: bytes | bytearray | memoryview) -> Checkpoint:
    """Decode a checkpoint file's bytes (at least 24 bytes; missing 5.x fields read as 0).

    RocketMQ maps a whole page, so a short file reads as zero-padded; we accept any length >= 24 and treat
    bytes 24..39 as zeros when absent. Fewer than 24 bytes raises CorruptDataError.
    """
    buf = bytes(data[:CHECKPOINT_USED_BYTES_5_X])
    if len(buf) < CHECKPOINT_USED_BYTES_4_9:
        raise CorruptDataError(None, len(buf), f"checkpoint has {len(buf)} bytes, needs at least 24")
    buf = buf.ljust(CHECKPOINT_USED_BYTES_5_X, b"\0")
    return Checkpoint(*_HEAD_5_X.unpack(buf))


def min_timestamp(cp: Checkpoint) -> int:
    """`max(0, min(physic, logics) - 3000)`: where abnormal recovery starts looking (spec §6.1)."""
    return max(0, min(cp.physic_msg_timestamp, cp.logics_msg_timestamp) - MIN_TIMESTAMP_SAFETY_MS)


def min_timestamp_index(cp: Checkpoint) -> int:
    """`min(min_timestamp, indexMsgTimestamp)`: the recovery start when the index must be consistent too."""
    return min(min_timestamp(cp), cp.index_msg_timestamp)
