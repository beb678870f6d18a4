"""Browse: seek a queue by offset, time or a relative range; page forwards and backwards; filter by
body text; pretty JSON bodies; a live tail that refreshes itself."""

import datetime as dt
import time

import streamlit as st

from app import browse
from app.paths import InputError, parse_int
from app.times import RELATIVE_RANGES_MS, ZONE_NAME, human_ms, relative_range, to_ms
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import body_viewer, frame, plain, say

SEEKS = ("queue offset", "time", "relative range")

st.title("Browse")
handle = current_handle()
store = handle.store
handle.refresh()
queues = store.inspect.served_queue_keys()      # consume queues and [5.x] batch queues
if not queues:
    st.info("This store has no consume queues yet.")
    st.stop()
topics = sorted({t for t, _q in queues})

c1, c2 = st.columns([3, 1])
topic = c1.selectbox("Topic", topics, key="br_topic")
queue_id = c2.selectbox("Queue", [q for t, q in queues if t == topic], key="br_queue")
with st.form("br_form"):
    seek = st.radio("Seek by", SEEKS, horizontal=True, key="br_seek")
    c1, c2, c3, c4 = st.columns(4)
    offset_text = c1.text_input("Queue offset", value="0", key="br_offset")
    day = c2.date_input(f"Date ({ZONE_NAME})", value=dt.date.today(), key="br_day")
    clock = c3.time_input(f"Time ({ZONE_NAME})", value=dt.time(0, 0), key="br_time")
    relative = c4.selectbox("Range", list(RELATIVE_RANGES_MS), key="br_range")
    c5, c6, c7 = st.columns([3, 1, 1])
    needle = c5.text_input("Body contains", key="br_needle", help="Plain text, searched in the body "
                           "read as UTF-8 (bad bytes replaced); empty keeps every message.")
    case_sensitive = c6.checkbox("Match case", key="br_case")
    page_size = c7.number_input("Page size", min_value=1, max_value=browse.MAX_PAGE, value=20,
                                key="br_size")
    sought = st.form_submit_button("Seek")

filters = dict(needle=needle, case_sensitive=case_sensitive)
if sought:
    try:
        begin_ms = end_ms = None
        if seek == "queue offset":
            start = parse_int(offset_text, "Queue offset", minimum=0)
        elif seek == "time":
            start = browse.seek_time(store, topic, int(queue_id), to_ms(day, clock))
        else:
            begin_ms, end_ms = relative_range(relative, int(time.time() * 1000))
            start = browse.seek_time(store, topic, int(queue_id), begin_ms)
        st.session_state.br_view = dict(topic=topic, queue_id=int(queue_id), size=int(page_size),
                                        begin_ms=begin_ms, end_ms=end_ms, **filters)
        st.session_state.br_page = browse.page_forward(
            store, topic, int(queue_id), start, int(page_size), begin_ms=begin_ms, end_ms=end_ms,
            **filters)
    except (InputError, *EXPECTED_ERRORS) as error:
        user_error(error)

page = st.session_state.get("br_page")
view = st.session_state.get("br_view")
if page is not None and (page.topic, page.queue_id) == (topic, int(queue_id)):
    args = dict(begin_ms=view["begin_ms"], end_ms=view["end_ms"], needle=view["needle"],
                case_sensitive=view["case_sensitive"])

    def _turn(step) -> None:
        # A callback: the page changes before the buttons are drawn, so their disabled state
        # belongs to the page shown.
        current = st.session_state.br_page
        try:
            if step < 0:
                new = browse.page_backward(store, current.topic, current.queue_id,
                                           current.start_offset, view["size"], **args)
            else:
                new = browse.page_forward(store, current.topic, current.queue_id,
                                          current.end_offset, view["size"], **args)
        except (InputError, *EXPECTED_ERRORS) as error:
            st.session_state.br_error = error
        else:
            st.session_state.br_page = new

    c1, c2, c3 = st.columns([1, 1, 4])
    c1.button("◀ Previous", key="br_prev", disabled=page.at_start, on_click=_turn, args=(-1,))
    c2.button("Next ▶", key="br_next", disabled=page.at_end, on_click=_turn, args=(1,))
    if "br_error" in st.session_state:
        user_error(st.session_state.pop("br_error"))
    window = ""
    if view["begin_ms"] is not None:
        window = f"; stored {human_ms(view['begin_ms'])} … {human_ms(view['end_ms'])}"
    c3.caption(f"Queue offsets {page.start_offset:,} … {page.end_offset:,} of "
               f"{page.min_offset:,} … {page.max_offset:,}: {len(page.messages)} shown, "
               f"{page.scanned:,} scanned{window}"
               + (f"; body contains “{plain(view['needle'])}”" if view["needle"] else "")
               + ("; the scan cap ended this page early" if page.capped else ""))
    for note in page.notes:
        st.caption(plain(note))
    if page.messages:
        frame(browse.rows_frame(page.messages))
        chosen = st.selectbox("Message", range(len(page.messages)),
                              key=f"br_show_{page.start_offset}_{page.end_offset}",
                              format_func=lambda i: f"offset {page.messages[i].queue_offset}: "
                                                    f"{page.messages[i].msg_id}")
        record = page.messages[chosen]
        say("caption", "stored {}, born {}; tags {}; keys {}", human_ms(record.store_timestamp),
            human_ms(record.born_timestamp), record.tags or "-", record.keys or "-")
        pretty = browse.pretty_json(record.body)
        if pretty is not None and st.toggle("JSON view", value=True, key="br_json"):
            st.code(pretty, language="json")
        else:
            body_viewer(record.body, "br_body")
    else:
        st.caption("No message here matches.")

st.header("Live tail")
live = st.toggle("Follow this queue (refreshes every 2 s)", key="br_live")


@st.fragment(run_every=2 if live else None)
def live_tail() -> None:
    if not live:
        st.caption("Off.")
        return
    try:
        with handle.lock:
            handle.refresh()
            newest = browse.tail(store, topic, int(queue_id), 10)
    except (InputError, *EXPECTED_ERRORS) as error:
        user_error(error)
        return
    st.caption(f"max offset {newest.max_offset:,} at {human_ms(int(time.time() * 1000))}; "
               f"the newest {len(newest.messages)} message(s), newest last")
    frame(browse.rows_frame(newest.messages))


live_tail()
