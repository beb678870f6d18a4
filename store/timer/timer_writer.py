"""The timer store's files opened for writing: the wheel, the timer log and `config/timercheck`
(RocketMQ 5.3.3 `TimerWheel`, `TimerLog`, `TimerCheckpoint`). Layouts: `store.timer.codec`.

* `WheelFile` (`TimerWheel`): RocketMQ keeps a private copy of all 1,209,600 slots (a direct
  `byteBuffer`) that enqueue and recovery write, and only `flush()` (the 1-second
  `TimerFlushService`) copies the changed slots into the mapped file and forces it. Here the copy
  holds only the slots changed since the last flush; the others are read from the file (pread), and
  `flush()` writes the changed ones (pwrite) and forces the file. A missing or empty file becomes
  all zero slots (`setLength`); any other size is refused, as RocketMQ refuses to start ("Timer
  wheel length:%d != expected").
* `TimerLogWriter` (`TimerLog.append`): units go at the end of the last file; when a unit plus 16
  bytes does not fit, a BLANK (size = bytes left, prev 0, `BLANK_MAGIC`) fills the file and the unit
  opens the next one.
* `TimercheckFile` (`TimerCheckpoint`): the 4096-byte file mapped; `flush()` writes the seven longs
  and forces them. A missing file starts at zero.
"""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np

from store.errors import CorruptDataError
from store.mappedfile.mapped_file import make_directories_durable
from store.mappedfile.mapped_file_queue import MappedFileQueue
from store.timer.codec import (MIN_BLANK_LEN, SLOT_DTYPE, SLOT_SIZE,
                               TIMERCHECK_FILE_SIZE_BYTES, UNIT_SIZE, WHEEL_FILE_SIZE_BYTES,
                               WHEEL_SLOTS, TimerCheckpointFields, TimerLogUnit, WheelSlot,
                               decode_timercheck, encode_timercheck, is_magic_ok, pack_blank,
                               slot_index, unpack_unit)
from store.timer.timer_log import timer_log_dir
from store.timer.timer_wheel import timercheck_path, wheel_path

_READ_CHUNK_BYTES = 1 << 20
# Changed slots kept in memory between flushes at most (about 3 MB); more are written to the file
# early (RocketMQ's copy is the whole 38.7 MB wheel; an early write only moves ahead of the flush).
MAX_CHANGED_SLOTS = 16_384
_SLOT = struct.Struct(">qqqii")


def refuse_unusable_files(root: str) -> None:
    """Raise CorruptDataError (path, size) for a wheel RocketMQ refuses (neither missing, empty nor
    38,707,200 bytes) or a timercheck shorter than its 56 used bytes; nothing is written. The broker
    builds its TimerMessageStore (and so the wheel) before the message store loads."""
    path = wheel_path(root)
    if os.path.exists(path):
        size = os.path.getsize(path)
        if size not in (0, WHEEL_FILE_SIZE_BYTES):
            raise CorruptDataError(path, size, f"timer wheel is {size} bytes, expected "
                                               f"{WHEEL_FILE_SIZE_BYTES}: RocketMQ refuses it")
    path = timercheck_path(root)
    if os.path.exists(path) and os.path.getsize(path) < 56:
        raise CorruptDataError(path, os.path.getsize(path), "timercheck is shorter than its 56 "
                                                            "used bytes")


