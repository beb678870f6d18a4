"""Delivery of delay-level messages: RocketMQ 4.9.7's `ScheduleMessageService` (store format 4.9 only).

The put path (spec §2.9, `CommitLog.asyncPutMessage`) stores a message with `DELAY` = level in
`SCHEDULE_TOPIC_XXXX` queue `level - 1`, with `REAL_TOPIC` / `REAL_QID` naming its destination, and its
consume-queue tagsCode is the delivery time (`computeDeliverTimestamp`: store time + the level's delay).
This service walks each level's queue from the level's offset (`DeliverDelayedMessageTimerTask`):

* a unit whose delivery time is due (`correctDeliverTimestamp`: a time further away than now + the
  level's delay counts as now) is read back from the commit log and rewritten (`messageTimeup`): the
  real topic and queue, the same body, flag, sysFlag, born time and host, *store host of the delayed
  record* and reconsume times, the tagsCode recomputed from TAGS, and a properties string serialized
  from the record's properties **before** `DELAY` is cleared (RocketMQ sets `propertiesString` first,
  so the delivered record keeps `DELAY`, `REAL_TOPIC` and `REAL_QID`); it is put without waiting for a
  flush (`setWaitStoreMsgOK(false)`), and only after PUT_OK does the level's offset become
  unit + 1 (`syncDeliver` -> `updateOffset`);
* the first unit not yet due stops the level until the next pass (`DELAY_FOR_A_WHILE` = 100 ms);
* a unit whose record cannot be read is skipped without moving the stored offset (`lookMessageByOffset`
  null -> `continue`); so is one whose real topic is `RMQ_SYS_TRANS_HALF_TOPIC`;
* a record whose REAL_TOPIC / REAL_QID cannot be used, or a put that is refused, keeps the level at
  that unit and is retried on the next pass (RocketMQ reschedules the same offset); `last_error` says why.

Offsets live in `config/delayOffset.json` (`store.meta.delay_offset`): loaded at open and clamped to
each queue's [min, max] (`correctDelayOffset`), persisted every `flushDelayOffsetInterval` (first after
10 s) and at shutdown. A crash therefore re-delivers what was delivered since the last persist, as
RocketMQ does; nothing is lost.

5.x: RocketMQ 5 moved this service to the broker (`broker/.../schedule/ScheduleMessageService`); its
`HookUtils.handleScheduleMessage` still sends every delay level to `SCHEDULE_TOPIC_XXXX` (timer wheel on
or off), and the broker, not the store, delivers them and writes delayOffset.json with a dataVersion.
A 5.x-format store hosted here is a store without its broker, so nothing here delivers for it (the
inspection API still shows its pending levels).
"""

from __future__ import annotations

import logging
import threading
import time

from store.api import Message
from store.codec import message as msgcodec
from store.codec.javahash import tags_code as compute_tags_code
from store.codec.properties import encode_properties
from store.commitlog.commit_log import RecordDraft, RecordTooLargeForSegment
from store.commitlog.put_path import parse_delay_levels
from store.errors import CorruptDataError, StoreError
from store.services.service_thread import ServiceThread
from store.meta.delay_offset import DelayOffsetTable

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = msgcodec.SCHEDULE_TOPIC
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
FIRST_DELAY_MS = 1000             # ScheduleMessageService.FIRST_DELAY_TIME
DELAY_FOR_A_WHILE_MS = 100        # between passes of a level
DELAY_FOR_A_PERIOD_MS = 10_000    # after a pass that failed unexpectedly
FIRST_PERSIST_MS = 10_000         # scheduleAtFixedRate(persist, 10000, flushDelayOffsetInterval)
MAX_UNITS_PER_PASS = 10_000       # bound of one level's pass (the next pass continues)
UNITS_PER_READ = 256
_EXT_ADDRESS_MAX = -(1 << 31) - 1  # tagsCodes at or below this are ConsumeQueueExt addresses
# What RocketMQ's messageTimeup sets on the inner message: do not wait for the flush.
NO_WAIT = (Message(SCHEDULE_TOPIC, b"", properties={"WAIT": "false"}),)


def level_queue_id(level: int) -> int:
    """`delayLevel2QueueId`: level 1 is queue 0."""
    return level - 1


def _java_parse_int(text: str | None) -> int | None:
    """`Integer.parseInt`, or None where Java throws."""
    if text is None:
        return None
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text)
    return value if -(1 << 31) <= value < (1 << 31) else None


class DeliveryRefused(Exception):
    """A due message that cannot be delivered now; the level stays at it (RocketMQ retries)."""


