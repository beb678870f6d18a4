"""Scheduled: RocketMQ 4.9's delay levels (messages waiting per level, next due time, delivery offset
against max offset), a produce form with a delay level to watch a message wait and appear in its topic,
and the 5.x timer wheel when the timer store's inspection views exist."""

import datetime as dt

import streamlit as st

from app.paths import InputError
from app.scheduled_data import (CHAIN_ROWS, PENDING_ROWS, build_delayed_message, chain_rows,
                                find_delivered, format_countdown, format_time, level_choices,
                                level_rows, levels_figure, pending_rows, state_counts,
                                timer_views_available, wheel_figure, wheel_rows)
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, say

st.title("Scheduled")
handle = current_handle()
store = handle.store
st.caption("A message sent with a delay level waits in SCHEDULE_TOPIC_XXXX, queue level - 1; its "
           "consume-queue tagsCode is its delivery time. When that time comes, ScheduleMessageService "
           "writes it again to its real topic and moves the level's offset (config/delayOffset.json).")

c1, c2 = st.columns(2)
zone_name = c1.radio("Times in", ["UTC", "server local time"], horizontal=True, key="sc_zone")
zone = dt.timezone.utc if zone_name == "UTC" else dt.datetime.now().astimezone().tzinfo
live = c2.toggle("Live update (every 2 s)", value=True, key="sc_live")


def delivery_note(state: dict) -> tuple[str, str]:
    if store.style != "4.9":
        return "info", ("This is a 5.x-format store: RocketMQ 5 delivers delay levels in the broker, "
                        "so messages here stay pending (shown, never delivered).")
    if handle.read_only:
        return "info", "Read-only view: nothing is delivered; pending levels are shown as stored."
    if state["delivering"]:
        return "success", "ScheduleMessageService is running: due messages are delivered."
    return "warning", "Delivery is not running for this store (services not started, or a slave)."


@st.fragment(run_every=2 if live else None)
def levels_panel() -> None:
    try:
        handle.refresh()
        views = store.inspect.delay_levels()
        state = store.inspect.schedule_state()
    except EXPECTED_ERRORS as error:
        user_error(error)
        return
    now_ms = store.clock_ms()
    kind, text = delivery_note(state)
    say(kind, "{}", text)
    for warning in state["offsets_warnings"]:
        if "missing" not in warning:     # a missing file is the normal start, not worth a warning
            say("warning", "delayOffset.json: {}", warning)
    cols = st.columns(4)
    cols[0].metric("Pending messages", sum(v.pending for v in views))
    cols[1].metric("Levels with pending", sum(1 for v in views if v.pending))
    due = [v.next_due_ms for v in views if v.next_due_ms is not None]
    cols[2].metric("Next delivery", format_countdown(min(due), now_ms) if due else "-")
    cols[3].metric("Delivered since open", state["delivered_messages"])
    st.caption(f"Now: {format_time(now_ms, zone)}; offsets from: {state['offsets_source']}")
    st.plotly_chart(levels_figure(views), key="sc_levels_figure")
    rows = level_rows(views, now_ms, zone)
    frame([{k: v for k, v in row.items() if not k.endswith(("_ms", "_offset"))} for row in rows])
    waiting = [v for v in views if v.pending]
    if waiting:
        labels = level_choices(waiting)
        chosen = st.selectbox("Pending messages of level", labels, key="sc_pending_level")
        level = waiting[labels.index(chosen) if chosen in labels else 0].level
        try:
            units = store.inspect.scheduled_messages_of_level(level, PENDING_ROWS)
        except EXPECTED_ERRORS as error:
            user_error(error)
        else:
            frame(pending_rows(units, now_ms, zone))
    watched = st.session_state.get("sc_watch")
    if watched:
        watch_panel(watched, now_ms)


def watch_panel(watched: dict, now_ms: int) -> None:
    st.subheader("Your delayed message")
    try:
        found = find_delivered(store, watched["topic"], watched["queue_id"], watched["from_offset"],
                               watched["sequence"])
    except EXPECTED_ERRORS as error:
        user_error(error)
        return
    if found is None:
        say("info", "Waiting in level {} (due {}, {}); not yet in {} queue {}.", watched["level"],
            format_time(watched["due_ms"], zone), format_countdown(watched["due_ms"], now_ms),
            watched["topic"], watched["queue_id"])
        return
    say("success", "Delivered to {} queue {} at queue offset {}, stored {}.", found.topic,
        found.queue_id, found.queue_offset, format_time(found.store_timestamp, zone))
    frame([{"property": k, "value": v} for k, v in found.properties.items()])