class WheelFile:
    """The wheel, writable (see the module docstring). Times are ms; `precision_ms` one slot.

    Slots changed since the last flush live in `_changed` (RocketMQ's in-memory copy, kept to what
    differs from the file, at most MAX_CHANGED_SLOTS); every other slot is read from the file with
    pread, so the process maps none of the 38.7 MB and its memory does not grow with the number of
    timers."""

    def __init__(self, root: str, precision_ms: int):
        self.path = wheel_path(root)
        self.precision_ms = precision_ms
        os.makedirs(root, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        if size not in (0, WHEEL_FILE_SIZE_BYTES):
            os.close(self._fd)
            raise CorruptDataError(self.path, size, f"timer wheel is {size} bytes, expected "
                                                    f"{WHEEL_FILE_SIZE_BYTES}: RocketMQ refuses it")
        if size == 0:
            os.ftruncate(self._fd, WHEEL_FILE_SIZE_BYTES)     # RandomAccessFile.setLength
        self._changed: dict[int, tuple[int, int, int, int, int]] = {}
        self._unsynced = False

    # -- slots -----------------------------------------------------------------------------------

    def _row(self, index: int) -> tuple[int, int, int, int, int]:
        row = self._changed.get(index)
        if row is None:
            row = _SLOT.unpack(os.pread(self._fd, SLOT_SIZE, index * SLOT_SIZE))
        return row

    def get_slot(self, time_ms: int) -> tuple[int, int, int, int] | None:
        """`TimerWheel.getSlot`: (first_pos, last_pos, num, magic), None when the slot holds
        another time (RocketMQ's Slot(-1, -1, -1))."""
        time_raw, first, last, num, magic = self._row(slot_index(time_ms, self.precision_ms))
        if time_raw != time_ms // self.precision_ms:
            return None
        return first, last, num, magic

    def slot_num(self, time_ms: int) -> int:
        """`TimerWheel.getNum`: the slot's timer count, 0 for a slot of another time (or once
        closed: the put hook may ask while the store shuts down)."""
        if self._fd < 0:
            return 0
        slot = self.get_slot(time_ms)
        return 0 if slot is None else slot[2]

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int) -> None:
        self._changed[slot_index(time_ms, self.precision_ms)] = (
            time_ms // self.precision_ms, first_pos, last_pos, num, magic)
        if len(self._changed) >= MAX_CHANGED_SLOTS:
            self._write_changed()           # a bound on memory; forced at the next flush

    def _write_changed(self) -> None:
        changed, self._changed = self._changed, {}
        for index in sorted(changed):
            os.pwrite(self._fd, _SLOT.pack(*changed[index]), index * SLOT_SIZE)
        self._unsynced = self._unsynced or bool(changed)

    def _hole_until(self, position: int, end: int) -> bool:
        """True when [position, end) of the file is a hole (all zero slots, never written): the
        wheel is a sparse file, so most of it is skipped without reading."""
        try:
            return os.lseek(self._fd, position, os.SEEK_DATA) >= end
        except OSError:                     # ENXIO: no data after position
            return True

    def _chunks(self, first_index: int = 0, count: int = WHEEL_SLOTS):
        """(first slot index, rows) over [first_index, first_index + count), read in bounded chunks
        (the file's rows; `_changed` is not applied; holes are skipped)."""
        per_chunk = _READ_CHUNK_BYTES // SLOT_SIZE
        index = first_index
        while index < first_index + count:
            take = min(per_chunk, first_index + count - index, WHEEL_SLOTS - index)
            if not self._hole_until(index * SLOT_SIZE, (index + take) * SLOT_SIZE):
                data = os.pread(self._fd, take * SLOT_SIZE, index * SLOT_SIZE)
                yield index, np.frombuffer(data, dtype=SLOT_DTYPE)
            index += take

    def non_empty(self) -> dict[int, WheelSlot]:
        """Every non-zero slot, as `timer_wheel.read_wheel` gives them (changes applied)."""
        found: dict[int, WheelSlot] = {}
        for first, rows in self._chunks():
            words = rows.view(np.uint64).reshape(-1, 4)
            for offset in np.flatnonzero(words.any(axis=1)).tolist():
                r = rows[offset]
                found[first + offset] = WheelSlot(
                    first + offset, int(r["time_raw"]), int(r["time_raw"]) * self.precision_ms,
                    int(r["first_pos"]), int(r["last_pos"]), int(r["num"]), int(r["magic"]))
        for index, row in self._changed.items():
            found[index] = WheelSlot(index, row[0], row[0] * self.precision_ms, *row[1:])
        return found

    def set_slots(self, slots: dict[int, WheelSlot]) -> int:
        """Record the slots that differ from the wheel (recovery's revised ones); returns how many."""
        changed = 0
        for index, slot in slots.items():
            row = (slot.time_raw, slot.first_pos, slot.last_pos, slot.num, slot.magic)
            if self._row(index) != row:
                self._changed[index] = row
                changed += 1
        return changed

    def next_live_time(self, start_ms: int, end_ms: int) -> int:
        """The first slot time in [start_ms, end_ms) whose slot holds that time, else end_ms: the
        empty slots RocketMQ's dequeue steps over one by one (`moveReadTime`), skipped at once."""
        precision = self.precision_ms
        steps = max(0, -(-(end_ms - start_ms) // precision))
        if steps == 0:
            return start_ms
        steps = min(steps, WHEEL_SLOTS)
        start_raw = start_ms // precision
        best = None
        for index, row in self._changed.items():
            step = (index - start_raw) % WHEEL_SLOTS
            if step < steps and row[0] == start_raw + step and (best is None or step < best):
                best = step
        limit = steps if best is None else best       # only earlier slots can come first
        first_index = start_raw % WHEEL_SLOTS
        per_chunk = 256                      # grows: the next live slot is usually near
        done = 0
        while done < limit:
            index = (first_index + done) % WHEEL_SLOTS
            count = min(limit - done, WHEEL_SLOTS - index, per_chunk)
            per_chunk = min(per_chunk * 4, _READ_CHUNK_BYTES // SLOT_SIZE)
            if self._hole_until(index * SLOT_SIZE, (index + count) * SLOT_SIZE):
                done += count                # zero slots: time_raw 0 is never a live time
                continue
            rows = np.frombuffer(os.pread(self._fd, count * SLOT_SIZE, index * SLOT_SIZE),
                                 dtype=SLOT_DTYPE)
            expected = start_raw + done + np.arange(count, dtype=np.int64)
            for offset in np.flatnonzero(rows["time_raw"] == expected).tolist():
                if index + offset not in self._changed:     # a change decides for its slot
                    return start_ms + (done + offset) * precision
            done += count
        return end_ms if best is None else start_ms + best * precision

    # -- flush -----------------------------------------------------------------------------------

    def flush(self) -> int:
        """Write the changed slots into the file and force it; returns the slots written."""
        count = len(self._changed)
        self._write_changed()
        if self._unsynced:
            os.fdatasync(self._fd)
            self._unsynced = False
        return count

    def close(self) -> None:
        """Close without flushing (`TimerWheel.shutdown(false)`, as the timer store's shutdown)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class TimerLogWriter:
    """The timer log, writable: `append` with the BLANK rule, `unit_at`, `truncate`, `flush`."""

    def __init__(self, root: str, file_size_bytes: int):
        if file_size_bytes < UNIT_SIZE + MIN_BLANK_LEN:
            raise ValueError(f"mappedFileSizeTimerLog {file_size_bytes} cannot hold a unit")
        self.queue = MappedFileQueue(timer_log_dir(root), file_size_bytes)
        self.queue.load()
        self.file_size_bytes = file_size_bytes

    def append(self, unit: bytes) -> int:
        """`TimerLog.append`: the timer-log offset the unit was written at."""
        queue = self.queue
        mapped = queue.last_file()
        if mapped is None or mapped.is_full():
            mapped = queue.last_file_or_create(0)
        if len(unit) + MIN_BLANK_LEN > mapped.free_bytes():
            mapped.append(pack_blank(mapped.free_bytes()))
            mapped.wrote_position = self.file_size_bytes     # the BLANK fills the file
            mapped = queue.last_file_or_create(0)
        position = mapped.append(unit)
        return mapped.file_from_offset + position

    def unit_at(self, pos: int) -> TimerLogUnit | None:
        """The unit at timer-log offset `pos` (None when no file holds it: `getWholeBuffer` null)."""
        mapped = self.queue.find_file(pos)
        if mapped is None:
            return None
        position = pos - mapped.file_from_offset
        if position + UNIT_SIZE > self.file_size_bytes:
            return None
        return unpack_unit(mapped.buffer, position, pos=pos)

    def delete_expired(self, min_phy_offset: int) -> int:
        """`deleteExpiredFileByOffsetForTimerLog`: every file but the last whose last unit slot
        (`getOffsetForLastUnit`) holds a valid unit pointing below `min_phy_offset` (the commit
        log's first offset) is deleted; returns how many."""
        size = self.file_size_bytes
        check = size - (size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE
        victims = []
        for mapped in list(self.queue.files)[:-1]:
            unit = unpack_unit(mapped.buffer, check, pos=mapped.file_from_offset + check)
            if unit.size == UNIT_SIZE and is_magic_ok(unit.magic) and \
                    unit.offset_py < min_phy_offset:
                victims.append(mapped)
        if victims:
            self.queue.delete_files(victims)
        return len(victims)

    def truncate(self, offset: int) -> None:
        """`truncateDirtyFiles(offset)`: later files deleted, the last one cut at `offset`."""
        self.queue.truncate_dirty_files(offset)
        self.queue.set_positions(offset)

    @property
    def flushed_where(self) -> int:
        return self.queue.flushed_where

    def max_offset(self) -> int:
        return self.queue.max_wrote_offset()

    def flush(self) -> bool:
        """`MappedFileQueue.flush(0)`: the file holding the flushed offset."""
        return self.queue.flush(0)

    def close(self) -> None:
        self.queue.close()


class TimercheckFile:
    """`config/timercheck`, mapped (4096 bytes). `fields` is the in-memory checkpoint."""

    def __init__(self, root: str):
        self.path = timercheck_path(root)
        make_directories_durable(os.path.dirname(self.path))
        existed = os.path.exists(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if existed and size < 56:
                raise CorruptDataError(self.path, size, f"timercheck is {size} bytes, needs at "
                                                        f"least 56")
            if size < TIMERCHECK_FILE_SIZE_BYTES:
                os.ftruncate(fd, TIMERCHECK_FILE_SIZE_BYTES)
            self._map = mmap.mmap(fd, TIMERCHECK_FILE_SIZE_BYTES, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        self.fields = decode_timercheck(self._map[:56]) if existed else \
            TimerCheckpointFields(0, 0, 0, 0, 0, 0, 0)

    def flush(self) -> None:
        """`TimerCheckpoint.flush`: the seven longs, then force."""
        self._map[:56] = encode_timercheck(self.fields)[:56]
        self._map.flush()

    def close(self) -> None:
        self._map.close()