def build_delivery(record) -> tuple[bytearray, RecordDraft] | None:
    """`messageTimeup`: the record to put for a due SCHEDULE_TOPIC_XXXX record, or None when RocketMQ
    discards it (a real topic of RMQ_SYS_TRANS_HALF_TOPIC). Raises DeliveryRefused when the record's
    REAL_TOPIC / REAL_QID cannot be used or the new record does not encode."""
    properties = dict(record.properties)
    topic = properties.get("REAL_TOPIC")
    queue_id = _java_parse_int(properties.get("REAL_QID"))
    if topic is None or queue_id is None:
        raise DeliveryRefused(f"REAL_TOPIC {topic!r} / REAL_QID {properties.get('REAL_QID')!r} "
                              f"of the record at {record.commit_log_offset} cannot be used")
    if topic == TRANS_HALF_TOPIC:
        return None
    if not 0 <= queue_id <= 65535:
        raise DeliveryRefused(f"REAL_QID {queue_id} of the record at {record.commit_log_offset} "
                              f"is outside 0..65535")
    # The properties string is made before DELAY is cleared (see the module docstring), from the
    # decoded map: a default HashMap filled in the stored order.
    properties_raw = encode_properties(properties, style="4.9", capacity=16)
    try:
        encoded = msgcodec.encode_message(
            topic=topic, queue_id=queue_id, body=record.body, properties_raw=properties_raw,
            flag=record.flag, sys_flag=record.sys_flag, born_timestamp=record.born_timestamp,
            born_host=record.born_host, store_timestamp=0, store_host=record.store_host,
            reconsume_times=record.reconsume_times)
    except ValueError as error:
        raise DeliveryRefused(f"the record at {record.commit_log_offset} does not re-encode: "
                              f"{error}") from None
    properties.pop("DELAY", None)   # clearProperty(DELAY): the dispatchers' map has no DELAY
    sys_flag = int.from_bytes(encoded[msgcodec.SYSFLAG_POSITION:msgcodec.SYSFLAG_POSITION + 4],
                              "big", signed=True)
    draft = RecordDraft(topic, queue_id, sys_flag, compute_tags_code(properties.get("TAGS")),
                        properties.get("KEYS", ""), properties.get("UNIQ_KEY"), 0, properties, -1,
                        msgcodec.store_timestamp_position(sys_flag))
    return encoded, draft


