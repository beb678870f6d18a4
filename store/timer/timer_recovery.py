"""RocketMQ's `TimerMessageStore.recover()` replayed in memory, writing nothing.

The steps (5.3.3):

1. `lastFlushPos = timercheck.lastTimerLogFlushPos - fileSize(last timer-log file)`, at least 0.
2. `recoverAndRevise(lastFlushPos, checkTimerLog=true)`: from the start of the file holding
   lastFlushPos, every unit revises its slot (`TimerWheel.reviseSlot(dueTime, IGNORE, pos, force)`:
   a slot holding another time is overwritten with first = last = pos and keeps its num and magic;
   a slot of the same time gets last = pos); a BLANK ends a file, an invalid unit ends the log. The
   offset reached is the process offset (the log is cut there by a writable broker).
3. `reviseQueueOffset`: the last unit's record gives the queue offset of `rmq_sys_wheel_timer`, checked
   against the consume queue (up to 20,000 units back); next = that + 1 (or the checkpoint's
   `lastTimerQueueOffset` when it cannot be read), at most `masterTimerQueueOffset`, within the queue's
   min/max.
4. `currReadTimeMs = max(lastReadTimeMs, now - (slotsTotal - 60) x precision)`.
5. `TimerWheel.checkPhyPos`: the least first_pos of a live slot whose last_pos is past the process
   offset; if any, `recoverAndRevise(minFirst, checkTimerLog=false)` up to the process offset.

The commit log and the consume queue reach this module as callables (`read_message`, `cq_unit`,
`cq_bounds`), so the timer package needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from store.mappedfile.mapped_file_queue import MappedFileQueue
from store.timer.codec import (BLANK_MAGIC, SLOTS_TOTAL, TIMER_BLANK_SLOTS, UNIT_DTYPE, UNIT_SIZE,
                               UNIT_PRE_SIZE_FOR_MSG, WHEEL_SLOTS, TimerCheckpointFields, WheelSlot,
                               is_magic_ok_array, slot_index)

REVISE_QUEUE_OFFSET_MAX_STEPS = 20000      # reviseQueueOffset's maxCount

ReadMessage = Callable[[int, int], "tuple[int, int] | None"]     # (offset_py, size_py) -> (queue_id, queue_offset)
CqUnit = Callable[[int, int], "tuple[int, int] | None"]          # (queue_id, queue_offset) -> (phy_offset, size)
CqBounds = Callable[[int], "tuple[int, int] | None"]             # queue_id -> (min, max) queue offsets


@dataclass
class TimerRecoveryState:
    """What `recover()` leaves in memory (names as in `TimerMessageStore`)."""

    begin_offset: int
    process_offset: int
    timer_log_files_after: int
    curr_queue_offset: int
    curr_read_time_ms: int
    recheck_from: int | None
    slots: dict[int, WheelSlot] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)

    @property
    def commit_read_time_ms(self) -> int:
        return self.curr_read_time_ms

    @property
    def commit_queue_offset(self) -> int:
        return self.curr_queue_offset


def _revise(slots: dict[int, WheelSlot], due_ms: int, pos: int, precision_ms: int) -> None:
    """`TimerWheel.reviseSlot(due_ms, IGNORE, pos, force=true)`."""
    index = slot_index(due_ms, precision_ms)
    old = slots.get(index)
    time_raw = due_ms // precision_ms
    if old is None or old.time_raw != time_raw:
        # putSlot(timeMs, firstPos, lastPos) writes three longs: num and magic stay as they were.
        num, magic = (old.num, old.magic) if old is not None else (0, 0)
        slots[index] = WheelSlot(index, time_raw, time_raw * precision_ms, pos, pos, num, magic)
    else:
        slots[index] = WheelSlot(index, time_raw, old.time_ms, old.first_pos, pos, old.num,
                                 old.magic)


def revise_many(slots: dict[int, WheelSlot], due_ms: np.ndarray, pos: np.ndarray,
                precision_ms: int) -> None:
    """`_revise` for each (due_ms[k], pos[k]) in order, vectorized: per slot index the last unit
    wins; first_pos is where the final run of units of that unit's time starts (or the slot's own
    first_pos when the run reaches back to a slot already holding that time)."""
    if len(due_ms) == 0:
        return
    time_raw = due_ms // precision_ms
    index = time_raw % WHEEL_SLOTS
    order = np.argsort(index, kind="stable")
    index, time_raw, pos = index[order], time_raw[order], pos[order]
    count = len(index)
    group_start = np.ones(count, dtype=bool)
    group_start[1:] = index[1:] != index[:-1]
    run_start = group_start.copy()
    run_start[1:] |= time_raw[1:] != time_raw[:-1]
    run_first = np.maximum.accumulate(np.where(run_start, np.arange(count), 0))
    group_first = np.maximum.accumulate(np.where(group_start, np.arange(count), 0))
    ends = np.flatnonzero(np.append(group_start[1:], True))
    for e in ends.tolist():
        i, t = int(index[e]), int(time_raw[e])
        old = slots.get(i)
        first_k = int(run_first[e])
        if first_k == int(group_first[e]) and old is not None and old.time_raw == t:
            first = old.first_pos
        else:
            first = int(pos[first_k])
        num, magic = (old.num, old.magic) if old is not None else (0, 0)
        slots[i] = WheelSlot(i, t, t * precision_ms, first, int(pos[e]), num, magic)


def recover_and_revise(queue: MappedFileQueue, slots: dict[int, WheelSlot], begin_offset: int,
                       precision_ms: int, *, check: bool, limit_offset: int | None = None) -> int:
    """`recoverAndRevise`: revise `slots` in place; returns the offset the walk reached."""
    files = list(queue.files)
    if not files:
        return 0
    index = len(files) - 1
    while index >= 0 and begin_offset < files[index].file_from_offset:
        index -= 1
    index = max(index, 0)
    check_offset = files[index].file_from_offset
    per_file = queue.file_size_bytes // UNIT_SIZE
    for mapped in files[index:]:
        limit = queue.file_size_bytes
        if not check and limit_offset is not None:
            limit = max(0, min(limit, limit_offset - mapped.file_from_offset))
        rows = np.frombuffer(mapped.buffer, dtype=UNIT_DTYPE, count=per_file)
        count = min(per_file, -(-limit // UNIT_SIZE))
        rows = rows[:count]
        usable = (rows["size"] == UNIT_SIZE) & is_magic_ok_array(rows["magic"])
        blanks = np.flatnonzero(rows["magic"] == BLANK_MAGIC)
        stop_check = False
        end = count
        if check:
            bad = np.flatnonzero(~usable)
            if len(bad):
                end = int(bad[0])
                stop_check = not (len(blanks) and int(blanks[0]) == end)
        elif len(blanks):
            end = int(blanks[0])
        due = rows["curr_write_time_ms"][:end].astype(np.int64) + rows["delay_ms"][:end]
        take = np.flatnonzero(usable[:end])
        revise_many(slots, due[take], mapped.file_from_offset + take.astype(np.int64) * UNIT_SIZE,
                    precision_ms)
        position = end * UNIT_SIZE
        if end == count and count == per_file:
            position = _past_last_unit(mapped, per_file, queue.file_size_bytes, check)
            stop_check = stop_check or position < 0
            position = abs(position)
        check_offset = mapped.file_from_offset + position
        if stop_check:
            break
    return check_offset


def _past_last_unit(mapped, per_file: int, file_size_bytes: int, check: bool) -> int:
    """Where the Java walk ends in a file whose every unit slot was usable: a BLANK in the tail
    ends the file there; a tail of under 16 bytes (a header read overruns) stops the walk (< 0)."""
    position = per_file * UNIT_SIZE
    if position == file_size_bytes:
        return position
    if position + 16 > file_size_bytes:
        return -position
    magic = int.from_bytes(mapped.buffer[position + 12:position + 16], "big", signed=True)
    return position if magic == BLANK_MAGIC or not check else -position


def check_phy_pos(slots: dict[int, WheelSlot], time_start_ms: int, max_offset: int,
                  precision_ms: int) -> int | None:
    """`TimerWheel.checkPhyPos`: least first_pos of a slot live from `time_start_ms` on (its stored
    time is the one the wheel expects there) whose last_pos is past `max_offset`; None if none."""
    first_index = slot_index(time_start_ms, precision_ms)
    least = None
    for index, slot in slots.items():
        step = (index - first_index) % WHEEL_SLOTS
        if (time_start_ms + step * precision_ms) // precision_ms != slot.time_raw:
            continue
        if slot.last_pos > max_offset and (least is None or slot.first_pos < least):
            least = slot.first_pos
    return least


def revise_queue_offset(queue: MappedFileQueue, process_offset: int, read_message: ReadMessage,
                        cq_unit: CqUnit) -> int:
    """`reviseQueueOffset`: the queue offset of the record the unit before `process_offset` points
    to, confirmed in the consume queue; -1 when that record cannot be read."""
    at = process_offset - (UNIT_SIZE - UNIT_PRE_SIZE_FOR_MSG)
    mapped = queue.find_file(at) if at >= 0 else None
    if mapped is None:
        return -1
    position = at - mapped.file_from_offset
    if position + 12 > (process_offset - mapped.file_from_offset):
        return -1
    offset_py = int.from_bytes(mapped.buffer[position:position + 8], "big", signed=True)
    size_py = int.from_bytes(mapped.buffer[position + 8:position + 12], "big", signed=True)
    found = read_message(offset_py, size_py)
    if found is None:
        return -1
    queue_id, msg_queue_offset = found
    probe = msg_queue_offset
    for _ in range(REVISE_QUEUE_OFFSET_MAX_STEPS):
        if probe < 0:
            break
        unit = cq_unit(queue_id, probe)
        if unit is not None and unit == (offset_py, size_py):
            return probe
        probe -= 1
    return msg_queue_offset


def recover(queue: MappedFileQueue, wheel_slots: dict[int, WheelSlot],
            checkpoint: TimerCheckpointFields, precision_ms: int, now_ms: int, *,
            read_message: ReadMessage, cq_unit: CqUnit, cq_bounds: CqBounds) -> TimerRecoveryState:
    """Replay `TimerMessageStore.recover()`; `wheel_slots` is not changed (the result holds a copy)."""
    slots = dict(wheel_slots)
    files = list(queue.files)
    begin = checkpoint.last_timer_log_flush_pos - (queue.file_size_bytes if files else 0)
    begin = max(begin, 0)
    process_offset = recover_and_revise(queue, slots, begin, precision_ms, check=True)
    steps = [f"timer log checked from {begin}: ends at {process_offset}"]
    kept = sum(1 for f in files if f.file_from_offset <= process_offset)
    if kept < len(files):
        steps.append(f"{len(files) - kept} timer-log file(s) after {process_offset} would be deleted")
    queue_offset = revise_queue_offset(queue, process_offset, read_message, cq_unit)
    curr_queue_offset = checkpoint.last_timer_queue_offset if queue_offset == -1 else queue_offset + 1
    curr_queue_offset = min(curr_queue_offset, checkpoint.master_timer_queue_offset)
    bounds = cq_bounds(0)
    if bounds is not None:
        curr_queue_offset = min(max(curr_queue_offset, bounds[0]), bounds[1])
    read_floor = now_ms // precision_ms * precision_ms - (SLOTS_TOTAL - TIMER_BLANK_SLOTS) * precision_ms
    curr_read_time_ms = max(checkpoint.last_read_time_ms, read_floor)
    if curr_read_time_ms != checkpoint.last_read_time_ms:
        steps.append(f"read time moved from {checkpoint.last_read_time_ms} to {curr_read_time_ms}: "
                     f"the wheel only reaches back {SLOTS_TOTAL - TIMER_BLANK_SLOTS} slots")
    min_first = check_phy_pos(slots, curr_read_time_ms, process_offset, precision_ms)
    if min_first is not None and min_first < process_offset:
        recover_and_revise(queue, slots, min_first, precision_ms, check=False,
                           limit_offset=process_offset)
        steps.append(f"wheel slots point past the timer log's end {process_offset}: revised again "
                     f"from {min_first}")
    return TimerRecoveryState(begin, process_offset, kept, curr_queue_offset, curr_read_time_ms,
                              min_first, slots, steps)
