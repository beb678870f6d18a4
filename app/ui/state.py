"""The one long-lived `StoreRegistry` (st.cache_resource, shared by all sessions) and the store the
current session looks at."""

from __future__ import annotations

import atexit

import streamlit as st

from app.paths import InputError
from app.registry import StoreHandle, StoreRegistry
from app.ui.widgets import plain
from store.errors import StoreError

SESSION_KEY = "store_key"


def _release(registry: StoreRegistry) -> None:
    registry.close_all()


@st.cache_resource(show_spinner=False, on_release=_release)
def get_registry() -> StoreRegistry:
    registry = StoreRegistry()
    atexit.register(registry.close_all)   # clean shutdown of hosted stores when the server exits
    return registry


def current_handle() -> StoreHandle:
    """The store this session shows (the sample's scratch copy until something else is picked)."""
    registry = get_registry()
    handle = registry.get(st.session_state.get(SESSION_KEY))
    if handle is None:
        handle = registry.default()
        st.session_state[SESSION_KEY] = handle.key
    return handle


def select(handle: StoreHandle) -> None:
    st.session_state[SESSION_KEY] = handle.key


def user_error(error: Exception) -> None:
    """A clear message for bad input or a store problem (never a traceback in the browser). The
    message names paths and topics the user typed: shown as plain text, never as markdown."""
    if isinstance(error, InputError):
        st.warning(plain(error))
    else:
        st.error(f"{type(error).__name__}: {plain(error)}")


EXPECTED_ERRORS = (InputError, StoreError, OSError, ValueError)