class ScheduleMessageService(ServiceThread):
    """One delivery walk per delay level over `SCHEDULE_TOPIC_XXXX`; see the module docstring.

    Built from parts, never the facade: `commit_log`, `consume_queues`, the `DelayOffsetTable`, the
    level delays, a clock (`clock_ms`, injectable for tests), `after_append(appended, messages)` (the
    services' acknowledgement: wakes commit/flush) and `may_put()` (False while puts are refused).
    `deliver_due()` runs one pass in the caller's thread; `start()` runs passes on a thread.
    """

    def __init__(self, *, commit_log, consume_queues, offsets, delay_levels_ms, clock_ms,
                 after_append, may_put, persist_interval_ms: int):
        super().__init__()
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.offsets = offsets
        self.delay_levels_ms = tuple(delay_levels_ms)
        self.clock_ms = clock_ms
        self._after_append = after_append
        self._may_put = may_put
        self.persist_interval_ms = persist_interval_ms
        self.cursors: dict[int, int] = {}       # each level's task offset (DeliverDelayedMessageTimerTask)
        self.last_error: dict[int, str] = {}
        self.delivered_messages = 0
        self._dirty = False
        self._pass_lock = threading.Lock()
        self.started = False

    @property
    def max_delay_level(self) -> int:
        return len(self.delay_levels_ms)

    # -- load ------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read delayOffset.json and clamp each level's offset to its queue (`correctDelayOffset`)."""
        self.offsets.load()
        for level in range(1, self.max_delay_level + 1):
            offset = self.offsets.get(level)
            queue_id = level_queue_id(level)
            if offset is not None:   # findConsumeQueue creates a missing queue: [0, 0]
                low = self.consume_queues.get_min_offset(SCHEDULE_TOPIC, queue_id)
                high = self.consume_queues.get_max_offset(SCHEDULE_TOPIC, queue_id)
                corrected = low if offset < low else high if offset > high else offset
                if corrected != offset:
                    log.error("delay level %d: offset %d outside [%d, %d], corrected to %d",
                              level, offset, low, high, corrected)
                    self.offsets.set(level, corrected)
                    self._dirty = True
                    offset = corrected
            self.cursors[level] = 0 if offset is None else offset

    # -- delivery --------------------------------------------------------------------------------

    def deliver_due(self) -> int:
        """One pass over every level: deliver what is due; returns the messages delivered."""
        with self._pass_lock:
            return sum(self._deliver_level(level) for level in range(1, self.max_delay_level + 1))

    def _deliver_level(self, level: int) -> int:
        queue_id = level_queue_id(level)
        delay_ms = self.delay_levels_ms[level - 1]
        cursor = self.cursors.get(level, 0)
        delivered = 0
        handled = 0
        batch = 1      # a level that is not due costs one unit read; a due one reads on in batches
        while handled < MAX_UNITS_PER_PASS and not self._stop.is_set():
            units = self.consume_queues.get_units(SCHEDULE_TOPIC, queue_id, cursor, batch)
            batch = UNITS_PER_READ
            if units is None or len(units) == 0:
                cursor = self._reset_offset(queue_id, cursor)
                break
            stop = False
            for phy_offset, size, tags_code in units[["phy_offset", "size", "tags_code"]].tolist():
                if tags_code <= _EXT_ADDRESS_MAX:       # an ext address: recompute from the record
                    tags_code = self.commit_log.store_timestamp_at(phy_offset, size) + delay_ms
                now_ms = self.clock_ms()
                deliver_ms = now_ms if tags_code > now_ms + delay_ms else tags_code
                if deliver_ms - now_ms > 0:
                    stop = True
                    break
                outcome = self._deliver_one(level, cursor, phy_offset, size)
                if outcome is None:                     # refused: retry this unit next pass
                    stop = True
                    break
                cursor += 1
                handled += 1
                delivered += outcome
            if stop:
                break
        self.cursors[level] = cursor
        return delivered

    def _reset_offset(self, queue_id: int, cursor: int) -> int:
        """No unit at `cursor`: below the queue's minimum -> the minimum, past its end -> the end."""
        low = self.consume_queues.get_min_offset(SCHEDULE_TOPIC, queue_id)
        high = self.consume_queues.get_max_offset(SCHEDULE_TOPIC, queue_id)
        if cursor < low:
            log.error("schedule queue %d: offset %d below its minimum %d", queue_id, cursor, low)
            return low
        if cursor > high:
            log.error("schedule queue %d: offset %d past its end %d", queue_id, cursor, high)
            return high
        return cursor

    def _deliver_one(self, level: int, queue_offset: int, phy_offset: int, size: int) -> int | None:
        """1 when delivered, 0 when skipped as RocketMQ skips it, None when the level must wait."""
        raw = self.commit_log.read(phy_offset, size)
        if raw is None:
            return 0
        try:
            record = msgcodec.decode_message(raw, 0)
        except CorruptDataError:
            return 0
        try:
            built = build_delivery(record)
        except DeliveryRefused as refusal:
            self._refuse(level, str(refusal))
            return None
        if built is None:
            log.error("delay level %d: the real topic of the record at %d is %s; discarded",
                      level, phy_offset, TRANS_HALF_TOPIC)
            return 0
        if not self._may_put():
            self._refuse(level, "puts are refused (disk full or a slave)")
            return None
        encoded, draft = built
        try:
            appended = self.commit_log.append_one(encoded, draft)
        except RecordTooLargeForSegment as error:
            self._refuse(level, f"the record at {phy_offset} does not fit a segment: {error}")
            return None
        self._after_append(appended, NO_WAIT)
        self.offsets.set(level, queue_offset + 1)
        self._dirty = True
        self.last_error.pop(level, None)
        self.delivered_messages += 1
        return 1

    def _refuse(self, level: int, reason: str) -> None:
        if self.last_error.get(level) != reason:
            log.error("delay level %d: %s", level, reason)
        self.last_error[level] = reason

    # -- persistence and thread ------------------------------------------------------------------

    def persist(self) -> None:
        self.offsets.persist()
        self._dirty = False

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        self._start_thread(self._run, "ScheduleMessageService")

    def _run(self) -> None:
        next_persist = time.monotonic() + FIRST_PERSIST_MS / 1000.0
        if self._stop.wait(FIRST_DELAY_MS / 1000.0):
            return
        while not self._stop.is_set():
            pause_ms = DELAY_FOR_A_WHILE_MS
            try:
                self.deliver_due()
            except (StoreError, OSError, ValueError):
                log.exception("delivering delayed messages failed")
                pause_ms = DELAY_FOR_A_PERIOD_MS
            if time.monotonic() >= next_persist:
                try:
                    self.persist()
                except OSError:
                    log.exception("persisting delayOffset.json failed")
                next_persist = time.monotonic() + self.persist_interval_ms / 1000.0
            self._stop.wait(pause_ms / 1000.0)

    def shutdown(self) -> None:
        """Stop the walk and persist the offsets (RocketMQ persists when the service ran)."""
        self._join()
        if self.started or self._dirty:
            self.persist()
        self.started = False

    def stop_quietly(self) -> None:
        """Stop the walk without persisting (a simulated crash)."""
        self._join()
        self.started = False


def build_schedule_service(parts, *, after_append, may_put) -> ScheduleMessageService | None:
    """The service for a writable 4.9-format store (None otherwise: read-only opens deliver nothing,
    and 5.x leaves delivery to its broker; see the module docstring)."""
    if parts.read_only or parts.style != "4.9":
        return None
    config = parts.config
    return ScheduleMessageService(
        commit_log=parts.commit_log, consume_queues=parts.consume_queues,
        offsets=DelayOffsetTable(config.config_dir, read_only=False),
        delay_levels_ms=parse_delay_levels(config.message_delay_level),
        clock_ms=parts.commit_log.clock_ms, after_append=after_append, may_put=may_put,
        persist_interval_ms=config.flush_delay_offset_interval)
