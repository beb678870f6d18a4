"""Numbers and figures for the Scheduled page: RocketMQ 4.9 delay levels and the 5.x timer wheel.

Plain functions over the inspection API (`store.inspect.delay_levels()`, `schedule_state()` and, when
the timer store's views exist, `timer_wheel()`); no streamlit here. Raw values stay in the rows'
`*_ms` columns; the human columns show times with their zone.
"""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go

from app.paths import InputError
from store.api import Message
from store.codec.topic import validate_topic
from store.errors import InvalidTopicError

DEMO_PROPERTY = "scheduledDemoSeq"      # marks a message produced on this page, to find it again
MAX_FIND_MESSAGES = 512                 # how far past the queue's old end we look for it
MAX_BODY_BYTES = 4096
PENDING_ROWS = 50                       # pending messages listed for one level
CHAIN_ROWS = 200                        # timer-log units listed for one wheel slot


def format_delay(delay_ms: int) -> str:
    """1000 -> '1s', 120000 -> '2m', 7200000 -> '2h', 1500 -> '1.5s'."""
    for unit_ms, suffix in ((86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")):
        if delay_ms >= unit_ms:
            value = delay_ms / unit_ms
            return f"{value:g}{suffix}"
    return f"{delay_ms}ms"


def format_time(timestamp_ms: int | None, zone: dt.tzinfo = dt.timezone.utc) -> str:
    """Epoch ms as 'YYYY-MM-DD HH:MM:SS.mmm <zone>'; '-' for None."""
    if timestamp_ms is None:
        return "-"
    try:
        moment = dt.datetime.fromtimestamp(timestamp_ms / 1000, zone)
    except (OverflowError, OSError, ValueError):
        return str(timestamp_ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " " + (moment.tzname() or "")


def format_countdown(due_ms: int | None, now_ms: int) -> str:
    """'in 4.2 s', 'in 3 min 5 s', 'due now' (or '-' when nothing is pending)."""
    if due_ms is None:
        return "-"
    left_ms = due_ms - now_ms
    if left_ms <= 0:
        return "due now"
    seconds = left_ms / 1000
    if seconds < 60:
        return f"in {seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"in {minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"in {hours} h {minutes} min"


def level_rows(views, now_ms: int, zone: dt.tzinfo = dt.timezone.utc) -> list[dict]:
    """One table row per delay level (`DelayLevelView`s)."""
    rows = []
    for view in views:
        rows.append({
            "level": view.level, "delay": format_delay(view.delay_ms), "queue": view.queue_id,
            "pending": view.pending,
            "delivered / max": f"{view.delivered_offset} / {view.max_offset}",
            "next due": format_time(view.next_due_ms, zone),
            "countdown": format_countdown(view.next_due_ms, now_ms),
            "held because": view.last_error or "",
            "delay_ms": view.delay_ms, "delivered_offset": view.delivered_offset,
            "max_offset": view.max_offset, "min_offset": view.min_offset,
            "next_due_ms": view.next_due_ms,
        })
    return rows


def pending_rows(units, now_ms: int, zone: dt.tzinfo = dt.timezone.utc) -> list[dict]:
    """One row per pending unit of a level (`ScheduledUnit`s), oldest first."""
    return [{"queue offset": u.queue_offset, "commit log offset": u.phy_offset, "bytes": u.size,
             "due": format_time(u.deliver_ms, zone), "countdown": format_countdown(u.deliver_ms, now_ms)}
            for u in units]


def levels_figure(views) -> go.Figure:
    """Stacked bars per level: messages delivered (still in the queue) and pending."""
    labels = [f"{v.level} ({format_delay(v.delay_ms)})" for v in views]
    delivered = [max(0, min(v.delivered_offset, v.max_offset) - v.min_offset) for v in views]
    pending = [v.pending for v in views]
    figure = go.Figure([
        go.Bar(name="delivered", x=labels, y=delivered, marker_color="#9bbad6"),
        go.Bar(name="pending", x=labels, y=pending, marker_color="#e07b39"),
    ])
    figure.update_layout(barmode="stack", height=320, margin=dict(l=10, r=10, t=30, b=10),
                         xaxis_title="delay level", yaxis_title="messages",
                         title="SCHEDULE_TOPIC_XXXX queues: delivered offset against max offset")
    return figure


def level_choices(views) -> list[str]:
    """'3 (10s)' per level, for the produce form."""
    return [f"{v.level} ({format_delay(v.delay_ms)})" for v in views]


def build_delayed_message(topic: str, queue_id: int, level: int, max_level: int, body_text: str,
                          tags: str, sequence: int) -> Message:
    """The message the produce form sends: DELAY = level, and a property to find it again."""
    try:
        validate_topic(topic)
    except InvalidTopicError as error:
        raise InputError(str(error)) from None
    if not 1 <= level <= max_level:
        raise InputError(f"Delay level must be between 1 and {max_level}.")
    if not 0 <= queue_id <= 1023:
        raise InputError("Queue id must be between 0 and 1023.")
    body = body_text.encode("utf-8")
    if len(body) > MAX_BODY_BYTES:
        raise InputError(f"Body of at most {MAX_BODY_BYTES} bytes on this page.")
    if any(ch in tags for ch in "\x01\x02"):
        raise InputError("Tags must not contain separator characters.")
    return Message(topic, body, queue_id=queue_id, tags=tags or None,
                   properties={"DELAY": str(level), DEMO_PROPERTY: str(sequence)})


def find_delivered(store, topic: str, queue_id: int, from_offset: int, sequence: int):
    """The delivered copy of the page's message `sequence` in its real queue (searching from the
    queue offset it had when the message was produced, at most MAX_FIND_MESSAGES), or None."""
    offset = from_offset
    seen = 0
    while seen < MAX_FIND_MESSAGES:
        result = store.get_message("scheduled-page", topic, queue_id, offset, 32)
        if not result.messages:
            return None
        for message in result.messages:
            if message.properties.get(DEMO_PROPERTY) == str(sequence):
                return message
        seen += len(result.messages)
        offset = result.next_begin_offset
    return None


# -- the 5.x timer wheel (store.inspect.timer_wheel(), when the timer store's views exist) --------

def timer_views_available(inspector) -> bool:
    return callable(getattr(inspector, "timer_wheel", None))


MAX_WHEEL_SLOTS_SHOWN = 2000    # slots drawn and listed (the nearest to now)
MAX_SLOTS_WALKED = 300          # slots whose chain is walked to count units when num is 0
MAX_CHAIN_UNITS_COUNTED = 10_000


def wheel_rows(inspector, slots, now_ms: int, zone: dt.tzinfo = dt.timezone.utc) -> list[dict]:
    """One row per non-empty wheel slot (`WheelSlot`s), the MAX_WHEEL_SLOTS_SHOWN nearest to now,
    in time order. `count` is the slot's num, or (num 0, as recovery leaves the slots it rebuilds)
    the length of its chain in the timer log, walked for at most MAX_SLOTS_WALKED slots."""
    chosen = sorted(slots, key=lambda s: abs(s.time_ms - now_ms))[:MAX_WHEEL_SLOTS_SHOWN]
    rows = []
    walked = 0
    for slot in sorted(chosen, key=lambda s: s.time_ms):
        count, source = slot.num, "num"
        if count == 0 and walked < MAX_SLOTS_WALKED:
            walked += 1
            count = len(inspector.timer_chain(slot.time_ms, MAX_CHAIN_UNITS_COUNTED))
            source = "chain"
        rows.append({"slot": slot.index, "slot time": format_time(slot.time_ms, zone),
                     "countdown": format_countdown(slot.time_ms, now_ms), "messages": count,
                     "counted from": source, "first pos": slot.first_pos, "last pos": slot.last_pos,
                     "time_ms": slot.time_ms})
    return rows


def wheel_figure(rows: list[dict], now_ms: int, read_time_ms: int | None,
                 zone: dt.tzinfo = dt.timezone.utc) -> go.Figure:
    """A timeline of the wheel's non-empty slots, bars coloured by their message count, with "now"
    (and the timer's recovered read time) marked."""
    def when(ms: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(ms / 1000, zone)

    counts = [row["messages"] for row in rows]
    figure = go.Figure(go.Bar(
        x=[when(row["time_ms"]) for row in rows], y=counts,
        marker=dict(color=counts, colorscale="Viridis", showscale=bool(rows),
                    colorbar=dict(title="messages")),
        hovertext=[f"slot {row['slot']}: {row['messages']} message(s)" for row in rows]))
    marks = [("now", now_ms, "#d62728")]
    if read_time_ms:
        marks.append(("timer read time", read_time_ms, "#7f7f7f"))
    for label, ms, color in marks:
        figure.add_shape(type="line", x0=when(ms), x1=when(ms), y0=0, y1=1, yref="paper",
                         line=dict(color=color, dash="dash"))
        figure.add_annotation(x=when(ms), y=1, yref="paper", text=label, showarrow=False,
                              yanchor="bottom", font=dict(color=color))
    zone_name = dt.datetime.now(zone).tzname() or ""
    figure.update_layout(height=320, margin=dict(l=10, r=10, t=40, b=10),
                         xaxis_title=f"slot time ({zone_name})",
                         yaxis_title="messages", title="Timer wheel: non-empty slots")
    return figure


def chain_rows(units, zone: dt.tzinfo = dt.timezone.utc) -> list[dict]:
    """A slot's timer-log units (`TimerLogUnit`s), newest first."""
    return [{"timer log pos": u.pos, "prev pos": u.prev_pos,
             "written": format_time(u.curr_write_time_ms, zone), "delay ms": u.delay_ms,
             "due": format_time(u.due_time_ms, zone), "commit log offset": u.offset_py,
             "bytes": u.size_py} for u in units]


def state_counts(messages) -> dict[str, int]:
    """Timer messages (`ScheduledMessage`s) per state."""
    counts: dict[str, int] = {}
    for message in messages:
        counts[message.state] = counts.get(message.state, 0) + 1
    return counts
