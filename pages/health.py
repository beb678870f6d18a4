"""Health: the store's cross-checks (MessageStore.check()) as a table with severities."""

import streamlit as st

from app import figures
from app.health_data import findings_frame
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame

st.title("Health")
handle = current_handle()
store = handle.store
st.caption("Cross-checks of the commit log, consume queues, index and checkpoint (read-only).")
if st.button("Run the checks", key="health_run") or "health_findings" not in st.session_state:
    try:
        with handle.lock:
            handle.refresh()
            st.session_state.health_findings = findings_frame(store.check(),
                                                             store.config.store_path_root_dir)
    except EXPECTED_ERRORS as error:
        user_error(error)
        st.session_state.health_findings = None
findings = st.session_state.get("health_findings")
if findings is not None:
    if findings.empty:
        st.success("No findings: everything cross-checks.")
    else:
        st.plotly_chart(figures.findings_figure(findings), key="health_fig")
        frame(findings)
