"""Overview: the whole log as one strip, the active segment's pointers and their gaps, the newest files
rolling, rates, backlog, flush mode, checkpoint, totals (live). Its height does not grow with the
number of segments."""

import pandas as pd
import streamlit as st

from app import figures, overview_data, segment_figures
from app.commitlog_data import segment_map
from app.health_data import pointer_notes
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
    st.plotly_chart(segment_figures.log_strip_figure(segments, pointers), key="overview_strip")
    zoom, recent = st.columns([3, 2])
    zoom.plotly_chart(segment_figures.pointer_zoom_figure(segments, pointers), key="overview_zoom")
    recent.plotly_chart(segment_figures.recent_segments_figure(segments), key="overview_recent")
    st.caption(f"Log spans {pointers['min_phy_offset']:,} .. {pointers['max_phy_offset']:,}; "
               "the boxed file is the active segment, drawn below with its pointers.")
    # Tabs keep the page's height fixed: only the open tab takes room.
    rates_tab, pointers_tab, flush_tab, checkpoint_tab, events_tab = st.tabs(
        ["Rates", "Pointers", "Flush and status", "Checkpoint", "File events"])
    with rates_tab:
        st.plotly_chart(figures.rates_figure(overview_data.rates(samples)), key="overview_rates")
    with pointers_tab:
        frame(pd.DataFrame([pointers]))
        for note in pointer_notes(store, store.checkpoint.confirm_phy_offset
                                  if store.style == "5.x" else None):
            st.caption(note)
    with flush_tab:
        frame(pd.DataFrame(list({**overview_data.flush_settings(store),
                                 **overview_data.status_flags(store)}.items()),
                           columns=["setting", "value"]))
    with checkpoint_tab:
        frame(overview_data.checkpoint_rows(store))
    with events_tab:
        events = handle.watcher.recent() if handle.watcher is not None else []
        if handle.watcher is None:
            st.caption("No file watcher for this store.")
        elif events:
            frame(pd.DataFrame([{"time": overview_data.format_ms(t), "event": k, "path": p}
                                for t, k, p in events]), height=240)
        else:
            st.caption("No files created or deleted since the store was opened.")

live_panel()
