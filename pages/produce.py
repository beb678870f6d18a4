"""Produce: a form for one message or a batch, and a load generator with progress and a stop button."""

import streamlit as st

from app.paths import InputError
from app.produce import SELECTORS, TRANSACTIONS, LoadGenerator, ProduceForm, build_messages
from app.times import human_ms
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, plain

st.title("Produce")
handle = current_handle()
store = handle.store
if handle.read_only:
    st.warning("This store is open read-only: producing is disabled. Pick a hosted store in the "
               "sidebar (the default sample copy is hosted).")

if "pr_prepared_next" in st.session_state:      # set before the widget exists in this run
    st.session_state["pr_prepared"] = st.session_state.pop("pr_prepared_next")

with st.form("produce_form"):
    c1, c2, c3 = st.columns(3)
    topic = c1.text_input("Topic", value="DemoTopic", key="pr_topic")
    selector = c2.selectbox("Queue selection", SELECTORS, key="pr_selector")
    queue_id = c3.number_input("Queue id", min_value=0, max_value=1023, value=0, key="pr_queue")
    c4, c5, c6 = st.columns(3)
    queue_count = c4.number_input("Queues (for hash / round robin)", min_value=1, max_value=64,
                                  value=4, key="pr_queue_count")
    tags = c5.text_input("Tags", value="TagA", key="pr_tags")
    keys = c6.text_input("Keys (space-separated)", key="pr_keys")
    properties_text = st.text_area("Properties (name=value per line)", key="pr_props", height=80)
    body_text = st.text_area("Body text", value="hello", key="pr_body", height=80)
    body_file = st.file_uploader("…or a body file", key="pr_file")
    c7, c8 = st.columns(2)
    flag = c7.number_input("Flag", value=0, step=1, key="pr_flag")
    batch = c8.number_input("Batch size (one put of N messages)", min_value=1, max_value=256,
                            value=1, key="pr_batch")
    c9, c10 = st.columns(2)
    transaction = c9.selectbox("Transaction (sysFlag bits 2-3)", list(TRANSACTIONS), key="pr_tx",
                               help="prepared 0x4, commit 0x8, rollback 0xC; a PREPARED message is "
                                    "not dispatched to its consume queue until its COMMIT")
    prepared_offset = c10.number_input(
        "Prepared offset (commit / rollback)", min_value=0, step=1, key="pr_prepared",
        help="the PREPARED record's physical offset, which the COMMIT / ROLLBACK record carries; "
             "prefilled with the last PREPARED put of this session")
    sent = st.form_submit_button("Send", disabled=handle.read_only)

if sent:
    body = body_file.getvalue() if body_file is not None else body_text.encode("utf-8")
    form = ProduceForm(topic, int(queue_id), selector, int(queue_count), tags, keys, properties_text,
                       body, int(flag), int(batch), transaction, int(prepared_offset))
    sequence = st.session_state.get("pr_sequence", 0)
    st.session_state.pr_sequence = sequence + 1
    try:
        messages = build_messages(form, sequence)
        result = store.put_messages(messages) if len(messages) > 1 else store.put_message(messages[0])
    except EXPECTED_ERRORS as error:
        user_error(error)
    else:
        if result.ok:
            st.success(f"{result.status.value}: {result.message_count} message(s) stored.")
        else:
            st.error(f"{result.status.value}: {plain(result.error)}")
        frame([{"status": result.status.value, "physical offset": result.wrote_offset,
                "bytes": result.wrote_bytes, "queue": messages[0].queue_id,
                "queue offset": result.queue_offset, "store time": human_ms(result.store_timestamp),
                "msgId": msg_id} for msg_id in (result.msg_ids or (result.msg_id,))])
        if result.ok and transaction == "prepared":
            st.session_state.pr_prepared_next = result.wrote_offset
            st.info(f"PREPARED at physical offset {result.wrote_offset:,}: the prepared offset of its "
                    f"COMMIT or ROLLBACK (filled in on the next run of the form).")
        st.session_state.pr_last = {"topic": messages[0].topic, "queue_id": messages[0].queue_id,
                                    "keys": keys, "msg_id": result.msg_id}

st.header("Load generator")
generator = handle.load_generator
busy = generator is not None and generator.running
with st.form("load_form"):
    c1, c2, c3, c4, c5 = st.columns(5)
    load_topics = c1.text_input("Topics (comma-separated)", value="LoadTopic", key="lg_topics")
    load_queues = c2.number_input("Queue spread", min_value=1, max_value=64, value=4, key="lg_queues")
    rate = c3.number_input("Rate (msgs/s)", min_value=1, max_value=2000, value=50, key="lg_rate")
    size = c4.number_input("Body bytes", min_value=0, max_value=65536, value=256, key="lg_size")
    total = c5.number_input("Messages", min_value=1, max_value=100000, value=500, key="lg_total")
    start = st.form_submit_button("Start", disabled=handle.read_only or busy)
if start and not busy:   # `busy` guards a second click that raced the disabled state
    try:
        topics = [t.strip() for t in load_topics.split(",") if t.strip()]
        handle.load_generator = LoadGenerator(store, topics=topics, queues=int(load_queues),
                                              rate_per_s=float(rate), body_bytes=int(size),
                                              total=int(total))
    except (InputError, *EXPECTED_ERRORS) as error:
        user_error(error)
    else:
        st.rerun()   # redraw the form with Start disabled and the progress ticking

# Ticks only while a generator runs; the run that sees it finish redraws the whole page (Start
# enabled again) and stops the timer.
_ticking = handle.load_generator is not None and handle.load_generator.running


@st.fragment(run_every=1 if _ticking else None)
def load_progress() -> None:
    running = handle.load_generator
    if running is None:
        st.caption("Not running.")
        return
    state = "running" if running.running else ("stopped" if running.stopped else "finished")
    st.progress(running.progress, text=f"{running.sent:,} sent, {running.failed:,} failed of "
                                       f"{running.total:,} ({state}; {running.rate_text})")
    if running.last_error:
        st.caption(f"last error: {plain(running.last_error)}")
    if running.running:
        if st.button("Stop", key="lg_stop"):
            running.stop()
            st.rerun()
    elif _ticking:
        st.rerun()


load_progress()