levels_panel()

st.header("Produce a delayed message")
try:
    level_views = store.inspect.delay_levels()
except EXPECTED_ERRORS as error:
    user_error(error)
    level_views = []
can_produce = not handle.read_only and store.style == "4.9" and bool(level_views)
if not can_produce:
    st.caption("Producing is available on a writable (hosted) 4.9-format store.")
with st.form("sc_form"):
    f1, f2, f3 = st.columns(3)
    topic = f1.text_input("Topic", value="DelayDemo", key="sc_topic")
    queue_id = f2.number_input("Queue id", min_value=0, max_value=1023, value=0, key="sc_queue")
    choices = level_choices(level_views) or ["1 (1s)"]
    level_label = f3.selectbox("Delay level", choices, index=min(2, len(choices) - 1), key="sc_level")
    f4, f5 = st.columns(2)
    tags = f4.text_input("Tags", value="TagA", key="sc_tags")
    body_text = f5.text_input("Body text", value="see you later", key="sc_body")
    sent = st.form_submit_button("Send delayed", disabled=not can_produce)

if sent and can_produce:
    sequence = st.session_state.get("sc_sequence", 0) + 1
    st.session_state.sc_sequence = sequence
    level = choices.index(level_label) + 1
    try:
        message = build_delayed_message(topic, int(queue_id), level, len(level_views), body_text,
                                        tags, sequence)
        from_offset = store.get_max_offset_in_queue(message.topic, message.queue_id)
        result = store.put_message(message)
    except (InputError, *EXPECTED_ERRORS) as error:
        user_error(error)
    else:
        if result.ok:
            due_ms = result.store_timestamp + level_views[level - 1].delay_ms
            st.session_state.sc_watch = {"topic": message.topic, "queue_id": message.queue_id,
                                         "from_offset": from_offset, "sequence": sequence,
                                         "level": level, "due_ms": due_ms}
            say("success", "Stored in SCHEDULE_TOPIC_XXXX queue {} (msgId {}); due {}.", level - 1,
                result.msg_id, format_time(due_ms, zone))
        else:
            say("error", "{}: {}", result.status.value, result.error)



@st.fragment(run_every=5 if live else None)
def wheel_panel() -> None:
    inspector = store.inspect
    try:
        inspector.timer_refresh()
        state = inspector.timer_state()
        slots = inspector.timer_wheel()
        recovered = not slots
        if recovered:                      # no wheel file: the slots recovery rebuilds in memory
            slots = inspector.timer_wheel(after_recovery=True)
        now_ms = store.clock_ms()
        rows = wheel_rows(inspector, slots, now_ms, zone)
    except EXPECTED_ERRORS as error:
        user_error(error)
        return
    say("caption", "Timer store state: {}; precision {} ms; slots shown {}.", state["state"],
        state.get("precision_ms"), "as recovery rebuilds them" if recovered else "as stored")
    for problem in state.get("problems", []):
        say("warning", "{}", problem)
    cols = st.columns(3)
    cols[0].metric("Non-empty slots", len(slots))
    cols[1].metric("Timer-log units", state.get("timer_log_units", 0))
    cols[2].metric("Timer read time", format_time(state.get("curr_read_time_ms"), zone))
    st.plotly_chart(wheel_figure(rows, now_ms, state.get("curr_read_time_ms"), zone),
                    key="sc_wheel_figure")
    if not rows:
        return
    frame([{k: v for k, v in row.items() if k != "time_ms"} for row in rows])
    labels = [f"{row['slot time']} ({row['messages']})" for row in rows]
    chosen = st.selectbox("Slot chain", labels, key="sc_slot")
    row = rows[labels.index(chosen) if chosen in labels else 0]
    try:
        units = inspector.timer_chain(row["time_ms"], CHAIN_ROWS)
    except EXPECTED_ERRORS as error:
        user_error(error)
        return
    frame(chain_rows(units, zone))


st.header("Timer wheel (5.x)")
if not timer_views_available(store.inspect):
    st.caption("Not available: this build has no timer-store inspection views "
               "(store.inspect.timer_wheel()).")
elif store.style != "5.x":
    st.caption("The timer wheel belongs to 5.x-format stores; this one is 4.9.")
else:
    wheel_panel()
    if st.button("Count timer messages by state (reads the commit log once)", key="sc_count"):
        try:
            messages = store.inspect.scheduled_messages(now_ms=store.clock_ms())
        except EXPECTED_ERRORS as error:
            user_error(error)
        else:
            frame([{"state": k, "messages": v} for k, v in state_counts(messages).items()])
