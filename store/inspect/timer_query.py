"""`collect_scheduled`: the rows behind `StoreInspector.scheduled_messages` (states in
`store.inspect.timer`). One bounded walk of the commit log finds the `rmq_sys_wheel_timer` records and
the delivered copies (a real-topic record carrying a timer property); the timer files give each
record's unit, the slot chains that reach it and the recovered read time and queue offset."""

from __future__ import annotations

from dataclasses import dataclass

from store.codec import record_check
from store.codec.javahash import java_string_hash
from store.timer.codec import TIMER_TOPIC

TIMER_PROPERTIES = ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
STATES = ("pending", "due", "delivered", "orphaned", "cancelled")
DELETE_PROPERTY = "TIMER_DEL_UNIQKEY"       # MessageConst.PROPERTY_TIMER_DEL_UNIQKEY


def _deleted_keys(wheel_by_phy: dict) -> dict[str, int]:
    """Target UNIQ_KEY -> the delete marker's phy offset. The dequeue (TimerDequeueGetMessageService)
    drops a message of the same slot whose UNIQ_KEY is in the markers' TIMER_DEL_UNIQKEY values;
    a value may carry a `topic_` / `topic+` prefix in some client versions, so the key is its tail."""
    out = {}
    for phy, request in wheel_by_phy.items():
        value = (request.properties or {}).get(DELETE_PROPERTY)
        if value:
            out[value] = phy
            for separator in ("_", "+"):
                if separator in value:
                    out[value.rsplit(separator, 1)[1]] = phy
    return out


@dataclass(frozen=True)
class ScheduledMessage:
    """One timer message and where it is (raw values; `due_ms` is TIMER_OUT_MS, or for a message
    stored unchanged its TIMER_DELIVER_MS)."""

    state: str
    reason: str
    uniq_key: str | None
    topic: str | None                  # the real topic (REAL_TOPIC)
    queue_id: int | None               # the real queue (REAL_QID)
    keys: str
    tags: str | None
    due_ms: int | None
    timer_property: str | None         # which of TIMER_DELIVER_MS / _DELAY_SEC / _DELAY_MS
    timer_value: str | None
    wheel_phy_offset: int | None       # the rmq_sys_wheel_timer record
    wheel_queue_offset: int | None
    timer_log_pos: int | None          # its unit in the timer log (None: not enqueued)
    delivered_phy_offset: int | None
    delivered_queue_offset: int | None
    enqueue_ms: int | None             # TIMER_ENQUEUE_MS of the delivered copy
    dequeue_ms: int | None             # TIMER_DEQUEUE_MS of the delivered copy
    store_timestamp: int | None        # of the wheel record (or of the copy when there is none)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _int(text) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _timer_property(props: dict) -> tuple[str | None, str | None]:
    for name in TIMER_PROPERTIES:
        if props.get(name) is not None:
            return name, props[name]
    return None, None


def _reached_units(files, bound: int) -> set[int]:
    """Timer-log positions some (recovered) slot chain reaches."""
    reached: set[int] = set()
    slots = files.recovery.slots if files.recovery is not None else files.slots
    for slot in slots.values():
        pos, last = slot.last_pos, None
        for _ in range(bound + 1):
            if pos == -1 or (last is not None and pos >= last):
                break
            i = files.log.index_of(pos)
            if i < 0:
                break
            reached.add(pos)
            last, pos = pos, int(files.log.units["prev_pos"][i])
    return reached


def _walk(inspector, max_records: int):
    """(wheel records by phy offset, latest wheel phy offset by uniq key, latest copy by uniq key,
    the offset the walk covered)."""
    wheel_by_phy, wheel_by_key, copies = {}, {}, {}
    start = inspector._commit_log.min_offset()
    walked_to = start
    for phy_offset, result in inspector.records(start, check_crc=False, max_records=max_records):
        walked_to = phy_offset + max(result.size, 0)
        if result.kind != record_check.CHECK_RECORD:
            continue
        request = result.request
        props = request.properties or {}
        if request.topic == TIMER_TOPIC:
            wheel_by_phy[phy_offset] = request
            if request.uniq_key:
                wheel_by_key[request.uniq_key] = phy_offset
        elif request.uniq_key and (_timer_property(props)[0] or "TIMER_OUT_MS" in props):
            copies[request.uniq_key] = (phy_offset, request)
    return wheel_by_phy, wheel_by_key, copies, walked_to


class ScheduledList(list):
    """`scheduled_messages`' rows; `capped` says the commit-log walk stopped at its record cap
    before the log's end (`walked_to`), so messages stored after that are missing."""

    capped: bool = False
    walked_to: int = 0


