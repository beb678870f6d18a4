"""Consumer groups: committed offsets, max offsets and lag per queue and in total, the last consumed
store time (store.inspect.consumer_progress()); an offset reset, previewed and confirmed."""

import datetime as dt

import streamlit as st

from app import groups_data
from app.times import ZONE_NAME, to_ms
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, plain, say

st.title("Consumer groups")
handle = current_handle()
store = handle.store
with handle.lock:
    handle.refresh()
    rows = groups_data.progress_rows(store)
st.caption("From consumerOffset.json. Lag = the queue's max offset − the committed offset, never "
           "negative: where a committed offset is missing, ahead of the queue or below its min "
           "offset, the note says how the lag was counted (apache/rocketmq #2743).")
if "cg_done" in st.session_state:
    st.success(st.session_state.pop("cg_done"))
if not rows:
    st.info("No consumer group has committed an offset in this store.")
    st.stop()
st.header("Groups, most lag first")
frame(groups_data.groups_frame(rows))

groups = list(groups_data.groups_frame(rows)["group"])
group = st.selectbox("Group", groups, key="cg_group")
group_rows = [r for r in rows if r["group"] == group]
st.subheader(f"{plain(group)}: lag per queue")
frame(groups_data.queues_frame(group_rows))

st.header("Reset offsets")
if handle.read_only:
    st.warning("This store is open read-only: resetting offsets is refused. Host a copy (sidebar) "
               "to try a reset.")
topics = sorted({r["topic"] for r in group_rows})
with st.form("cg_reset_form"):
    c1, c2 = st.columns(2)
    topic = c1.selectbox("Topic", topics, key="cg_topic")
    target = c2.radio("Reset to", groups_data.TARGETS, horizontal=True, key="cg_target",
                      help="earliest: the queue's min offset; latest: its max offset (skip "
                           "everything); time: the first message stored at or after the time.")
    c3, c4 = st.columns(2)
    day = c3.date_input(f"Date ({ZONE_NAME})", value=dt.date.today(), key="cg_day")
    clock = c4.time_input(f"Time ({ZONE_NAME})", value=dt.time(0, 0), key="cg_time")
    previewed = st.form_submit_button("Preview the reset")
if previewed:
    try:
        steps = groups_data.plan_reset(store, group, topic, target,
                                       to_ms(day, clock) if target == "time" else None)
        st.session_state.cg_plan = (handle.key, group, topic, target, steps)
    except EXPECTED_ERRORS as error:
        user_error(error)
        st.session_state.pop("cg_plan", None)
plan = st.session_state.get("cg_plan")
if plan is not None and plan[:3] == (handle.key, group, topic):
    _key, _group, _topic, planned_target, steps = plan
    frame(groups_data.plan_frame(steps))
    back = sum(s.current - s.target for s in steps if s.backwards)
    if back:
        say("warning", "This moves {} BACKWARDS on {} queue(s): its consumers would receive {} "
                       "message(s) again.", group, sum(s.backwards for s in steps), f"{back:,}")
    confirmed = st.checkbox(f"Yes, reset {plain(group)} on {plain(topic)} to {planned_target}",
                            key=f"cg_confirm_{len(steps)}_{planned_target}")
    if st.button("Reset offsets", key="cg_apply", disabled=handle.read_only or not confirmed):
        try:
            changed = groups_data.apply_reset(store, handle.read_only, group, topic, steps)
            st.session_state.pop("cg_plan", None)
            st.session_state.cg_done = (f"Reset {changed} queue(s). The new offsets are persisted to "
                                        "consumerOffset.json periodically and at shutdown.")
            st.rerun()     # redraw the lag tables with the new offsets
        except EXPECTED_ERRORS as error:
            user_error(error)
