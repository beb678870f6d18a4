"""ConsumeQueue: per-queue offsets and time span, raw units beside their records, consumer lag,
jumps by offset or time, and RocksDB figures for a RocksDB backend."""

import datetime as dt

import streamlit as st

from app import figures
from app.batch_data import (batch_findings_table, batch_queue_table, batch_units_table,
                            has_batch_queues)
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

if has_batch_queues(store):
    st.header("Batch consume queues")
    st.caption("[5.x] BatchConsumeQueue: one 46-byte unit per record of a batch topic (topics.json "
               "queue.type=BatchCQ); a unit covers messages msgBaseOffset .. msgBaseOffset + "
               "batchSize - 1, so offsets here count messages.")
    batches = batch_queue_table(store)
    frame(batches)
    if not batches["batch_topic"].all():
        st.warning("batch_topic False: topics.json does not make that topic a batch topic, so a "
                   "broker does not serve those units.")
    pairs = list(zip(batches["topic"], batches["queue_id"]))
    cols = st.columns([3, 2, 1])
    b_topic, b_queue = cols[0].selectbox("Batch queue", pairs,
                                         format_func=lambda p: f"{p[0]} / {p[1]}", key="bcq_queue")
    b_row = batches[(batches["topic"] == b_topic) & (batches["queue_id"] == b_queue)].iloc[0]
    b_count = cols[2].number_input("Units", min_value=1, max_value=200, value=20, key="bcq_count")
    try:
        b_text = cols[1].text_input("Message offset", value=str(max(int(b_row["min_offset"]), 0)),
                                    key=f"bcq_offset_{b_topic}_{b_queue}")
        b_start = parse_int(b_text, "Message offset", minimum=0)
        b_units, b_more = batch_units_table(store, b_topic, int(b_queue), b_start, int(b_count))
    except EXPECTED_ERRORS as error:
        user_error(error)
    else:
        st.caption("From the unit holding that message offset, following the files. Each unit: "
                   "phyOffset 8, size 4, tagsCode 8, storeTime 8, msgBaseOffset 8, batchSize 2, "
                   "compactedOffset 4 (written -1), reserved 4 bytes; the record it points to must "
                   "be that size, of this queue, with INNER_BASE / INNER_NUM equal to the unit's.")
        frame(b_units)
        if b_more:
            st.caption("More units follow: raise the count or start at a later offset.")
    if st.button("Check this batch queue", key="bcq_check"):
        try:
            findings = batch_findings_table(store, b_topic, int(b_queue))
        except EXPECTED_ERRORS as error:
            user_error(error)
        else:
            if findings.empty:
                st.success("The store check finds nothing wrong in this queue's files.")
            else:
                frame(findings)

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
