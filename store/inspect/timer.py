"""The 5.x timer store through the inspection API: `TimerInspectMixin`, mixed into `StoreInspector`.

| method                                  | returns                                                   |
|-----------------------------------------|-----------------------------------------------------------|
| `timer_state()`                         | dict: state, problems, files, units, recovered pointers   |
| `timer_wheel(after_recovery=False)`     | non-empty `WheelSlot`s (index, time_ms, first_pos, last_pos, num, magic) |
| `timer_chain(slot_time_ms)`             | the `TimerLogUnit`s of that slot, newest first, by prev_pos |
| `timer_checkpoint()`                    | `TimerCheckpointFields` of config/timercheck, or None      |
| `scheduled_messages(state=, topic=, key=, msg_id=, start_ms=, end_ms=)` | `ScheduledMessage`s by due time |

A scheduled message's state (apache/rocketmq#8534: a timer message cannot be queried):

- delivered: a copy with its UNIQ_KEY and a timer property is in a real topic (the timer store's
  delivery, or a put whose deliver time had already passed and was stored unchanged);
- pending: in `rmq_sys_wheel_timer`, not delivered, due after `now_ms`;
- due: not delivered, due at or before `now_ms`, and the timer can still deliver it (its slot is at or
  after the recovered read time, or it is not enqueued yet: enqueue delivers late messages at once);
- orphaned: it never will be delivered as things stand: its unit points past the commit log's end or
  at no wheel record (#10668), no slot chain reaches its unit, or the timer's read time passed its slot
  without a delivered copy;
- cancelled: a delete marker (TIMER_DEL_UNIQKEY, never delivered itself) or the message it deletes
  (only in stores whose producers cancel timer messages).

Everything is read from the files (the timer files once per `timer_refresh()`, the commit log by one
bounded walk per query); nothing is written.
"""

from __future__ import annotations

import time

from store.codec.msgid import decode_message_id
from store.errors import StoreError
from store.inspect.timer_query import STATES, ScheduledList, ScheduledMessage, collect_scheduled
from store.timer.codec import (TIMER_TOPIC, TimerCheckpointFields, TimerLogUnit, WheelSlot,
                               slot_index, unit_from_row)
from store.timer.timer_store import TimerReader

MAX_CHAIN_UNITS = 1_000_000
MAX_RECORDS_FOR_SCHEDULED = 5_000_000


class TimerInspectMixin:
    """Timer views for `StoreInspector` (uses its `config`, `_commit_log`, `_consume_queues`)."""

    def _timer_reader(self) -> TimerReader:
        reader = getattr(self, "_timer_reader_cached", None)
        if reader is None:
            reader = TimerReader.for_store(self.config, self._commit_log.read_record,
                                           self._consume_queues,
                                           lambda: time.time_ns() // 1_000_000)
            self._timer_reader_cached = reader
        return reader

    def _timer_files(self):
        return self._timer_reader().files()

    def timer_refresh(self) -> None:
        """Read the timer files again on the next call (a live broker keeps writing them)."""
        self._timer_reader().refresh()

    def timer_state(self) -> dict:
        files = self._timer_files()
        out = {"state": files.state, "problems": list(files.problems),
               "timer_log_dir": files.timer_log_dir, "wheel_path": files.wheel_path,
               "wheel_size_bytes": files.wheel_size_bytes, "precision_ms": files.precision_ms,
               "wheel_slots_non_empty": len(files.slots)}
        if files.log is not None:
            out.update(timer_log_files=files.log.file_count, timer_log_units=len(files.log.pos),
                       timer_log_end=files.log.end_offset, timer_log_stop=files.log.stop_reason)
        if files.recovery is not None:
            r = files.recovery
            out.update(process_offset=r.process_offset, curr_read_time_ms=r.curr_read_time_ms,
                       curr_queue_offset=r.curr_queue_offset, recovery_steps=list(r.steps))
        return out

    def timer_wheel(self, after_recovery: bool = False) -> list[WheelSlot]:
        """Non-empty slots by index: as stored, or as recovery leaves them in memory."""
        files = self._timer_files()
        slots = files.recovery.slots if after_recovery and files.recovery is not None else files.slots
        return [slots[i] for i in sorted(slots)]

    def timer_checkpoint(self) -> TimerCheckpointFields | None:
        files = self._timer_files()
        return files.checkpoint if files.checkpoint_size_bytes is not None else None

    def timer_chain(self, slot_time_ms: int, max_units: int = MAX_CHAIN_UNITS) -> list[TimerLogUnit]:
        """The units of the slot for `slot_time_ms`, newest first, from its (recovered) last_pos
        back along prev_pos; [] when the slot holds another time. Stops at a position that is no
        unit, at a loop, or after `max_units`."""
        files = self._timer_files()
        if files.log is None:
            return []
        slots = files.recovery.slots if files.recovery is not None else files.slots
        slot = slots.get(slot_index(slot_time_ms, files.precision_ms))
        if slot is None or slot.time_raw != slot_time_ms // files.precision_ms:
            return []
        chain, pos = [], slot.last_pos
        for _ in range(max_units):
            if pos == -1 or (chain and pos >= chain[-1].pos):
                break
            i = files.log.index_of(pos)
            if i < 0:
                break
            chain.append(unit_from_row(files.log.units[i], pos))
            pos = chain[-1].prev_pos
        return chain

    def scheduled_messages(self, state: str | None = None, topic: str | None = None,
                           key: str | None = None, msg_id: str | None = None,
                           start_ms: int | None = None, end_ms: int | None = None, *,
                           now_ms: int | None = None,
                           max_records: int = MAX_RECORDS_FOR_SCHEDULED) -> ScheduledList:
        """Timer messages with their state, by due time; filters combine (see the module doc).
        One walk of at most `max_records` commit-log records; `.capped` on the result says it
        stopped before the log's end."""
        if state is not None and state not in STATES:
            raise StoreError(f"unknown state {state!r}: one of {', '.join(STATES)}")
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        rows = collect_scheduled(self, self._timer_files(), now_ms, max_records)
        want_phy = None
        if msg_id is not None:
            try:
                want_phy = decode_message_id(msg_id)[1]
            except (StoreError, ValueError):
                want_phy = None

        def keep(m: ScheduledMessage) -> bool:
            if state is not None and m.state != state:
                return False
            if topic is not None and m.topic != topic:
                return False
            if key is not None and key not in m.keys.split(" "):
                return False
            if msg_id is not None and msg_id.upper() != (m.uniq_key or "").upper() and (
                    want_phy is None or want_phy not in (m.wheel_phy_offset, m.delivered_phy_offset)):
                return False
            if start_ms is not None and (m.due_ms is None or m.due_ms < start_ms):
                return False
            return end_ms is None or (m.due_ms is not None and m.due_ms < end_ms)
        kept = ScheduledList(m for m in rows if keep(m))
        kept.capped, kept.walked_to = rows.capped, rows.walked_to
        return kept


__all__ = ["STATES", "ScheduledMessage", "TimerInspectMixin", "TIMER_TOPIC"]
