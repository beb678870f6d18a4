"""Pull: get messages from a queue, optionally long-polling with a countdown; commit the offset."""

import streamlit as st

from app.pull_job import MAX_LONG_POLL_MS, PullJob, start_offset
from app.query import results_frame
from app.ui.pull_commit import commit_form
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, message_details, plain, say

st.title("Pull")
handle = current_handle()
store = handle.store
last = st.session_state.get("pr_last", {})
topics = store.topic_names()

START_CHOICES = ("the group's committed offset", "this queue offset")

with st.form("pull_form"):
    c1, c2, c3 = st.columns(3)
    group = c1.text_input("Consumer group", value="inspector-group", key="pl_group")
    topic = c2.text_input("Topic", value=last.get("topic") or (topics[0] if topics else ""),
                          key="pl_topic")
    queue_id = c3.number_input("Queue id", min_value=0, max_value=1023,
                               value=int(last.get("queue_id", 0)), key="pl_queue")
    c4, c5, c6, c7 = st.columns(4)
    # The committed offset is read when Pull is pressed, for the group and queue typed then (a
    # default computed while the form was drawn belonged to the previous group and stayed 0).
    start_from = c4.radio("Start from", START_CHOICES, key="pl_start_from")
    offset = c4.number_input("Queue offset", min_value=0, value=0, key="pl_offset",
                             help="Used when starting from a queue offset.")
    max_messages = c5.number_input("Max messages", min_value=1, max_value=64, value=8, key="pl_max")
    tag_expression = c6.text_input("Tag expression", value="*", key="pl_tags",
                                   help="* for all, or tags joined by ||")
    long_poll_ms = c7.number_input("Long poll (ms)", min_value=0, max_value=MAX_LONG_POLL_MS,
                                   value=0, step=1000, key="pl_poll")
    pulled = st.form_submit_button("Pull")

if pulled:
    try:
        start = start_offset(store, group.strip(), topic.strip(), int(queue_id),
                             None if start_from == START_CHOICES[0] else int(offset))
    except EXPECTED_ERRORS as error:
        user_error(error)
    else:
        st.session_state.pl_start = start
        st.session_state.pl_job = PullJob(store, group=group.strip(), topic=topic.strip(),
                                          queue_id=int(queue_id), queue_offset=start.queue_offset,
                                          max_messages=int(max_messages),
                                          tag_expression=tag_expression,
                                          long_poll_ms=int(long_poll_ms))
        st.session_state.pl_job.wait(0.2 if long_poll_ms else 5.0)


_job = st.session_state.get("pl_job")
_ticking = _job is not None and not _job.done


@st.fragment(run_every=0.5 if _ticking else None)
def pull_result() -> None:
    job = st.session_state.get("pl_job")
    if job is None:
        st.caption("Nothing pulled yet.")
        return
    if not job.done:
        seconds = job.remaining_ms() / 1000
        say("info", "Long polling: waiting for a message on {} / {} … {} s left (released as soon as "
                    "one arrives).", job.request["topic"], job.request["queue_id"], f"{seconds:.1f}")
        st.progress(1 - job.remaining_ms() / max(1, job.long_poll_ms))
        return
    if _ticking:
        st.rerun()   # the poll ended: a full run shows the result and stops this fragment's timer
    if job.error:
        st.error(plain(job.error))
        return
    result = job.result
    st.subheader(f"Status: {result.status.value}")
    st.text(result.explanation)
    st.text(f"next_begin_offset = {result.next_begin_offset}  (min {result.min_offset}, "
            f"max {result.max_offset})" + (f"; waited {result.waited_ms} ms" if result.waited_ms
                                           else ""))
    if result.messages:
        frame(results_frame(result.messages))
        chosen = st.selectbox("Show message", range(len(result.messages)),
                              format_func=lambda i: f"queue offset {result.messages[i].queue_offset}",
                              key=f"pl_show_{id(job)}")   # a new box per pull (see Query)
        message_details(result.messages[chosen], "pl_body")
    start = st.session_state.get("pl_start")
    if start is not None and start.note:
        st.caption(plain(start.note))
    commit_form(store, handle.read_only, job.request, result.next_begin_offset)


pull_result()
