"""Delay levels as the store holds them, mixed into `StoreInspector` (RocketMQ's `ScheduleMessageService`).

| method                          | returns                                                              |
|---------------------------------|----------------------------------------------------------------------|
| `delay_levels()`                | `DelayLevelView` per configured level (`messageDelayLevel`): queue   |
|                                 | `level - 1` of `SCHEDULE_TOPIC_XXXX`, its min and max offset, the     |
|                                 | delivered offset (delayOffset.json's `offsetTable`, or the running    |
|                                 | service's table), pending = max - delivered, and the delivery time   |
|                                 | (the unit's tagsCode) of the next pending message                     |
| `scheduled_messages_of_level(level, max_messages)` | the pending units of one level, oldest first      |
| `schedule_state()`              | whether this open delivers, where the offsets came from, counters     |

RocketMQ's `buildRunningStats` reports the same pair per level (`scheduleMessageOffset_<level>` =
"delivered,max"). A read-only open (or a 5.x-format store, whose delivery belongs to its broker) reads
`config/delayOffset.json` on each call and never writes; a writable 4.9 store shows the live table,
which is ahead of the file by what was delivered since the last persist. Every walk is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.codec.message import SCHEDULE_TOPIC
from store.commitlog.put_path import parse_delay_levels
from store.meta.delay_offset import DelayOffsetTable

MAX_SCHEDULED_MESSAGES = 1000      # bound of scheduled_messages_of_level


@dataclass(frozen=True)
class DelayLevelView:
    """One delay level: raw numbers (offsets are queue offsets, times ms since the epoch)."""

    level: int
    delay_ms: int
    queue_id: int
    min_offset: int
    max_offset: int
    delivered_offset: int        # the next queue offset to deliver (0 when the level has no entry)
    pending: int                 # max_offset - max(delivered_offset, min_offset), never negative
    next_due_ms: int | None      # delivery time of the next pending message, None if none
    last_error: str | None       # why the running service is holding this level, if it is


@dataclass(frozen=True)
class ScheduledUnit:
    """A pending message of a level: where it is and when it is due."""

    queue_offset: int
    phy_offset: int
    size: int
    deliver_ms: int


class ScheduledViewsMixin:
    """Delay-level views of `StoreInspector`. The facade hands in the running service (if any) with
    `attach_scheduled`; without it the offsets come from the file."""

    _schedule_service = None

    def attach_scheduled(self, *, service) -> None:
        self._schedule_service = service

    def _delay_levels_ms(self) -> list[int]:
        return parse_delay_levels(self.config.message_delay_level)

    def _delay_offsets(self) -> tuple[dict[int, int], str, list[str]]:
        service = self._schedule_service
        if service is not None:
            return service.offsets.table(), "live", list(service.offsets.file.warnings)
        table = DelayOffsetTable(self.config.config_dir, read_only=True)
        offsets = table.load()
        return offsets, table.file.source or "empty", list(table.file.warnings)

    def schedule_state(self) -> dict:
        """{"delivering": bool, "offsets_source": "live" | "file" | "bak" | "empty",
        "offsets_warnings": why delayOffset.json itself was not used (then its .bak or nothing was,
        as RocketMQ's ConfigManager does), "delivered_messages": int (this open),
        "max_delay_level": int}."""
        service = self._schedule_service
        _, source, warnings = self._delay_offsets()
        return {"delivering": bool(service is not None and service.started),
                "offsets_source": source, "offsets_warnings": warnings,
                "delivered_messages": 0 if service is None else service.delivered_messages,
                "max_delay_level": len(self._delay_levels_ms())}

    def delay_levels(self) -> list[DelayLevelView]:
        """One `DelayLevelView` per configured level, level 1 first."""
        offsets, _, _ = self._delay_offsets()
        service = self._schedule_service
        errors = {} if service is None else dict(service.last_error)
        queues = self._consume_queues
        views = []
        for level, delay_ms in enumerate(self._delay_levels_ms(), start=1):
            queue_id = level - 1
            low = queues.get_min_offset(SCHEDULE_TOPIC, queue_id)
            high = queues.get_max_offset(SCHEDULE_TOPIC, queue_id)
            delivered = offsets.get(level, 0)
            start = max(delivered, low)
            pending = max(0, high - start)
            next_due = None
            if pending:
                unit = queues.get_unit(SCHEDULE_TOPIC, queue_id, start)
                next_due = None if unit is None else int(unit.tags_code)
            views.append(DelayLevelView(level, delay_ms, queue_id, low, high, delivered, pending,
                                        next_due, errors.get(level)))
        return views

    def scheduled_messages_of_level(self, level: int,
                                    max_messages: int = MAX_SCHEDULED_MESSAGES) -> list[ScheduledUnit]:
        """The pending units of `level` from its delivered offset, at most `max_messages`
        (capped at MAX_SCHEDULED_MESSAGES)."""
        levels = self._delay_levels_ms()
        if not 1 <= level <= len(levels):
            raise ValueError(f"delay level {level} is not in 1..{len(levels)}")
        offsets, _, _ = self._delay_offsets()
        queue_id = level - 1
        queues = self._consume_queues
        cursor = max(offsets.get(level, 0), queues.get_min_offset(SCHEDULE_TOPIC, queue_id))
        end = queues.get_max_offset(SCHEDULE_TOPIC, queue_id)
        wanted = max(0, min(max_messages, MAX_SCHEDULED_MESSAGES, end - cursor))
        out: list[ScheduledUnit] = []
        while len(out) < wanted:
            units = queues.get_units(SCHEDULE_TOPIC, queue_id, cursor, wanted - len(out))
            if units is None or len(units) == 0:
                break
            for phy_offset, size, tags_code in units[["phy_offset", "size", "tags_code"]].tolist():
                out.append(ScheduledUnit(cursor, phy_offset, size, tags_code))
                cursor += 1
        return out[:wanted]
