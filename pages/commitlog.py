"""CommitLog: segment map, record browser by physical offset, annotated hex view of one record."""

import pandas as pd
import streamlit as st

from app import figures
from app.commitlog_data import browse_records, segment_map, snap_to_record
from app.hexview import annotate_record, check_record, hex_rows, record_body
from app.paths import parse_int
from app.record_views import (combined_fields, crc_hex_text, crc_shown, crc_summary, entry_checks,
                              entry_hex_rows, with_entry_columns)
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import body_viewer, frame, plain, say

st.title("CommitLog")
handle = current_handle()
store = handle.store

dledger = store.inspect.dledger_log()
if dledger is not None:
    say("info", "A DLedger log (enableDLegerCommitLog): the segments are the data files of {}, and "
        "each record sits in an entry with a 48-byte header (index, term, pos, size, magic, CRCs); "
        "a record's physical offset is its entry's pos + 48. Ledger entries {} … {}, committed up "
        "to index {} (pos {}), term {}.", dledger.data_dir, dledger.ledger_begin_index,
        dledger.ledger_end_index, dledger.committed_index, dledger.committed_pos,
        dledger.current_term)
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
frame(pd.DataFrame(with_entry_columns(store, rows) if dledger is not None else rows))

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
        entry = store.inspect.dledger_entry(chosen)
        if entry is not None:
            st.subheader("DLedger entry header")
            frame(pd.DataFrame([{"file": entry.file_name, "position": entry.position,
                                 **entry.as_row()}]))
            frame(pd.DataFrame(entry_checks(entry, len(raw), chosen)))
        crc_view = store.inspect.record_hex(chosen)
        if crc_shown(store.config, crc_view):
            st.subheader(plain("Property CRC (__CRC32#)"))
            st.metric(plain("__CRC32#"), "OK" if crc_view.ok else "MISMATCH")
            frame(pd.DataFrame([crc_summary(crc_view)]))
            if not crc_view.ok:
                st.caption("The record's bytes, its CRC field marked (^^ the 10 digits, -- the "
                           "name and separators):")
                st.code(crc_hex_text(crc_view), language=None)
        frame(pd.DataFrame(combined_fields(entry, fields) if entry is not None
                           else [f.__dict__ for f in fields]))
        st.subheader("Hex dump")
        frame(pd.DataFrame(entry_hex_rows(entry, raw, fields) if entry is not None
                           else hex_rows(raw, fields, chosen)))
        st.subheader("Body")
        body_viewer(record_body(raw), "cl_body")
else:
    st.caption("No records on this page.")

end_view = store.inspect.record_hex(bounds["max_phy_offset"])
if crc_shown(store.config, end_view) and not end_view.ok:
    st.header("The record where the log ends")
    say("warning", "Recovery ended the log at {}: the record there fails its property CRC ({}). "
        "A writable open would cut it and every record after it.", f"{end_view.phy_offset:,}",
        end_view.reason)
    frame(pd.DataFrame([crc_summary(end_view)]))
    st.code(crc_hex_text(end_view), language=None)
