"""The sidebar store picker: switch between open stores, open another directory read-only or hosted,
close one."""

from __future__ import annotations

import streamlit as st

from app.paths import resolve_file, resolve_store_dir
from app.registry import MODES
from app.ui.state import EXPECTED_ERRORS, current_handle, get_registry, select, user_error
from app.ui.widgets import plain


def _switch() -> None:
    handle = get_registry().get(st.session_state.get("picker_choice"))
    if handle is not None:
        select(handle)


def store_picker() -> None:
    registry = get_registry()
    current = current_handle()
    handles = registry.handles()
    # Stores are told apart by their real path. The selectbox sends its choice back as the shown
    # text, so two stores shown alike ("store [read-only]" for two brokers' default folders) would
    # silently switch to the first of them on the next page.
    labels = registry.display_names()
    keys = list(labels)
    with st.sidebar:
        st.subheader("Store")
        # Keep the widget in step with a store chosen elsewhere (opened here, the recovery lab).
        if st.session_state.get("picker_choice") != current.key:
            st.session_state["picker_choice"] = current.key
        st.selectbox("Open stores", keys, format_func=lambda k: labels.get(k, k),
                     key="picker_choice", on_change=_switch,
                     help="Each store is named by the shortest end of its real path that tells it "
                          "apart from the other open stores; the full path is below.")
        st.text(current.root)
        st.caption(f"config: {plain(current.config_source)}")
        with st.expander("Open another store"):
            with st.form("open_store_form"):
                path = st.text_input("Store directory", key="picker_path",
                                     help="The store root (holding commitlog/, consumequeue/, ...).")
                mode = st.radio("Mode", MODES, key="picker_mode", horizontal=True,
                                help="read-only: a live broker's directory, never written. "
                                     "hosted: this engine owns the directory.")
                props = st.text_input("store.properties (optional)", key="picker_props")
                submitted = st.form_submit_button("Open")
            if submitted:
                try:
                    root = resolve_store_dir(path, must_exist=(mode == "read-only"))
                    props_path = resolve_file(props) if props.strip() else None
                    handle = registry.open(root, mode, properties_path=props_path)
                    select(handle)
                    st.rerun()
                except EXPECTED_ERRORS as error:
                    user_error(error)
        if st.button("Close this store", key="picker_close", disabled=len(handles) <= 1 and
                     current.source_root == registry.sample_root):
            registry.close(current.key)
            st.session_state.pop("store_key", None)
            st.rerun()
