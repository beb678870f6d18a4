"""`TimerFiles`: the timer log, the wheel and the timer checkpoint of one store, read together and
never written; `probe_timer_store` says cheaply whether a store has them.

States (`TimerFiles.state`): "absent" (no timer file at all: a 4.9 store, or a 5.x broker with
`timerWheelEnable=false`), "ok", "wheel missing", "wheel empty", "wheel wrong size" (the timer log
and checkpoint are still read). A timer-log file of the wrong size raises CorruptDataError naming it,
as the engine does for any mapped file; `open_timer_files(.., tolerate_errors=True)` records it as
state "timer log unreadable" instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from store.errors import CorruptDataError
from store.timer.codec import TimerCheckpointFields, WheelSlot
from store.timer.timer_log import TimerLogScan, open_timer_log, scan_units, timer_log_dir
from store.timer.timer_recovery import TimerRecoveryState, recover
from store.timer.timer_wheel import (WHEEL_OK, read_timercheck, read_wheel, timercheck_path,
                                     wheel_path)

STATE_ABSENT = "absent"
STATE_OK = "ok"
STATE_LOG_UNREADABLE = "timer log unreadable"


def probe_timer_store(root: str) -> str:
    """"absent", or the wheel's state ("ok", "wheel missing", ...) from file names and sizes only."""
    present = [os.path.isdir(timer_log_dir(root)), os.path.exists(wheel_path(root)),
               os.path.exists(timercheck_path(root))]
    if not any(present):
        return STATE_ABSENT
    from store.timer.codec import WHEEL_FILE_SIZE_BYTES
    if not present[1]:
        return "wheel missing"
    size = os.path.getsize(wheel_path(root))
    return STATE_OK if size == WHEEL_FILE_SIZE_BYTES else ("wheel empty" if size == 0 else
                                                           "wheel wrong size")


@dataclass
class TimerFiles:
    """Everything the timer files hold, decoded (a snapshot: no file stays open)."""

    root: str
    precision_ms: int
    file_size_bytes: int
    state: str
    problems: list[str] = field(default_factory=list)
    wheel_size_bytes: int | None = None
    slots: dict[int, WheelSlot] = field(default_factory=dict)        # as on disk, non-empty
    checkpoint: TimerCheckpointFields | None = None
    checkpoint_size_bytes: int | None = None
    checkpoint_nonzero_tail: int | None = None
    log: TimerLogScan | None = None
    recovery: TimerRecoveryState | None = None

    @property
    def wheel_path(self) -> str:
        return wheel_path(self.root)

    @property
    def timer_log_dir(self) -> str:
        return timer_log_dir(self.root)

    @property
    def timercheck_path(self) -> str:
        return timercheck_path(self.root)


def _no_message(_offset_py: int, _size_py: int):
    return None


def open_timer_files(root: str, *, file_size_bytes: int, precision_ms: int, now_ms: int,
                     read_message=_no_message, cq_unit=lambda q, o: None,
                     cq_bounds=lambda q: None, tolerate_errors: bool = False) -> TimerFiles:
    """Read the three files and replay recovery in memory (see `timer_recovery`)."""
    state = probe_timer_store(root)
    files = TimerFiles(root, precision_ms, file_size_bytes, state)
    if state == STATE_ABSENT:
        return files
    wheel = read_wheel(root, precision_ms)
    files.wheel_size_bytes = wheel.size_bytes
    files.slots = wheel.slots
    if wheel.state != WHEEL_OK:
        files.state = f"wheel {wheel.state}"
        if wheel.state == "wrong size":
            files.problems.append(f"{wheel.path}: {wheel.size_bytes} bytes, expected 38707200: "
                                  f"RocketMQ refuses to start")
        else:
            files.problems.append(f"{wheel.path}: {wheel.state}: RocketMQ starts from an all-zero "
                                  f"wheel that recovery refills only from the last timer-log file")
    check = read_timercheck(root)
    files.checkpoint = check.fields
    files.checkpoint_size_bytes = check.size_bytes
    files.checkpoint_nonzero_tail = check.nonzero_tail_position
    try:
        queue = open_timer_log(root, file_size_bytes)
    except CorruptDataError as exc:
        if not tolerate_errors:
            raise
        files.state = STATE_LOG_UNREADABLE
        files.problems.append(str(exc))
        return files
    try:
        files.log = scan_units(queue)
        files.recovery = recover(queue, files.slots, check.fields, precision_ms, now_ms,
                                 read_message=read_message, cq_unit=cq_unit, cq_bounds=cq_bounds)
    finally:
        queue.close()
    return files


