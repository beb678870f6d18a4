"""The timing wheel file (`<root>/timerwheel`, RocketMQ's `TimerWheel`) and the timer checkpoint
(`<root>/config/timercheck`, `TimerCheckpoint`), read without writing. Layouts: `store.timer.codec`.

RocketMQ opens the wheel with `RandomAccessFile(.., "rw")` and `setLength(38,707,200)`: a missing or
empty wheel becomes all zero slots, any other length stops the broker ("Timer wheel length:%d !=
expected"). A read-only reader cannot create it, so it reports the state instead: "ok", "missing",
"empty" or "wrong size". Only the non-empty slots are kept (a 5.x wheel is almost all zeros).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field

import numpy as np

from store.errors import CorruptDataError
from store.timer.codec import (SLOT_DTYPE, TIMERCHECK_FILE_SIZE_BYTES, TIMERCHECK_USED_BYTES,
                               WHEEL_FILE_SIZE_BYTES, TimerCheckpointFields, WheelSlot,
                               decode_timercheck)

WHEEL_OK, WHEEL_MISSING, WHEEL_EMPTY, WHEEL_WRONG_SIZE = "ok", "missing", "empty", "wrong size"


@dataclass
class WheelRead:
    path: str
    state: str
    size_bytes: int | None
    slots: dict[int, WheelSlot] = field(default_factory=dict)   # index -> non-empty slot


def wheel_path(root: str) -> str:
    return os.path.join(root, "timerwheel")


def timercheck_path(root: str) -> str:
    return os.path.join(root, "config", "timercheck")


def read_wheel(root: str, precision_ms: int) -> WheelRead:
    """The wheel's state and its non-empty slots (`time_ms` = time_raw x `precision_ms`)."""
    path = wheel_path(root)
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return WheelRead(path, WHEEL_MISSING, None)
    if size == 0:
        return WheelRead(path, WHEEL_EMPTY, 0)
    if size != WHEEL_FILE_SIZE_BYTES:
        return WheelRead(path, WHEEL_WRONG_SIZE, size)
    fd = os.open(path, os.O_RDONLY)
    try:
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped:
            words = np.frombuffer(mapped, dtype=np.uint64).reshape(-1, 4)
            indexes = np.flatnonzero(words.any(axis=1))
            del words
            rows = np.frombuffer(mapped, dtype=SLOT_DTYPE)[indexes].copy()
    finally:
        os.close(fd)
    slots = {}
    for index, row in zip(indexes.tolist(), rows):
        time_raw = int(row["time_raw"])
        slots[index] = WheelSlot(index, time_raw, time_raw * precision_ms, int(row["first_pos"]),
                                 int(row["last_pos"]), int(row["num"]), int(row["magic"]))
    return WheelRead(path, WHEEL_OK, size, slots)


@dataclass(frozen=True)
class TimercheckRead:
    path: str
    size_bytes: int | None             # None: the file is missing
    fields: TimerCheckpointFields      # all zero when missing (RocketMQ starts from zero too)
    nonzero_tail_position: int | None  # first non-zero byte after the 56 used ones, if any


def read_timercheck(root: str) -> TimercheckRead:
    """`config/timercheck` as stored. Raises CorruptDataError (path, size) if it is shorter than 56
    bytes: RocketMQ maps 4096 bytes and would read a short file's missing tail as zeros."""
    path = timercheck_path(root)
    try:
        with open(path, "rb") as handle:
            data = handle.read(TIMERCHECK_FILE_SIZE_BYTES + 1)
    except FileNotFoundError:
        return TimercheckRead(path, None, TimerCheckpointFields(0, 0, 0, 0, 0, 0, 0), None)
    if len(data) < TIMERCHECK_USED_BYTES:
        raise CorruptDataError(path, len(data), f"timercheck is {len(data)} bytes, needs at least "
                                                f"{TIMERCHECK_USED_BYTES}")
    tail = data[TIMERCHECK_USED_BYTES:TIMERCHECK_FILE_SIZE_BYTES]
    nonzero = next((TIMERCHECK_USED_BYTES + i for i, b in enumerate(tail) if b), None) \
        if tail.count(0) != len(tail) else None
    return TimercheckRead(path, os.path.getsize(path), decode_timercheck(data), nonzero)
