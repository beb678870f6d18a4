"""Overview: pointers on the segment files, rates, backlog, flush mode, checkpoint, totals (live)."""

import pandas as pd
import streamlit as st

from app import figures, overview_data
from app.commitlog_data import segment_map
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame

st.title("Overview")
handle = current_handle()
live = st.toggle("Live update (every 2 s)", value=True, key="overview_live")


@st.fragment(run_every=2 if live else None)
def live_panel() -> None:
    store = handle.store
    try:
        handle.refresh()
        samples = handle.sample()
        pointers = store.pointers()
        totals = overview_data.totals(store)
        segments = segment_map(store, handle.segment_cache)
    except EXPECTED_ERRORS as error:
        user_error(error)
        return
    cols = st.columns(6)
    for col, (name, value) in zip(cols, totals.items()):
        col.metric(*overview_data.metric_tile(name, value, is_bytes=(name == "bytes")))
    cols[5].metric(*overview_data.metric_tile("dispatch backlog", store.dispatch_behind_bytes(),
                                              is_bytes=True))
    st.plotly_chart(figures.segment_pointer_figure(segments, pointers), key="overview_segments")
    frame(pd.DataFrame([pointers]))
    st.plotly_chart(figures.rates_figure(overview_data.rates(samples)), key="overview_rates")
    left, right = st.columns(2)
    with left:
        st.subheader("Flush and status")
        frame(pd.DataFrame(list({**overview_data.flush_settings(store),
                                 **overview_data.status_flags(store)}.items()),
                           columns=["setting", "value"]))
    with right:
        st.subheader("Checkpoint")
        frame(overview_data.checkpoint_rows(store))
    if handle.watcher is not None:
        st.subheader("File events (watchdog)")
        events = handle.watcher.recent()
        if events:
            frame(pd.DataFrame([{"time": overview_data.format_ms(t), "event": k, "path": p}
                                for t, k, p in events]))
        else:
            st.caption("No files created or deleted since the store was opened.")


live_panel()
