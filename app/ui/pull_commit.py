"""The Pull page's commit: committing a pull's next offset for its group, guarded.

A commit that would move the group's offset backwards (the group already committed further) makes the
group consume those messages again; it is offered only after a warning and an explicit confirmation.
"""

from __future__ import annotations

import streamlit as st

from app.pull_job import commit_moves_back
from app.ui.state import EXPECTED_ERRORS, user_error
from app.ui.widgets import plain, say


def commit_form(store, read_only: bool, request: dict, new_offset: int) -> None:
    group, topic, queue_id = request["group"], request["topic"], request["queue_id"]
    committed = store.query_consumer_offset(group, topic, queue_id)
    backwards = commit_moves_back(committed, new_offset)
    confirmed = True
    if backwards:
        say("warning", "Committing {} moves group {} BACKWARDS from {} on {} / {}: its consumers would "
                       "receive {} message(s) again.", new_offset, group, committed, topic, queue_id,
            committed - new_offset)
        confirmed = st.checkbox(f"Yes, move {plain(group)} back from {committed} to {new_offset}",
                                key=f"pl_confirm_back_{committed}_{new_offset}")
    label = f"Commit offset {new_offset} for group {plain(group)}"
    if st.button(label, key="pl_commit", disabled=read_only or not confirmed,
                 help="Refused on a read-only store." if read_only else None):
        try:
            store.commit_consumer_offset(group, topic, queue_id, new_offset)
            st.success("Committed (persisted to consumerOffset.json periodically and at shutdown).")
        except EXPECTED_ERRORS as error:
            user_error(error)
