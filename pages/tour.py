"""Tour: one message's life and what the store does around it, step by step, each step drawn.

Deterministic: every step (and every replay) is computed from nothing on the tour's own scratch store,
so Back, Replay and the step picker always show the same bytes."""

import streamlit as st

from app.tour import TITLES, TOUR_CLOCK_MS, run_tour
from app.ui.state import EXPECTED_ERRORS, get_registry, user_error
from app.ui.widgets import frame

st.title("Tour")
registry = get_registry()
if "tour_root" not in st.session_state:
    st.session_state.tour_root = registry.scratch_dir("tour")
    st.session_state.tour_step = 0
    st.session_state.tour_replays = 0


def go_to(step_number: int) -> None:
    """Button callback: runs before the page is drawn, so Back/Next show the new step's state."""
    st.session_state.tour_step = max(0, min(step_number, len(TITLES) - 1))


def replay() -> None:
    st.session_state.tour_replays = st.session_state.get("tour_replays", 0) + 1


current = st.session_state.tour_step
c1, c2, c3, c4 = st.columns([1, 1, 1, 4])
c1.button("Back", key="tour_back", disabled=current == 0, on_click=go_to, args=(current - 1,))
c2.button("Next", key="tour_next", disabled=current >= len(TITLES) - 1, on_click=go_to,
          args=(current + 1,))
c3.button("Replay", key="tour_replay", help="Run this step again from an empty store.",
          on_click=replay)
c4.progress((current + 1) / len(TITLES), text=f"Step {current + 1} of {len(TITLES)}")
with st.expander("All steps"):
    for number, title in enumerate(TITLES):
        st.button(f"{number + 1}. {title}", key=f"tour_goto_{number}", disabled=number == current,
                  on_click=go_to, args=(number,))
step = current
try:
    page = run_tour(st.session_state.tour_root, step)
except EXPECTED_ERRORS as error:
    user_error(error)
else:
    st.header(f"{step + 1}. {page.title}")
    st.write(page.text)
    for number, figure in enumerate(page.figures):
        st.plotly_chart(figure, key=f"tour_fig_{step}_{number}")
    left, right = st.columns([2, 3])
    with left:
        frame([{"what": k, "value": str(v)} for k, v in page.facts.items()])
    with right:
        if page.table is not None:
            frame(page.table, height=260)
    st.caption(f"Replayed from an empty store {st.session_state.get('tour_replays', 0) + 1} time(s) "
               f"this session; sha256 of the log's bytes after this step: {page.fingerprint[:16]}…")
st.caption(f"The tour runs on its own scratch store with a fixed clock ({TOUR_CLOCK_MS} ms) and "
           "dispatch driven by hand, so every replay produces the same bytes.")
