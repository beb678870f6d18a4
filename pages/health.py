"""Health: the store's cross-checks (MessageStore.check()) as a table with severities; for a store
left with an abort file by someone else, what a broker restart would do."""

import streamlit as st

from app import figures, restart_view
from app.health_data import findings_frame, pointer_notes
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame, plain

st.title("Health")
handle = current_handle()
store = handle.store
st.caption("Cross-checks of the commit log, consume queues, index and checkpoint (read-only).")
# The findings belong to one store: kept with its key, and computed again for any other store
# (they used to stay on screen, from the previous store, until the button was pressed).
kept = st.session_state.get("health_findings")
if st.button("Run the checks", key="health_run") or kept is None or kept[0] != handle.key:
    try:
        with handle.lock:
            handle.refresh()
            kept = (handle.key, findings_frame(store.check(), store.config.store_path_root_dir,
                                               hosted=not handle.read_only))
    except EXPECTED_ERRORS as error:
        user_error(error)
        kept = (handle.key, None)
    st.session_state.health_findings = kept
findings = kept[1]
if findings is not None:
    if findings.empty:
        st.success("No findings: everything cross-checks.")
    else:
        st.plotly_chart(figures.findings_figure(findings), key="health_fig")
        frame(findings)
# The checkpoint holds confirmPhyOffset in the 5.x format only (4.9.7 writes three longs).
for note in pointer_notes(store, store.checkpoint.confirm_phy_offset if store.style == "5.x" else None):
    st.caption(note)

if handle.read_only:
    try:
        with handle.lock:
            plan = store.inspect.restart_plan()
    except EXPECTED_ERRORS as error:
        user_error(error)
        plan = None
    if plan is not None and plan.abort_present:
        st.header("Crash diagnosis: what a broker restart would do")
        st.caption("The abort file is present and this dashboard does not host the store: the last "
                   "broker that owned it did not shut down cleanly. Computed read-only, following "
                   "RocketMQ 4.9.7 (DefaultMessageStore.load/recover, CommitLog.recoverAbnormally, "
                   "IndexService.load).")
        for line in restart_view.summary(plan):
            st.markdown("- " + plain(line))
        if plan.changed_queues:
            frame(restart_view.queues_frame(plan))
        if plan.index_files_dropped:
            frame(restart_view.index_frame(plan))
