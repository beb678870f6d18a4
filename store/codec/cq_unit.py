"""Consume-queue unit codec (spec §4.1, §4.4, §4.5). Pure: bytes <-> values, no I/O.

One unit is 20 bytes, big-endian:

| field       | offset | size_bytes | meaning                                                          |
|-------------|--------|------------|------------------------------------------------------------------|
| phy_offset  | 0      | 8          | commit-log byte position of the record (long)                    |
| size        | 8      | 4          | record size = TOTALSIZE (int); 0x7FFFFFFF in a pre-fill unit      |
| tags_code   | 12     | 8          | Java hash of TAGS sign-extended, a delay time, or an ext address |

Unit k of a queue (queue offset k) lives at CQ byte offset 20*k. A unit is valid when
`phy_offset >= 0 and size > 0`; an all-zero unit marks the end of a queue. A pre-fill unit
`(0, 0x7FFFFFFF, 0)` pads the first file of a queue that starts at a non-zero queue offset; it counts as
valid for recovery.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from store.errors import CorruptDataError

CQ_UNIT_SIZE = 20
CQ_UNIT_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
PREFILL_SIZE = 0x7FFFFFFF

UNIT_STRUCT = struct.Struct(">qiq")
assert UNIT_STRUCT.size == CQ_UNIT_SIZE == CQ_UNIT_DTYPE.itemsize

PREFILL_UNIT = UNIT_STRUCT.pack(0, PREFILL_SIZE, 0)

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


# Not frozen: a frozen dataclass costs ~5x more to build, and one is built per message.
# Treat instances as immutable.
@dataclass(slots=True)
class CqUnit:
    """One decoded consume-queue unit."""

    phy_offset: int
    size: int
    tags_code: int

    @property
    def phy_end(self) -> int:
        """Commit-log position just after the record this unit points to."""
        return self.phy_offset + self.size


def pack_unit(phy_offset: int, size: int, tags_code: int) -> bytes:
    """The 20 bytes of one unit. Raises ValueError when a field does not fit its Java type."""
    if not (_INT64_MIN <= phy_offset <= _INT64_MAX and _INT32_MIN <= size <= _INT32_MAX
            and _INT64_MIN <= tags_code <= _INT64_MAX):
        raise ValueError(f"unit field out of range: {(phy_offset, size, tags_code)}")
    return UNIT_STRUCT.pack(phy_offset, size, tags_code)


def unpack_unit(buf, position: int = 0) -> CqUnit:
    """Decode the unit at `position` of `buf`; CorruptDataError if fewer than 20 bytes remain."""
    if position < 0 or position + CQ_UNIT_SIZE > len(buf):
        raise CorruptDataError(None, position, "consume-queue unit truncated (needs 20 bytes)")
    return CqUnit(*UNIT_STRUCT.unpack_from(buf, position))


def is_valid_unit(phy_offset: int, size: int) -> bool:
    """Spec §4.5: the unit was written (pre-fill units included)."""
    return phy_offset >= 0 and size > 0


def is_prefill_unit(phy_offset: int, size: int, tags_code: int) -> bool:
    return phy_offset == 0 and size == PREFILL_SIZE and tags_code == 0


def units_from_buffer(buf, position: int = 0, count: int | None = None) -> np.ndarray:
    """A zero-copy structured view of `count` units from `position` (all whole units if None)."""
    available = (len(buf) - position) // CQ_UNIT_SIZE
    if count is None:
        count = available
    if position < 0 or count < 0 or count > available:
        raise CorruptDataError(None, position, f"{count} consume-queue units do not fit the buffer")
    return np.frombuffer(buf, dtype=CQ_UNIT_DTYPE, count=count, offset=position)


def pack_units(phy_offsets, sizes, tags_codes) -> bytes:
    """Many units at once (vectorized); the arguments are equal-length integer sequences."""
    units = np.empty(len(phy_offsets), dtype=CQ_UNIT_DTYPE)
    units["phy_offset"] = phy_offsets
    units["size"] = sizes
    units["tags_code"] = tags_codes
    return units.tobytes()


def valid_prefix_length(units: np.ndarray) -> int:
    """Number of leading valid units (recovery stops at the first invalid one)."""
    invalid = (units["phy_offset"] < 0) | (units["size"] <= 0)
    if not invalid.any():
        return len(units)
    return int(invalid.argmax())


def roll_next_file(queue_offset: int, units_per_file: int) -> int:
    """`rollNextFile`: the first queue offset of the file after the one holding `queue_offset`."""
    return queue_offset + units_per_file - queue_offset % units_per_file
