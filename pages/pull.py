"""Pull: get messages from a queue, optionally long-polling with a countdown; commit the offset."""

import streamlit as st

from app.pull_job import MAX_LONG_POLL_MS, PullJob
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, message_details
from app.commitlog_data import message_row

st.title("Pull")
handle = current_handle()
store = handle.store
last = st.session_state.get("pr_last", {})
topics = store.topic_names()

with st.form("pull_form"):
    c1, c2, c3 = st.columns(3)
    group = c1.text_input("Consumer group", value="inspector-group", key="pl_group")
    topic = c2.text_input("Topic", value=last.get("topic") or (topics[0] if topics else ""),
                          key="pl_topic")
    queue_id = c3.number_input("Queue id", min_value=0, max_value=1023,
                               value=int(last.get("queue_id", 0)), key="pl_queue")
    c4, c5, c6, c7 = st.columns(4)
    committed = store.query_consumer_offset(group, topic, int(queue_id)) if topic else -1
    offset = c4.number_input("Queue offset", min_value=0, value=max(0, committed), key="pl_offset",
                             help="Defaults to the group's committed offset.")
    max_messages = c5.number_input("Max messages", min_value=1, max_value=64, value=8, key="pl_max")
    tag_expression = c6.text_input("Tag expression", value="*", key="pl_tags",
                                   help="* for all, or tags joined by ||")
    long_poll_ms = c7.number_input("Long poll (ms)", min_value=0, max_value=MAX_LONG_POLL_MS,
                                   value=0, step=1000, key="pl_poll")
    pulled = st.form_submit_button("Pull")

if pulled:
    st.session_state.pl_job = PullJob(store, group=group, topic=topic.strip(),
                                      queue_id=int(queue_id), queue_offset=int(offset),
                                      max_messages=int(max_messages), tag_expression=tag_expression,
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
        st.info(f"Long polling: waiting for a message on {job.request['topic']} / "
                f"{job.request['queue_id']} … {seconds:.1f} s left (released as soon as one arrives).")
        st.progress(1 - job.remaining_ms() / max(1, job.long_poll_ms))
        return
    if _ticking:
        st.rerun()   # the poll ended: a full run shows the result and stops this fragment's timer
    if job.error:
        st.error(job.error)
        return
    result = job.result
    st.subheader(f"Status: {result.status.value}")
    st.write(result.explanation)
    st.text(f"next_begin_offset = {result.next_begin_offset}  (min {result.min_offset}, "
            f"max {result.max_offset})" + (f"; waited {result.waited_ms} ms" if result.waited_ms
                                           else ""))
    if result.messages:
        frame([message_row(m) for m in result.messages])
        chosen = st.selectbox("Show message", range(len(result.messages)),
                              format_func=lambda i: f"queue offset {result.messages[i].queue_offset}",
                              key="pl_show")
        message_details(result.messages[chosen], "pl_body")
    if st.button(f"Commit offset {result.next_begin_offset} for group "
                 f"{job.request['group']}", key="pl_commit", disabled=handle.read_only):
        try:
            store.commit_consumer_offset(job.request["group"], job.request["topic"],
                                         job.request["queue_id"], result.next_begin_offset)
            st.success("Committed (persisted to consumerOffset.json periodically and at shutdown).")
        except EXPECTED_ERRORS as error:
            user_error(error)


pull_result()
