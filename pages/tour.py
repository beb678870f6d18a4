"""Tour: one message's life, step by step (deterministic; back replays the steps from scratch)."""

import streamlit as st

from app.tour import TITLES, run_tour
from app.ui.state import EXPECTED_ERRORS, get_registry, user_error
from app.ui.widgets import frame

st.title("Tour")
registry = get_registry()
if "tour_root" not in st.session_state:
    st.session_state.tour_root = registry.scratch_dir("tour")
    st.session_state.tour_step = 0
step = st.session_state.tour_step
c1, c2, c3 = st.columns([1, 1, 4])
if c1.button("Back", key="tour_back", disabled=step == 0):
    st.session_state.tour_step = step = step - 1
if c2.button("Next", key="tour_next", disabled=step >= len(TITLES) - 1):
    st.session_state.tour_step = step = step + 1
c3.progress((step + 1) / len(TITLES), text=f"Step {step + 1} of {len(TITLES)}")
try:
    page = run_tour(st.session_state.tour_root, step)
except EXPECTED_ERRORS as error:
    user_error(error)
else:
    st.header(f"{step + 1}. {page.title}")
    st.write(page.text)
    frame([{"what": k, "value": str(v)} for k, v in page.facts.items()])
    if page.table is not None:
        frame(page.table)
st.caption("The tour runs on its own scratch store with a fixed clock (1700000000000 ms) and "
           "dispatch driven by hand, so every replay produces the same bytes.")