def collect_scheduled(inspector, files, now_ms: int, max_records: int) -> ScheduledList:
    wheel_by_phy, wheel_by_key, copies, walked_to = _walk(inspector, max_records)
    log = files.log
    units_by_offset: dict[int, int] = {}
    reached: set[int] = set()
    if log is not None:
        units_by_offset = {int(o): int(p) for o, p in zip(log.units["offset_py"], log.pos)}
        reached = _reached_units(files, len(log.pos))
    recovery = files.recovery
    precision = files.precision_ms
    deleted = _deleted_keys(wheel_by_phy)
    rows = ScheduledList()
    rows.walked_to = walked_to
    rows.capped = walked_to < inspector._commit_log.max_offset()
    for uniq, phy in wheel_by_key.items():
        request = wheel_by_phy[phy]
        props = request.properties or {}
        due_ms = _int(props.get("TIMER_OUT_MS"))
        prop, value = _timer_property(props)
        unit_pos = units_by_offset.get(phy)
        copy = copies.get(uniq)
        if copy is not None:
            state, reason = "delivered", f"copy at commit-log offset {copy[0]}"
        elif props.get(DELETE_PROPERTY):
            state, reason = "cancelled", f"delete marker for {props[DELETE_PROPERTY]} (never delivered)"
        elif uniq in deleted:
            state, reason = "cancelled", f"deleted by the marker at commit-log offset {deleted[uniq]}"
        elif recovery is not None and unit_pos is not None and unit_pos not in reached:
            state, reason = "orphaned", f"no slot chain reaches its timer-log unit at {unit_pos}"
        elif recovery is not None and unit_pos is not None and due_ms is not None and \
                due_ms // precision * precision < recovery.curr_read_time_ms and not rows.capped:
            state, reason = "orphaned", (f"the timer read past its slot (read time "
                                         f"{recovery.curr_read_time_ms}) and no copy was delivered")
        elif recovery is not None and unit_pos is None and \
                request.consume_queue_offset < recovery.curr_queue_offset:
            state, reason = "orphaned", ("enqueued (queue offset below the timer's) but no "
                                         "timer-log unit points to it")
        elif due_ms is not None and due_ms <= now_ms:
            state, reason = "due", ("waiting in the timer log" if unit_pos is not None else
                                    "not enqueued yet")
        else:
            state, reason = "pending", ("waiting in the timer log" if unit_pos is not None else
                                        "not enqueued yet")
        copy_request = copy[1] if copy is not None else None
        copy_props = (copy_request.properties or {}) if copy_request is not None else {}
        rows.append(ScheduledMessage(
            state, reason, uniq, props.get("REAL_TOPIC"), _int(props.get("REAL_QID")),
            request.keys or "", props.get("TAGS"), due_ms, prop, value, phy,
            request.consume_queue_offset, unit_pos,
            copy[0] if copy is not None else None,
            copy_request.consume_queue_offset if copy_request is not None else None,
            _int(copy_props.get("TIMER_ENQUEUE_MS")), _int(copy_props.get("TIMER_DEQUEUE_MS")),
            request.store_timestamp))
    for uniq, (phy, request) in copies.items():
        if uniq in wheel_by_key:
            continue
        props = request.properties or {}
        prop, value = _timer_property(props)
        due_ms = _int(props.get("TIMER_OUT_MS"))
        if due_ms is None and prop == "TIMER_DELIVER_MS":
            due_ms = _int(value)
        elif due_ms is None and value is not None and _int(value) is not None:
            due_ms = request.store_timestamp + _int(value) * (1000 if prop == "TIMER_DELAY_SEC" else 1)
        reason = ("stored in its topic at once: the deliver time had passed at put"
                  if "TIMER_OUT_MS" not in props else "its wheel record is no longer in the log")
        rows.append(ScheduledMessage(
            "delivered", reason, uniq, request.topic, request.queue_id, request.keys or "",
            props.get("TAGS"), due_ms, prop, value, None, None, None, phy,
            request.consume_queue_offset, _int(props.get("TIMER_ENQUEUE_MS")),
            _int(props.get("TIMER_DEQUEUE_MS")), request.store_timestamp))
    rows.extend(_orphan_units(inspector, files, wheel_by_phy, walked_to))
    rows.sort(key=lambda m: (m.due_ms if m.due_ms is not None else -1, m.uniq_key or "",
                             m.timer_log_pos or -1))
    return rows


def _orphan_units(inspector, files, wheel_by_phy: dict, walked_to: int) -> list:
    """Timer-log units that point at no wheel record the walk saw: past the log's end (#10668) or
    at something else. Units before the log's first offset (expired) are left out."""
    log = files.log
    if log is None:
        return []
    log_min = inspector._commit_log.min_offset()
    log_end = inspector._commit_log.max_offset()
    names = {java_string_hash(t): t for t, _ in inspector._consume_queues.queues()}
    out = []
    for i, pos in enumerate(log.pos.tolist()):
        offset_py = int(log.units["offset_py"][i])
        size_py = int(log.units["size_py"][i])
        if offset_py in wheel_by_phy or offset_py < log_min:
            continue
        if offset_py + size_py > log_end:
            reason = (f"its unit points to commit-log offset {offset_py}, past the log's end "
                      f"{log_end} (apache/rocketmq#10668)")
        elif offset_py < walked_to:
            reason = f"its unit points to commit-log offset {offset_py}: no {TIMER_TOPIC} record"
        else:
            continue                    # beyond the capped walk: cannot tell
        due_ms = int(log.units["curr_write_time_ms"][i]) + int(log.units["delay_ms"][i])
        out.append(ScheduledMessage(
            "orphaned", reason, None, names.get(int(log.units["topic_hash"][i])), None, "", None,
            due_ms, None, None, offset_py, None, pos, None, None, None, None, None))
    return out
