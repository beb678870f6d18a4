"""Query: by key, msgId, unique key, queue offset, physical offset or time range; capped; export."""

import datetime as dt

import streamlit as st

from app import query as q
from app.paths import InputError, parse_int
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, message_details, plain

st.title("Query")
handle = current_handle()
store = handle.store
handle.refresh()
topics = store.topic_names()
last = st.session_state.get("pr_last", {})

kind = st.radio("Find by", q.KINDS, horizontal=True, key="q_kind")


def _ms(day, clock) -> int:
    return int(dt.datetime.combine(day, clock, tzinfo=dt.timezone.utc).timestamp() * 1000)


with st.form("query_form"):
    topic = st.text_input("Topic", value=last.get("topic") or (topics[0] if topics else ""),
                          key="q_topic") if kind not in ("msgId", "physical offset") else ""
    value = ""
    if kind == "key":
        value = st.text_input("Key", value=(last.get("keys") or "").split(" ")[0], key="q_key")
        use_range = st.checkbox("Limit to a time range", key="q_use_range")
    elif kind == "msgId":
        value = st.text_input("Offset msgId (32 or 56 hex characters)",
                              value=last.get("msg_id") or "", key="q_msgid")
    elif kind == "unique key":
        value = st.text_input("UNIQ_KEY", key="q_uniq")
    elif kind == "queue offset":
        c1, c2, c3 = st.columns(3)
        queue_text = c1.text_input("Queue id", value="0", key="q_queue")
        value = c2.text_input("Queue offset", value="0", key="q_qoffset")
        count_text = c3.text_input("Messages", value="16", key="q_count")
    elif kind == "physical offset":
        value = st.text_input("Physical offset", value="0", key="q_phy")
    if kind in ("time range", "key"):
        c1, c2, c3, c4 = st.columns(4)
        begin_day = c1.date_input("From (UTC)", value=dt.date(2020, 1, 1), key="q_begin_day")
        begin_time = c2.time_input("at", value=dt.time(0, 0), key="q_begin_time")
        end_day = c3.date_input("To (UTC)", value=dt.date(2035, 1, 1), key="q_end_day")
        end_time = c4.time_input("at ", value=dt.time(0, 0), key="q_end_time")
    max_num = st.number_input("Cap (max results)", min_value=1, max_value=q.MAX_RESULTS, value=32,
                              key="q_cap")
    submitted = st.form_submit_button("Search")

if submitted:
    try:
        if kind == "key":
            begin, end = (_ms(begin_day, begin_time), _ms(end_day, end_time)) if use_range else \
                (0, q.FOREVER_MS)
            outcome = q.by_key(store, topic.strip(), value.strip(), begin, end, int(max_num))
        elif kind == "msgId":
            outcome = q.by_msg_id(store, value)
        elif kind == "unique key":
            outcome = q.by_unique_key(store, topic.strip(), value.strip())
        elif kind == "queue offset":
            outcome = q.by_queue_offset(store, topic.strip(), parse_int(queue_text, "Queue id", minimum=0),
                                        parse_int(value, "Queue offset", minimum=0),
                                        min(int(max_num), parse_int(count_text, "Messages", minimum=1)))
        elif kind == "physical offset":
            outcome = q.by_phy_offset(store, parse_int(value, "Physical offset", minimum=0))
        else:
            outcome = q.by_time_range(store, topic.strip(), _ms(begin_day, begin_time),
                                      _ms(end_day, end_time), int(max_num))
        st.session_state.q_outcome = outcome
        st.session_state.q_outcome_seq = st.session_state.get("q_outcome_seq", 0) + 1
    except (InputError, *EXPECTED_ERRORS) as error:
        user_error(error)
        st.session_state.pop("q_outcome", None)

outcome = st.session_state.get("q_outcome")
if outcome is not None:
    for note in outcome.notes:
        st.info(plain(note))
    count = len(outcome.messages)
    st.subheader(f"{count} message(s)" + (" — the cap cut the result short; narrow the search"
                                          if outcome.capped else ""))
    if count:
        frame(q.results_frame(outcome.messages))
        c1, c2 = st.columns(2)
        c1.download_button("Export CSV", q.export_csv(outcome.messages), "messages.csv", "text/csv",
                           key="q_csv")
        c2.download_button("Export JSON", q.export_json(outcome.messages), "messages.json",
                           "application/json", key="q_json")
        # A new widget per result: the browser keeps a selectbox's shown text across reruns, so one
        # key for every result kept naming the previous result's message over the new details.
        chosen = st.selectbox("Show message", range(count),
                              key=f"q_show_{st.session_state.get('q_outcome_seq', 0)}",
                              format_func=lambda i: f"{outcome.messages[i].msg_id} "
                                                    f"(queue {outcome.messages[i].queue_id}, "
                                                    f"offset {outcome.messages[i].queue_offset})")
        message_details(outcome.messages[chosen], "q_body")