class TimerReader:
    """The timer files of one opened store, read on first use and cached (`refresh()` drops the
    cache). Built by the store's loader for a 5.x store; reads, never writes.

    `read_record(phy_offset) -> bytes | None` is the commit log's record reader and `consume_queues`
    the consume-queue store (`get_unit`, `get_min_offset`, `get_max_offset`, `queues`): recovery
    replays `reviseQueueOffset` through them.
    """

    def __init__(self, root: str, *, file_size_bytes: int, precision_ms: int, read_record,
                 consume_queues, clock_ms):
        self.root = root
        self.file_size_bytes = file_size_bytes
        self.precision_ms = precision_ms
        self._read_record = read_record
        self._consume_queues = consume_queues
        self._clock_ms = clock_ms
        self._files: TimerFiles | None = None
        self._timer_queues: set[int] | None = None

    @classmethod
    def for_store(cls, config, read_record, consume_queues, clock_ms) -> "TimerReader":
        return cls(config.store_path_root_dir, file_size_bytes=config.mapped_file_size_timer_log,
                   precision_ms=config.timer_precision_ms, read_record=read_record,
                   consume_queues=consume_queues, clock_ms=clock_ms)

    @property
    def state(self) -> str:
        """The cheap state (file presence and the wheel's size), without reading the files."""
        return probe_timer_store(self.root) if self._files is None else self._files.state

    def files(self) -> TimerFiles:
        if self._files is None:
            self._timer_queues = None
            self._files = open_timer_files(
                self.root, file_size_bytes=self.file_size_bytes, precision_ms=self.precision_ms,
                now_ms=self._clock_ms(), read_message=self._message_queue_offset,
                cq_unit=self._cq_unit, cq_bounds=self._cq_bounds, tolerate_errors=True)
        return self._files

    def refresh(self) -> None:
        self._files = None

    def _message_queue_offset(self, offset_py: int, size_py: int):
        from store.codec.message import decode_message
        if offset_py < 0 or size_py <= 0:
            return None
        raw = self._read_record(offset_py)
        if raw is None:
            return None
        try:
            record = decode_message(raw)
        except CorruptDataError:
            return None
        return record.queue_id, record.queue_offset

    def _has_timer_queue(self, queue_id: int) -> bool:
        from store.timer.codec import TIMER_TOPIC
        if self._timer_queues is None:       # once per read: recovery may probe 20,000 units
            self._timer_queues = {q for t, q in self._consume_queues.queues() if t == TIMER_TOPIC}
        return queue_id in self._timer_queues

    def _cq_unit(self, queue_id: int, queue_offset: int):
        from store.timer.codec import TIMER_TOPIC
        if not self._has_timer_queue(queue_id):
            return None
        unit = self._consume_queues.get_unit(TIMER_TOPIC, queue_id, queue_offset)
        return None if unit is None else (unit.phy_offset, unit.size)

    def _cq_bounds(self, queue_id: int):
        from store.timer.codec import TIMER_TOPIC
        if not self._has_timer_queue(queue_id):
            return None
        return (self._consume_queues.get_min_offset(TIMER_TOPIC, queue_id),
                self._consume_queues.get_max_offset(TIMER_TOPIC, queue_id))
