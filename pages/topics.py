"""Topics: every topic with its queues, messages, size on disk, first and last store time and put
rate (store.inspect.topics()); %RETRY% and %DLQ% topics apart, with their messages."""

import streamlit as st

from app import browse, topics_data
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, message_details, plain, say

st.title("Topics")
handle = current_handle()
store = handle.store
with handle.lock:
    handle.refresh()
    rows = topics_data.topic_rows(store)
st.caption(f"{len(rows)} topic(s), {sum(r['queues'] for r in rows)} queue(s), "
           f"{sum(r['messages'] for r in rows):,} message(s) in this store.")
st.caption("Per topic, over every queue: messages the consume queues hold (max − min offset), their "
           "bytes in the commit log, the store times of the oldest and newest, and the put rate "
           "between them. Times in UTC.")
c1, c2 = st.columns([2, 1])
sort_key = c1.selectbox("Sort by", list(topics_data.SORT_KEYS), key="tp_sort")
descending = c2.toggle("Largest first", value=sort_key != "topic", key=f"tp_desc_{sort_key}")
ordered = topics_data.sorted_rows(rows, sort_key, descending)
normal, retry = topics_data.split(ordered)
st.header("Topics")
if normal:
    frame(topics_data.topics_frame(normal))
else:
    st.caption("No topics in this store.")

st.header("Retry and dead-letter topics")
st.caption("%RETRY%<group> holds messages a group's consumers asked to see again; %DLQ%<group> the "
           "ones that failed maxReconsumeTimes (16 by default).")
if not retry:
    st.caption("None in this store: no consumer has asked for a retry or dead-lettered a message.")
else:
    frame(topics_data.topics_frame(retry))
    names = [r["topic"] for r in retry]
    chosen = st.selectbox("Show the messages of", names, key="tp_retry_topic")
    queues = sorted(q for t, q in store.queues() if t == chosen)
    messages = []
    try:
        for queue_id in queues:
            messages += browse.page_forward(store, chosen, queue_id, 0, 20).messages
    except EXPECTED_ERRORS as error:
        user_error(error)
    if messages:
        say("caption", "The first {} message(s) of {} (up to 20 per queue).", len(messages), chosen)
        frame(browse.rows_frame(messages))
        shown = st.selectbox("Message", range(len(messages)), key=f"tp_msg_{chosen}",
                             format_func=lambda i: f"queue {messages[i].queue_id}, offset "
                                                   f"{messages[i].queue_offset}: {messages[i].msg_id}")
        message_details(messages[shown], "tp_body")

st.header("Queues of a topic")
if rows:
    topic = st.selectbox("Topic", [r["topic"] for r in rows], key="tp_topic")
    st.subheader(plain(topic))
    frame(topics_data.status_frame(store, topic))
