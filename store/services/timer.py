"""Hosting timer messages: RocketMQ 5.3.3's `TimerMessageStore` (`store/timer/TimerMessageStore.java`)
for a writable 5.x store with `timerWheelEnable`, as a master runs it.

The put hook (`store.timer.hook`) stores a timer message in `rmq_sys_wheel_timer` queue 0 with
`TIMER_OUT_MS`, `REAL_TOPIC` and `REAL_QID`. This service then does, with RocketMQ's rules:

* **load** (`recover()`, replayed by `store.timer.timer_recovery`): the timer log is cut where its
  last valid unit ends, the revised slots are written into the wheel's copy, the queue offset and
  the read time are set (`currQueueOffset`, `currReadTimeMs`);
* **enqueue** (`enqueue` + `TimerEnqueuePutService`): the `rmq_sys_wheel_timer` units from the queue
  offset; a timer due before the write time (`currWriteTimeMs`, now rounded down to the precision)
  is delivered at once with `TIMER_ENQUEUE_MS` = Long.MAX_VALUE; any other gets a 52-byte unit
  (`doEnqueue`: prev = the slot's last unit, a ROLL when it is `timerRollWindowSlot` slots or more
  away, DELETE when it carries `TIMER_DEL_UNIQKEY`) and its slot is updated (first, last, num ± 1);
* **dequeue** (`dequeue`): while the read time is before the write time, the slot of the read time
  (empty slots are skipped at once, `moveReadTime`) is walked from its last unit back by prev_pos;
  the timers are delivered oldest first, except those a DELETE unit of the slot cancels
  (`REAL_TOPIC+UNIQ_KEY`), then the read time moves one slot;
* **deliver** (`convert` + `convertMessage` + `doPut`): the record is read back, `TIMER_ENQUEUE_MS`
  (the unit's write time), `TIMER_ROLL_TIMES` for a roll and `TIMER_DEQUEUE_MS` (now) are added,
  the properties string is made from the decoded map (a 128-bucket HashMap) **before** `REAL_TOPIC`
  / `REAL_QID` are cleared (so the stored copy keeps them), and it is put to the real topic and
  queue (a roll back to `rmq_sys_wheel_timer`) with the body, flag, sysFlag, born time and host,
  store host and reconsume times of the timer record, without waiting for a flush;
* **flush** every `timerFlushIntervalMs` (`TimerFlushService`): `prepareTimerCheckPoint`, the timer
  log's flush, the wheel's changed slots, `config/timercheck`, `config/timermetrics`; every 30 s the
  timer-log files whose last unit's record is below the commit log's minimum are deleted;
* **shutdown** (`TimerMessageStore.shutdown`): checkpoint prepared, timer log flushed, timercheck
  flushed; the wheel is *not* flushed (RocketMQ's `timerWheel.shutdown(false)`): recovery revises it
  from the timer log.

Differences: a delivery refused for a retryable reason (disk full) keeps the read time at that slot
(RocketMQ drops it after 3 tries unless `timerEnableRetryUntilSuccess`); a timer record whose
REAL_TOPIC / REAL_QID cannot be used is logged and skipped (RocketMQ's thread stalls on it). Not
done: the metrics revision pass, slave enqueue. One thread does enqueue, dequeue and flush in turn;
`run_once()` runs one round in the caller's thread.
"""

from __future__ import annotations

import logging
import threading

from store.api import Message, PutMessageStatus
from store.codec import message as msgcodec
from store.codec.javahash import java_string_hash
from store.codec.javahash import tags_code as compute_tags_code
from store.commitlog.commit_log import RecordDraft, RecordTooLargeForSegment
from store.errors import CorruptDataError, StoreError
from store.services.service_thread import ServiceThread
from store.meta.timer_metrics import TimerMetricsFile
from store.timer import hook
from store.timer.codec import (MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL, SLOTS_TOTAL,
                               TIMER_BLANK_SLOTS, TIMER_TOPIC, UNIT_SIZE, pack_unit)
from store.timer.timer_recovery import recover
from store.timer.timer_writer import TimercheckFile, TimerLogWriter, WheelFile

log = logging.getLogger(__name__)

