"""The timer log (`<root>/timerlog/`): RocketMQ's `TimerLog`, a `MappedFileQueue` of
`mappedFileSizeTimerLog`-byte files named by offset, holding 52-byte units (layout in
`store.timer.codec`). Read-only here: the files are mapped with `MappedFileQueue(read_only=True)`.

`scan()` walks every file the way `TimerMessageStore.recoverAndRevise(.., checkTimerLog=true)` walks
one: unit by unit from position 0, a BLANK magic ends the file (the walk moves on to the next one), a
unit whose size is not 52 or whose magic fails `isMagicOK` ends the log. The result keeps the units as a
numpy structured array with their timer-log offsets beside them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from store.mappedfile.mapped_file import offset_to_file_name
from store.mappedfile.mapped_file_queue import MappedFileQueue
from store.timer.codec import (BLANK_MAGIC, UNIT_DTYPE, UNIT_SIZE, TimerLogUnit,
                               is_magic_ok_array, unit_from_row)

MAX_UNITS_PER_SCAN = 50_000_000      # about 2.6 GB of timer log; a longer log is reported as capped


@dataclass(frozen=True)
class TimerLogFile:
    """One timer-log file: where its units end, and how (BLANK, the log's end, or the file's end)."""

    name: str
    file_from_offset: int
    units: int
    end_position: int
    ends_with: str          # "blank" | "end" (first invalid unit) | "full"
    blank_size: int | None  # the BLANK's size field (bytes left), when ends_with == "blank"


@dataclass
class TimerLogScan:
    """The units of a timer log and where it ends (`end_offset` = recoverAndRevise's checkOffset
    for a walk from the first file)."""

    file_size_bytes: int
    units: np.ndarray = field(default_factory=lambda: np.zeros(0, UNIT_DTYPE))
    pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    files: list[TimerLogFile] = field(default_factory=list)
    end_offset: int = 0
    stop_reason: str = "no timer-log files"
    capped: bool = False
    ignored_names: list[str] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)
    file_count: int = 0                 # every timer-log file, walked or not

    def unit_at(self, pos: int) -> TimerLogUnit | None:
        """The valid unit at timer-log offset `pos`, or None."""
        i = int(np.searchsorted(self.pos, pos))
        if i < len(self.pos) and int(self.pos[i]) == pos:
            return unit_from_row(self.units[i], pos)
        return None

    def index_of(self, pos: int) -> int:
        i = int(np.searchsorted(self.pos, pos))
        return i if i < len(self.pos) and int(self.pos[i]) == pos else -1

    def file_from_offset_of(self, pos: int) -> int:
        return pos - pos % self.file_size_bytes

    def file_name_of(self, pos: int) -> str:
        return offset_to_file_name(self.file_from_offset_of(pos))


def timer_log_dir(root: str) -> str:
    return os.path.join(root, "timerlog")


def open_timer_log(root: str, file_size_bytes: int) -> MappedFileQueue:
    """The timer log's files mapped read-only (raises CorruptDataError naming a wrong-sized file)."""
    queue = MappedFileQueue(timer_log_dir(root), file_size_bytes, read_only=True,
                            allow_empty_last_file=True)
    queue.load()
    return queue


def scan_units(queue: MappedFileQueue, *, max_units: int = MAX_UNITS_PER_SCAN,
               keep_units: bool = True) -> TimerLogScan:
    """Walk every file from its start (see the module docstring); writes nothing. With
    `keep_units=False` only the per-file counts and the end are kept (a planner's cheap pass)."""
    result = TimerLogScan(queue.file_size_bytes, ignored_names=list(queue.problems.ignored_names),
                          gaps=list(queue.problems.gaps), file_count=len(queue.files))
    chunks, positions = [], []
    total = 0
    per_file = queue.file_size_bytes // UNIT_SIZE
    for mapped in list(queue.files):
        name = os.path.basename(mapped.path)
        rows = np.frombuffer(mapped.buffer, dtype=UNIT_DTYPE, count=per_file)
        valid = (rows["size"] == UNIT_SIZE) & is_magic_ok_array(rows["magic"])
        bad = np.flatnonzero(~valid)
        count = int(bad[0]) if len(bad) else per_file
        if total + count > max_units:
            count = max_units - total
            result.capped = True
        if keep_units:
            # Copy: the map is closed when the caller closes the queue.
            chunks.append(np.array(rows[:count]))
            positions.append(mapped.file_from_offset + np.arange(count, dtype=np.int64) * UNIT_SIZE)
        total += count
        end_position = count * UNIT_SIZE
        result.end_offset = mapped.file_from_offset + end_position
        if result.capped:
            result.files.append(TimerLogFile(name, mapped.file_from_offset, count, end_position,
                                             "end", None))
            result.stop_reason = f"scan capped at {max_units} units"
            break
        size, magic = _header_at(mapped.buffer, end_position, queue.file_size_bytes)
        if magic == BLANK_MAGIC:
            result.files.append(TimerLogFile(name, mapped.file_from_offset, count, end_position,
                                             "blank", size))
            result.stop_reason = f"BLANK at {result.end_offset} ends {name}"
            continue
        if end_position == queue.file_size_bytes:
            # Every unit valid up to the file's very end (possible only when the file size is a
            # multiple of 52): the walk goes on with the next file.
            result.files.append(TimerLogFile(name, mapped.file_from_offset, count, end_position,
                                             "full", None))
            result.stop_reason = f"{name} is full"
            continue
        result.files.append(TimerLogFile(name, mapped.file_from_offset, count, end_position,
                                         "end", None))
        if size is None:
            result.stop_reason = (f"{queue.file_size_bytes - end_position} bytes after the last "
                                  f"unit of {name}: too few for a unit or a BLANK")
        elif size == 0 and magic == 0:
            result.stop_reason = "end of the timer log (zeros)"
        else:
            result.stop_reason = f"invalid unit at {result.end_offset} (size {size}, magic {magic})"
        break
    if chunks:
        result.units = np.concatenate(chunks)
        result.pos = np.concatenate(positions)
    return result


def _header_at(buf, position: int, file_size_bytes: int) -> tuple[int | None, int | None]:
    """(size, magic) of the 16-byte header at `position`, or (None, None) if it does not fit."""
    if position + 16 > file_size_bytes:
        return None, None
    size = int.from_bytes(buf[position:position + 4], "big", signed=True)
    magic = int.from_bytes(buf[position + 12:position + 16], "big", signed=True)
    return size, magic
