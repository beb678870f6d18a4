"""ConsumeQueue: per-queue offsets and time span, raw units beside their records, consumer lag,
jumps by offset or time, and RocksDB figures for a RocksDB backend."""

import datetime as dt

import streamlit as st

from app import figures
from app.overview_data import format_ms
from app.paths import parse_int
from app.queues_data import (default_jump_time, facts_rows, lag_table, queue_table,
                             queue_time_span, rocksdb_summary, units_with_records)
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame

st.title("ConsumeQueue")
handle = current_handle()
store = handle.store
handle.refresh()

backend = store.config.store_type
st.caption(f"Backend: {'RocksDB (spec §13)' if backend == 'defaultRocksDB' else 'files (spec §4)'}")
queues = queue_table(store)
if queues.empty:
    st.info("This store has no consume queues yet.")
else:
    st.plotly_chart(figures.queue_depth_figure(queues), key="cq_depth")
    frame(queues)

st.header("Consumer lag")
lag = lag_table(store)
if lag.empty:
    st.caption("No consumer offsets committed in this store.")
else:
    st.plotly_chart(figures.lag_figure(lag), key="cq_lag")
    frame(lag)

st.header("Units")
if not queues.empty:
    pairs = list(zip(queues["topic"], queues["queue_id"]))
    cols = st.columns([3, 2, 1])
    topic, queue_id = cols[0].selectbox("Queue", pairs, format_func=lambda p: f"{p[0]} / {p[1]}",
                                        key="cq_queue")
    row = queues[(queues["topic"] == topic) & (queues["queue_id"] == queue_id)].iloc[0]
    jump = cols[1].radio("Jump by", ["queue offset", "store time"], horizontal=True, key="cq_jump")
    count = cols[2].number_input("Units", min_value=1, max_value=200, value=20, key="cq_count")
    start = int(row["min_offset"])
    try:
        if jump == "queue offset":
            start = parse_int(st.text_input("Queue offset", value=str(start), key="cq_offset"),
                              "Queue offset", minimum=0)
        else:
            span = queue_time_span(store, topic, int(queue_id), int(row["min_offset"]),
                                   int(row["max_offset"]))
            default = default_jump_time(span, int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000))
            if span is not None:
                st.caption(f"This queue's messages were stored from {format_ms(span[0])} to "
                           f"{format_ms(span[1])}.")
            c1, c2, c3 = st.columns(3)
            # Keyed per queue, so another queue starts at its own first store time.
            day = c1.date_input("Date (UTC)", value=default.date(), key=f"cq_date_{topic}_{queue_id}")
            clock = c2.time_input("Time (UTC)", value=default.time(), key=f"cq_time_{topic}_{queue_id}",
                                  step=60)
            boundary = c3.radio("Boundary", ["lower", "upper"], horizontal=True, key="cq_boundary",
                                help="lower: first message stored at or after the time; "
                                     "upper: last message stored at or before it.")
            moment = dt.datetime.combine(day, clock, tzinfo=dt.timezone.utc)
            timestamp_ms = int(moment.timestamp() * 1000)
            start = store.get_offset_in_queue_by_time(topic, int(queue_id), timestamp_ms, boundary)
            st.info(f"{boundary.upper()} offset for {moment:%Y-%m-%d %H:%M} UTC "
                    f"({timestamp_ms} ms): queue offset {start}")
        units = units_with_records(store, topic, int(queue_id), start, int(count))
    except EXPECTED_ERRORS as error:
        user_error(error)
    else:
        if units.empty:
            st.caption("No units there (offset outside the queue, or its file expired).")
        else:
            st.caption("Each 20-byte unit: 8 bytes physical offset, 4 bytes size, 8 bytes tagsCode; "
                       "a unit never crosses a consume-queue file, so a page may stop early.")
            frame(units)

if backend == "defaultRocksDB":
    st.header("RocksDB")
    try:
        summary = rocksdb_summary(store)
    except EXPECTED_ERRORS as error:
        user_error(error)
    else:
        left, right = st.columns([2, 3])
        with left:
            frame(facts_rows(summary.facts))
        with right:
            st.plotly_chart(figures.rocksdb_files_figure(summary.files), key="cq_rocks")
        st.subheader("Files")
        frame(summary.files)
        st.subheader("Properties per column family")
        st.caption("As rocksdict reports them (RocksDB integer properties; '-' when unknown). "
                   "A read-only store shows the snapshot taken at open or at the last refresh.")
        frame(summary.properties)