NEVER_ENQUEUED_MS = (1 << 63) - 1          # TIMER_ENQUEUE_MS of a timer delivered at enqueue
UNITS_PER_ENQUEUE = 256                    # consume-queue units read per enqueue round
MAX_SLOTS_PER_ROUND = 64                   # slots one dequeue round may deliver (a bound)
EXPIRE_INTERVAL_MS = 30_000                # deleteExpiredFileByOffsetForTimerLog's period
NO_WAIT = (Message(TIMER_TOPIC, b"", properties={"WAIT": "false"}),)


class _Retry(Exception):
    """A put refused for a reason that passes (disk full): the caller stops and retries later."""


class TimerService(ServiceThread):
    """See the module docstring. Built from parts: the commit log, the consume queues, the config,
    a clock (`clock_ms`, injectable), `after_append(appended, messages)` and `may_put()`."""

    def __init__(self, *, config, commit_log, consume_queues, clock_ms, after_append, may_put):
        super().__init__()
        self.config = config
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.clock_ms = clock_ms
        self._after_append = after_append
        self._may_put = may_put
        self.precision_ms = config.timer_precision_ms
        roll = config.timer_roll_window_slot
        self.roll_window_slots = roll if 2 <= roll <= SLOTS_TOTAL - TIMER_BLANK_SLOTS \
            else SLOTS_TOTAL - TIMER_BLANK_SLOTS
        self.wheel: WheelFile | None = None
        self.timer_log: TimerLogWriter | None = None
        self.checkpoint: TimercheckFile | None = None
        self.metrics = TimerMetricsFile(config.config_dir, clock_ms)
        self.curr_read_time_ms = self.commit_read_time_ms = 0
        self.curr_write_time_ms = 0
        self.curr_queue_offset = self.commit_queue_offset = 0
        self._last_commit = (None, None)
        self.recovery = None
        self.delivered_messages = self.enqueued_units = 0
        self.last_error: str | None = None
        self._lock = threading.RLock()
        self._next_flush_ms = self._next_expire_ms = 0
        self.started = False
        # RocketMQ's shouldRunningDequeue: set once this store delivers (started, or a round run in
        # the caller's thread); a store only loaded and closed checkpoints as a loaded one does.
        self.dequeue_ran = False

    # -- load and recovery -----------------------------------------------------------------------

    def load(self) -> None:
        """Open the files and recover (`TimerMessageStore.load`); dispatch must have caught up."""
        root = self.config.store_path_root_dir
        self.wheel = WheelFile(root, self.precision_ms)
        self.timer_log = TimerLogWriter(root, self.config.mapped_file_size_timer_log)
        self.checkpoint = TimercheckFile(root)
        self.metrics.load()
        state = recover(self.timer_log.queue, self.wheel.non_empty(), self.checkpoint.fields,
                        self.precision_ms, self.clock_ms(), read_message=self._queue_offset_of,
                        cq_unit=self._cq_unit, cq_bounds=self._cq_bounds)
        self.timer_log.truncate(state.process_offset)
        self.wheel.set_slots(state.slots)
        self.curr_queue_offset = self.commit_queue_offset = state.curr_queue_offset
        self.curr_read_time_ms = self.commit_read_time_ms = state.curr_read_time_ms
        self.recovery, self._next_expire_ms = state, self.clock_ms() + EXPIRE_INTERVAL_MS   # 30 s
        self.prepare_checkpoint(running_dequeue=False)

    def _queue_offset_of(self, offset_py: int, size_py: int):
        record = self._read(offset_py, size_py)
        return None if record is None else (record.queue_id, record.queue_offset)

    def _cq_unit(self, queue_id: int, queue_offset: int):
        unit = self.consume_queues.get_unit(TIMER_TOPIC, queue_id, queue_offset)
        return None if unit is None else (unit.phy_offset, unit.size)

    def _cq_bounds(self, queue_id: int):
        return (self.consume_queues.get_min_offset(TIMER_TOPIC, queue_id),
                self.consume_queues.get_max_offset(TIMER_TOPIC, queue_id))

    def _read(self, offset_py: int, size_py: int):
        """`getMessageByCommitOffset`: the decoded record, None when unreadable."""
        if offset_py < 0 or size_py <= 0:
            return None
        raw = self.commit_log.read(offset_py, size_py)
        if raw is None:
            return None
        try:
            return msgcodec.decode_message(raw, 0)
        except CorruptDataError:
            return None

    def slot_num(self, time_ms: int) -> int:
        """The put hook's `isReject` count."""
        wheel = self.wheel
        return 0 if wheel is None else wheel.slot_num(time_ms)

    # -- enqueue ---------------------------------------------------------------------------------

    def _format_time(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    def maybe_move_write_time(self) -> None:
        now = self._format_time(self.clock_ms())
        if self.curr_write_time_ms < now:
            self.curr_write_time_ms = now

    def enqueue_once(self, max_units: int = UNITS_PER_ENQUEUE) -> int:
        """One enqueue round: the number of queue units handled."""
        if self.config.timer_stop_enqueue:
            return 0
        with self._lock:
            self.maybe_move_write_time()
            low = self.consume_queues.get_min_offset(TIMER_TOPIC, 0)
            if self.curr_queue_offset < low:
                log.warning("timer queue offset %d below the queue's minimum %d",
                            self.curr_queue_offset, low)
                self.curr_queue_offset = low
            units = self.consume_queues.get_units(TIMER_TOPIC, 0, self.curr_queue_offset, max_units)
            handled = 0
            try:
                for phy_offset, size in ([] if units is None else
                                         units[["phy_offset", "size"]].tolist()):
                    self._enqueue_unit(phy_offset, size)
                    self.curr_queue_offset += 1
                    handled += 1
            except _Retry:
                pass
            self.commit_queue_offset = self.curr_queue_offset
            self.maybe_move_write_time()
            return handled

    def _enqueue_unit(self, offset_py: int, size_py: int) -> None:
        record = self._read(offset_py, size_py)
        if record is None:
            return                                       # enqueue_get_miss: skipped
        text = record.properties.get(hook.TIMER_OUT_MS)
        delayed_ms = hook.java_parse_long(text) if text is not None else None
        if delayed_ms is None:
            self._error(f"the {TIMER_TOPIC} record at {offset_py} has TIMER_OUT_MS {text!r}")
            raise _Retry()                               # RocketMQ stays at this unit too
        if delayed_ms < self.curr_write_time_ms:
            self._deliver(record, NEVER_ENQUEUED_MS, roll=False)
        else:
            self._do_enqueue(offset_py, size_py, delayed_ms, record)

    def _do_enqueue(self, offset_py: int, size_py: int, delayed_ms: int, record) -> None:
        """`doEnqueue`: one unit appended, its slot updated."""
        write_ms = self.curr_write_time_ms
        window_ms = self.roll_window_slots * self.precision_ms
        magic = MAGIC_DEFAULT
        if delayed_ms - write_ms >= window_ms:
            magic |= MAGIC_ROLL
            if delayed_ms - write_ms - window_ms < self.roll_window_slots // 3 * self.precision_ms:
                delayed_ms = write_ms + self.roll_window_slots // 2 * self.precision_ms
            else:
                delayed_ms = write_ms + window_ms
        is_delete = hook.TIMER_DEL_UNIQKEY in record.properties
        if is_delete:
            magic |= MAGIC_DELETE
        real_topic = record.properties.get("REAL_TOPIC")
        slot = self.wheel.get_slot(delayed_ms) or (-1, -1, 0, 0)
        delay = (delayed_ms - write_ms + (1 << 31)) % (1 << 32) - (1 << 31)   # Java (int) cast
        unit = pack_unit(prev_pos=slot[1], magic=magic, curr_write_time_ms=write_ms, delay_ms=delay,
                         offset_py=offset_py, size_py=size_py,
                         topic_hash=0 if real_topic is None else java_string_hash(real_topic))
        pos = self.timer_log.append(unit)
        self.wheel.put_slot(delayed_ms, pos if slot[0] == -1 else slot[0], pos,
                            slot[2] - 1 if is_delete else slot[2] + 1, slot[3])
        self.metrics.add(real_topic, -1 if is_delete else 1)
        self.enqueued_units += 1

    # -- dequeue ---------------------------------------------------------------------------------

    def dequeue_once(self, max_slots: int = MAX_SLOTS_PER_ROUND) -> int:
        """Deliver the due slots (at most `max_slots` non-empty ones); returns messages delivered."""
        delivered = 0
        if self.config.timer_stop_dequeue:
            return 0
        self.dequeue_ran = True
        with self._lock:
            for _ in range(max_slots):
                if self.curr_read_time_ms >= self.curr_write_time_ms:
                    break
                live = self.wheel.next_live_time(self.curr_read_time_ms, self.curr_write_time_ms)
                if live != self.curr_read_time_ms:
                    self.curr_read_time_ms = self.commit_read_time_ms = live   # moveReadTime x n
                    continue
                try:
                    delivered += self._dequeue_slot(self.curr_read_time_ms)
                except _Retry:
                    break
                self.curr_read_time_ms += self.precision_ms                   # moveReadTime
                self.commit_read_time_ms = self.curr_read_time_ms
        return delivered

    def _dequeue_slot(self, time_ms: int) -> int:
        if not self._may_put():
            self._error("puts are refused (disk full): timers wait")
            raise _Retry()
        slot = self.wheel.get_slot(time_ms)
        units, deletes = [], []
        pos = slot[1] if slot is not None else -1
        bound = self.timer_log.max_offset() // UNIT_SIZE + 1     # a broken chain cannot loop
        while pos != -1 and bound > 0:
            bound -= 1
            unit = self.timer_log.unit_at(pos)
            if unit is None:
                break
            (deletes if unit.is_delete and not unit.is_roll else units).append(unit)
            pos = unit.prev_pos
        if not units and not deletes:
            log.warning("dequeue time %d but read nothing from the timer log", time_ms)
        cancelled = set()
        for unit in deletes:
            record = self._read(unit.offset_py, unit.size_py)
            if record is not None and hook.TIMER_DEL_UNIQKEY in record.properties:
                cancelled.add(record.properties[hook.TIMER_DEL_UNIQKEY])
        delivered = 0
        for unit in reversed(units):                             # oldest first
            record = self._read(unit.offset_py, unit.size_py)
            if record is None:
                continue                                         # dequeue_get_msg_miss
            uniq = record.properties.get("UNIQ_KEY")
            if uniq is not None and f"{record.properties.get('REAL_TOPIC')}+{uniq}" in cancelled:
                continue
            if not unit.is_roll and hook.TIMER_DEL_UNIQKEY in record.properties:
                continue                                         # doPut: PUT_NO_RETRY
            delivered += self._deliver(record, unit.curr_write_time_ms, roll=unit.is_roll)
        return delivered

    # -- delivery --------------------------------------------------------------------------------

    def _deliver(self, record, enqueue_time_ms: int, *, roll: bool) -> int:
        """`convert` + `convertMessage` + `doPut`; 1 when put, 0 when skipped; _Retry to wait."""
        properties = record.properties
        if roll:
            topic, queue_id = record.topic, record.queue_id
        else:
            topic = properties.get("REAL_TOPIC")
            qid = hook.java_parse_long(properties.get("REAL_QID") or "")
            if not topic or qid is None or not 0 <= qid <= 65535:
                self._error(f"the timer record at {record.commit_log_offset} has REAL_TOPIC "
                            f"{topic!r} / REAL_QID {properties.get('REAL_QID')!r}: skipped")
                return 0
            queue_id = qid
        crc = self.config.enabled_append_prop_crc
        properties_raw, properties = hook.delivery_properties(
            properties, enqueue_time_ms=enqueue_time_ms, roll=roll, dequeue_ms=self.clock_ms(),
            prop_crc=crc)
        try:
            encoded = msgcodec.encode_message(
                topic=topic, queue_id=queue_id, body=record.body, properties_raw=properties_raw,
                flag=record.flag, sys_flag=record.sys_flag, born_timestamp=record.born_timestamp,
                born_host=record.born_host, store_timestamp=0, store_host=record.store_host,
                reconsume_times=record.reconsume_times)
        except ValueError as error:
            self._error(f"the timer record at {record.commit_log_offset} does not re-encode: "
                        f"{error}; skipped")
            return 0
        sys_flag = int.from_bytes(encoded[msgcodec.SYSFLAG_POSITION:msgcodec.SYSFLAG_POSITION + 4],
                                  "big", signed=True)
        draft = RecordDraft(topic, queue_id, sys_flag, compute_tags_code(properties.get("TAGS")),
                            properties.get("KEYS", ""), properties.get("UNIQ_KEY"), 0, properties,
                            -1, msgcodec.store_timestamp_position(sys_flag), crc)
        if not self._may_put():
            self._error("puts are refused (disk full): timers wait")
            raise _Retry()
        try:
            appended = self.commit_log.append_one(encoded, draft)
        except RecordTooLargeForSegment as error:
            self._error(f"the timer record at {record.commit_log_offset} does not fit: {error}")
            return 0
        status = self._after_append(appended, NO_WAIT)
        if status is not PutMessageStatus.PUT_OK:
            log.warning("timer delivery acknowledged with %s", status)
        # addMetric(-1), which skips a timer never enqueued (TIMER_ENQUEUE_MS = Long.MAX_VALUE).
        if enqueue_time_ms != NEVER_ENQUEUED_MS and \
                record.properties.get(hook.TIMER_ENQUEUE_MS) != str(NEVER_ENQUEUED_MS):
            self.metrics.add(record.properties.get("REAL_TOPIC"), -1)
        self.delivered_messages += 1
        return 1

    def _error(self, reason: str) -> None:
        if self.last_error != reason:   # once per new reason
            log.error("timer: %s", reason)
            self.last_error = reason

    # -- checkpoint and flush --------------------------------------------------------------------

    def prepare_checkpoint(self, *, running_dequeue: bool | None = None) -> None:
        """`prepareTimerCheckPoint`; `running_dequeue` is RocketMQ's shouldRunningDequeue (false
        during load, `dequeue_ran` after): only then do the master offset and the dataVersion
        (`nextVersion(0)` when the read time or queue offset moved) change."""
        if running_dequeue is None:
            running_dequeue = self.dequeue_ran
        fields = self.checkpoint.fields
        master = fields.master_timer_queue_offset
        version = (fields.state_version, fields.data_version_timestamp, fields.data_version_counter)
        if running_dequeue:
            master = self.commit_queue_offset
            commit = (self.commit_read_time_ms, self.commit_queue_offset)
            if commit != self._last_commit:
                version = (0, self.clock_ms(), fields.data_version_counter + 1)
                self._last_commit = commit
        self.checkpoint.fields = type(fields)(
            self.commit_read_time_ms, self.timer_log.flushed_where,
            min(self.commit_queue_offset, master), master, *version)

    def flush(self) -> None:
        """`TimerFlushService`'s round: checkpoint prepared, timer log, wheel, timercheck, metrics."""
        with self._lock:
            self.prepare_checkpoint()
            self.timer_log.flush()
            self.wheel.flush()
            self.checkpoint.flush()
            self.metrics.persist()

    def run_once(self) -> int:
        """Enqueue what is queued, deliver what is due, flush when the interval has passed;
        returns the messages delivered (callers loop for more)."""
        with self._lock:
            while self.enqueue_once():
                pass
            delivered = self.dequeue_once()
            now_ms = self.clock_ms()
            if now_ms >= self._next_flush_ms:
                self.flush()
                self._next_flush_ms = now_ms + self.config.timer_flush_interval_ms
            if now_ms >= self._next_expire_ms:       # every 30 s, as RocketMQ's scheduler
                self.timer_log.delete_expired(self.commit_log.min_offset())
                self._next_expire_ms = now_ms + EXPIRE_INTERVAL_MS
            return delivered

    # -- thread ----------------------------------------------------------------------------------

    def start(self) -> None:
        if self.started:
            return
        self.started = self.dequeue_ran = True
        self.maybe_move_write_time()
        self._start_thread(self._run, "TimerService")

    def _run(self) -> None:
        idle_s = 100 * self.precision_ms / 1000 / 1000.0       # waitForRunning(100 * precision / 1000)
        while not self._stop.is_set():
            try:
                busy = self.run_once() > 0
            except (StoreError, OSError, ValueError):
                log.exception("timer round failed")
                busy = False
            if not busy:
                self._stop.wait(idle_s)

    def shutdown(self) -> None:
        """`TimerMessageStore.shutdown`: see the module docstring (the wheel is not flushed)."""
        self._join()
        if self.wheel is None:
            return
        with self._lock:
            self.prepare_checkpoint()
            self.timer_log.flush()
            self.checkpoint.flush()
            self.metrics.persist()
            self._close()

    def stop_quietly(self) -> None:
        """Stop without any flush (a simulated crash)."""
        self._join()
        if self.wheel is not None:
            self._close()

    def _close(self) -> None:
        self.wheel.close()
        self.timer_log.close()
        self.checkpoint.close()
        self.wheel = None
        self.started = False


def build_timer_service(parts, *, after_append, may_put) -> TimerService | None:
    """The service of a writable 5.x store with `timerWheelEnable` (None otherwise)."""
    config = parts.config
    if parts.read_only or parts.style != "5.x" or not config.timer_wheel_enable:
        return None
    return TimerService(config=config, commit_log=parts.commit_log,
                        consume_queues=parts.consume_queues, clock_ms=parts.commit_log.clock_ms,
                        after_append=after_append, may_put=may_put)
