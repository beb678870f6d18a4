"""Byte layouts of the 5.x timer store (RocketMQ 5.3.3, `org.apache.rocketmq.store.timer`). Pure.

Timer-log unit (`TimerLog.UNIT_SIZE` = 52; written by `TimerMessageStore.doEnqueue`), big-endian:

| field               | position | size_bytes | meaning                                                    |
|---------------------|----------|------------|------------------------------------------------------------|
| size                | 0        | 4          | 52                                                         |
| prev_pos            | 4        | 8          | the previous unit of the same wheel slot (timer-log offset), -1 if none |
| magic               | 12       | 4          | `MAGIC_DEFAULT` 1, `\\| MAGIC_ROLL` 2, `\\| MAGIC_DELETE` 4  |
| curr_write_time_ms  | 16       | 8          | the timer's write clock (`currWriteTimeMs`, whole precision steps) |
| delay_ms            | 24       | 4          | due time = curr_write_time_ms + delay_ms                  |
| offset_py           | 28       | 8          | `phy_offset` of the `rmq_sys_wheel_timer` record (`UNIT_PRE_SIZE_FOR_MSG` = 28) |
| size_py             | 36       | 4          | that record's size                                         |
| topic_hash          | 40       | 4          | Java `String.hashCode` of `REAL_TOPIC` (`hashTopicForMetrics`, `UNIT_PRE_SIZE_FOR_METRIC` = 40) |
| reserved            | 44       | 8          | 0                                                          |

BLANK (`TimerLog.append`): when a unit plus `MIN_BLANK_LEN` (16) does not fit in the file, a 16-byte
filler is written: size = bytes left in the file, prev_pos 0, magic `BLANK_MAGIC_CODE` =
`0xBBCCDDEE ^ (1880681586 + 8)` (-875286124, the commit log's BLANK magic too). The next unit opens
the next file. `TimerMessageStore.isMagicOK(magic)` accepts any magic with only the low 4 bits set.

Wheel slot (`Slot.SIZE` = 32; `TimerWheel.putSlot`), big-endian; the file holds
`TimerWheel.slotsTotal * 2` slots, `slotsTotal = TIMER_WHEEL_TTL_DAY (7) * DAY_SECS (86400)`,
whatever `timerPrecisionMs` is (so always 38,707,200 bytes). A slot's index is
`time_ms // precision_ms % 1,209,600` (`TimerWheel.getSlotIndex`):

| field      | position | size_bytes | meaning                                                     |
|------------|----------|------------|-------------------------------------------------------------|
| time_raw   | 0        | 8          | `timeMs / precisionMs` (`Slot.timeMs` after multiplying back) |
| first_pos  | 8        | 8          | the slot's first unit in the timer log                      |
| last_pos   | 16       | 8          | its last unit: the chain starts here and follows prev_pos   |
| num        | 24       | 4          | units enqueued into the slot (delete units subtract one)     |
| magic      | 28       | 4          | unused (0)                                                  |

Timer checkpoint `config/timercheck` (`TimerCheckpoint.flush`): a 4096-byte file (`OS_PAGE_SIZE`) whose
first 56 bytes are seven big-endian longs, the rest zero:

| field                    | position | meaning                                                 |
|--------------------------|----------|---------------------------------------------------------|
| last_read_time_ms        | 0        | the next slot time dequeue reads (`lastReadTimeMs`)     |
| last_timer_log_flush_pos | 8        | the timer log's flushed end (`lastTimerLogFlushPos`)    |
| last_timer_queue_offset  | 16       | next `rmq_sys_wheel_timer` queue offset to enqueue      |
| master_timer_queue_offset| 24       | the master's (`masterTimerQueueOffset`)                 |
| state_version            | 32       | `dataVersion.stateVersion`                              |
| data_version_timestamp   | 40       | `dataVersion.timestamp`                                 |
| data_version_counter     | 48       | `dataVersion.counter`                                   |
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from store.errors import CorruptDataError

UNIT_SIZE = 52
MIN_BLANK_LEN = 16
UNIT_PRE_SIZE_FOR_MSG = 28
BLANK_MAGIC = struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ (1880681586 + 8)))[0]
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 86400
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS          # TimerMessageStore.slotsTotal
WHEEL_SLOTS = SLOTS_TOTAL * 2                          # slots in the file
SLOT_SIZE = 32
WHEEL_FILE_SIZE_BYTES = WHEEL_SLOTS * SLOT_SIZE
TIMER_BLANK_SLOTS = 60                                 # TimerMessageStore.TIMER_BLANK_SLOTS
TIMERCHECK_FILE_SIZE_BYTES = 4096
TIMERCHECK_USED_BYTES = 56

UNIT_DTYPE = np.dtype([("size", ">i4"), ("prev_pos", ">i8"), ("magic", ">i4"),
                       ("curr_write_time_ms", ">i8"), ("delay_ms", ">i4"), ("offset_py", ">i8"),
                       ("size_py", ">i4"), ("topic_hash", ">i4"), ("reserved", ">i8")])
SLOT_DTYPE = np.dtype([("time_raw", ">i8"), ("first_pos", ">i8"), ("last_pos", ">i8"),
                       ("num", ">i4"), ("magic", ">i4")])
_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")
_SLOT = struct.Struct(">qqqii")
_TIMERCHECK = struct.Struct(">7q")
assert UNIT_DTYPE.itemsize == _UNIT.size == UNIT_SIZE
assert SLOT_DTYPE.itemsize == _SLOT.size == SLOT_SIZE
assert _BLANK.size == MIN_BLANK_LEN and _TIMERCHECK.size == TIMERCHECK_USED_BYTES
assert BLANK_MAGIC == -875286124 and WHEEL_FILE_SIZE_BYTES == 38_707_200


def is_magic_ok(magic: int) -> bool:
    """`TimerMessageStore.isMagicOK`: only the low four bits may be set (0 passes too)."""
    return (magic | 0xF) == 0xF


def is_magic_ok_array(magic: np.ndarray) -> np.ndarray:
    return (magic.astype(np.int64) & ~np.int64(0xF)) == 0


@dataclass(frozen=True, slots=True)
class TimerLogUnit:
    """One 52-byte timer-log unit; `pos` is its timer-log offset (file_from_offset + position)."""

    pos: int
    size: int
    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delay_ms: int
    offset_py: int
    size_py: int
    topic_hash: int
    reserved: int

    @property
    def due_time_ms(self) -> int:
        return self.curr_write_time_ms + self.delay_ms

    @property
    def is_roll(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def is_delete(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)


def pack_unit(*, prev_pos: int, magic: int, curr_write_time_ms: int, delay_ms: int,
              offset_py: int, size_py: int, topic_hash: int, reserved: int = 0) -> bytes:
    """The 52 bytes `TimerMessageStore.doEnqueue` writes (raises struct.error on a field overflow)."""
    return _UNIT.pack(UNIT_SIZE, prev_pos, magic, curr_write_time_ms, delay_ms, offset_py, size_py,
                      topic_hash, reserved)


def unpack_unit(buf, position: int = 0, *, pos: int | None = None) -> TimerLogUnit:
    """Decode the unit at `position` of `buf`; `pos` is its timer-log offset (default `position`).
    Raises CorruptDataError if fewer than 52 bytes remain."""
    if position < 0 or position + UNIT_SIZE > len(buf):
        raise CorruptDataError(None, position, f"timer-log unit needs {UNIT_SIZE} bytes, "
                                               f"{max(0, len(buf) - position)} left")
    fields = _UNIT.unpack_from(buf, position)
    return TimerLogUnit(position if pos is None else pos, *fields)


def unit_from_row(row, pos: int) -> TimerLogUnit:
    """A `TimerLogUnit` from one row of a `UNIT_DTYPE` array."""
    return TimerLogUnit(int(pos), int(row["size"]), int(row["prev_pos"]), int(row["magic"]),
                        int(row["curr_write_time_ms"]), int(row["delay_ms"]), int(row["offset_py"]),
                        int(row["size_py"]), int(row["topic_hash"]), int(row["reserved"]))


def pack_blank(size_bytes: int) -> bytes:
    """The 16-byte BLANK `TimerLog.append` writes when a unit does not fit (size = bytes left)."""
    return _BLANK.pack(size_bytes, 0, BLANK_MAGIC)


@dataclass(frozen=True, slots=True)
class WheelSlot:
    """One non-empty wheel slot; `time_ms` = time_raw x precision (`TimerWheel.getRawSlot`)."""

    index: int
    time_raw: int
    time_ms: int
    first_pos: int
    last_pos: int
    num: int
    magic: int

    @property
    def slot_index(self) -> int:
        return self.index


def slot_index(time_ms: int, precision_ms: int) -> int:
    """`TimerWheel.getSlotIndex` (times are positive: Java's / and % agree with Python's)."""
    return time_ms // precision_ms % WHEEL_SLOTS


def pack_slot(time_ms: int, precision_ms: int, first_pos: int, last_pos: int, num: int,
              magic: int = 0) -> bytes:
    return _SLOT.pack(time_ms // precision_ms, first_pos, last_pos, num, magic)


def unpack_slot(buf, index: int, precision_ms: int) -> WheelSlot:
    """Decode slot `index` of a whole wheel buffer."""
    position = index * SLOT_SIZE
    if index < 0 or position + SLOT_SIZE > len(buf):
        raise CorruptDataError(None, position, f"wheel slot {index} is past the buffer's end")
    time_raw, first, last, num, magic = _SLOT.unpack_from(buf, position)
    return WheelSlot(index, time_raw, time_raw * precision_ms, first, last, num, magic)


@dataclass(frozen=True, slots=True)
class TimerCheckpointFields:
    """`config/timercheck` as stored (see the module docstring)."""

    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    state_version: int
    data_version_timestamp: int
    data_version_counter: int

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}


def decode_timercheck(buf) -> TimerCheckpointFields:
    """The seven longs at the start of a timercheck file (raises CorruptDataError if shorter)."""
    if len(buf) < TIMERCHECK_USED_BYTES:
        raise CorruptDataError(None, len(buf), f"timercheck holds {len(buf)} bytes, needs "
                                               f"{TIMERCHECK_USED_BYTES}")
    return TimerCheckpointFields(*_TIMERCHECK.unpack_from(buf, 0))


def encode_timercheck(fields: TimerCheckpointFields) -> bytes:
    """The whole 4096-byte file `TimerCheckpoint.flush` leaves (the rest zero)."""
    head = _TIMERCHECK.pack(*(getattr(fields, name) for name in fields.__slots__))
    return head.ljust(TIMERCHECK_FILE_SIZE_BYTES, b"\0")
