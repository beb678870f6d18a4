"""CommitLog: segment map, record browser by physical offset, annotated hex view of one record."""

import pandas as pd
import streamlit as st

from app import figures
from app.commitlog_data import browse_records, segment_map, snap_to_record
from app.hexview import annotate_record, check_record, hex_rows, record_body
from app.paths import parse_int
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import body_viewer, frame

st.title("CommitLog")
handle = current_handle()
store = handle.store

segments = segment_map(store, handle.segment_cache)
st.plotly_chart(figures.segment_fill_figure(segments), key="cl_fill")
frame(pd.DataFrame([{**s.__dict__, "fill_%": round(100 * s.fill_ratio, 1)} for s in segments]))

st.header("Records")
bounds = store.pointers()
st.caption(f"Readable physical offsets: {bounds['min_phy_offset']:,} … {bounds['max_phy_offset']:,}")
if "cl_start" not in st.session_state:
    st.session_state.cl_start = bounds["min_phy_offset"]
    st.session_state.cl_history = []
cols = st.columns([2, 1, 1, 1, 1])
typed = cols[0].text_input("Physical offset", value=str(st.session_state.cl_start), key="cl_offset")
page_size = cols[1].number_input("Per page", min_value=1, max_value=500, value=25, key="cl_page")
go_clicked = cols[2].button("Go", key="cl_go")
prev_clicked = cols[3].button("Previous page", key="cl_prev")
next_clicked = cols[4].button("Next page", key="cl_next")
try:
    if go_clicked:
        wanted = parse_int(typed, "Physical offset", minimum=0)
        st.session_state.cl_start = snap_to_record(store, wanted)
        st.session_state.cl_history = []
        if st.session_state.cl_start != wanted:
            st.info(f"{wanted:,} is inside a record; showing from its start "
                    f"{st.session_state.cl_start:,}.")
    rows, next_offset = browse_records(store, st.session_state.cl_start, int(page_size))
    if next_clicked and next_offset > st.session_state.cl_start:
        st.session_state.cl_history.append(st.session_state.cl_start)
        st.session_state.cl_start = next_offset
        rows, next_offset = browse_records(store, st.session_state.cl_start, int(page_size))
    if prev_clicked and st.session_state.cl_history:
        st.session_state.cl_start = st.session_state.cl_history.pop()
        rows, next_offset = browse_records(store, st.session_state.cl_start, int(page_size))
except EXPECTED_ERRORS as error:
    user_error(error)
    rows, next_offset = [], st.session_state.cl_start
st.caption(f"From {st.session_state.cl_start:,}; the next page starts at {next_offset:,}.")
frame(pd.DataFrame(rows))

st.header("One record, byte by byte")
record_offsets = [r["phy_offset"] for r in rows if r.get("kind") == "RECORD"]
if record_offsets:
    chosen = st.selectbox("Record at physical offset", record_offsets, key="cl_record")
    raw = store.inspect.record_bytes(chosen)
    try:
        fields = annotate_record(raw)
        check = check_record(raw, chosen)
    except EXPECTED_ERRORS as error:
        user_error(error)
    else:
        c1, c2, c3 = st.columns(3)
        c1.metric("BODYCRC", "OK" if check.crc_ok else "MISMATCH",
                  f"stored {check.stored_crc} / computed {check.computed_crc}", delta_color="off")
        c2.metric("msgId", check.msg_id[:16] + "…")
        c3.metric("msgId decodes to", f"{check.msg_id_host} @ {check.msg_id_phy_offset:,}")
        st.text(f"msgId {check.msg_id}")
        frame(pd.DataFrame([f.__dict__ for f in fields]))
        st.subheader("Hex dump")
        frame(pd.DataFrame(hex_rows(raw, fields, chosen)))
        st.subheader("Body")
        body_viewer(record_body(raw), "cl_body")
else:
    st.caption("No records on this page.")
