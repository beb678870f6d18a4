"""Index: per-file header, slot occupancy and chain lengths, and a key lookup walked step by step."""

import streamlit as st

from app import figures, index_figures
from app.index_data import entries_per_slot, header_table, occupancy_grid, walk_key
from app.ui.state import EXPECTED_ERRORS, current_handle, user_error
from app.ui.widgets import frame

st.title("Index")
handle = current_handle()
store = handle.store
handle.refresh()
slots = store.config.max_hash_slot_num
headers = header_table(store)
if headers.empty:
    st.info("This store has no index files.")
else:
    st.caption(f"{len(headers)} file(s); {slots:,} hash slots and {store.config.max_index_num:,} "
               "entries per file (spec §5).")
    frame(headers)
    name = st.selectbox("Index file", list(headers["file"]), index=len(headers) - 1, key="ix_file")
    try:
        per_slot = entries_per_slot(store.inspect.index_entries(name), slots)
    except EXPECTED_ERRORS as error:
        user_error(error)
    else:
        grid, per_cell = occupancy_grid(per_slot)
        left, right = st.columns(2)
        title = "Entries per slot" + (f" (bins of {per_cell} slots)" if per_cell > 1 else "")
        left.plotly_chart(figures.slot_heatmap(grid, title), key="ix_heat")
        right.plotly_chart(figures.chain_length_histogram(per_slot), key="ix_hist")
        st.caption(f"{int((per_slot > 0).sum()):,} of {slots:,} slots occupied; longest chain "
                   f"{int(per_slot.max()) if per_slot.size else 0}.")

st.header("Look up a key")
topics = store.topic_names()
with st.form("ix_lookup"):
    cols = st.columns(2)
    topic = cols[0].selectbox("Topic", topics, key="ix_topic") if topics else \
        cols[0].text_input("Topic", key="ix_topic_text")
    key = cols[1].text_input("Key (KEYS token or UNIQ_KEY)", key="ix_key")
    submitted = st.form_submit_button("Walk the index")
if submitted:
    if not key.strip() or not topic:
        st.warning("Give a topic and a key.")
    else:
        try:
            walk = walk_key(store, topic, key.strip())
        except EXPECTED_ERRORS as error:
            user_error(error)
        else:
            st.text(f"1. key string   {walk.key_string}\n"
                    f"2. Java hash    {walk.java_hash}\n"
                    f"3. keyHash      {walk.key_hash}  (abs of the hash)\n"
                    f"4. slot         {walk.slot}  (keyHash % {slots})")
            if walk.steps.empty:
                st.info("The slot is empty in every file: the key was never indexed.")
            else:
                st.subheader("5. The slot and its chain, newest file first")
                st.plotly_chart(index_figures.chain_walk_figure(walk), key="ix_walk")
                with st.expander(f"Every hop as a table ({len(walk.steps)} rows)"):
                    frame(walk.steps)
                if walk.collisions:
                    st.warning(f"{walk.collisions} hop(s) had the same hash but another key: "
                               "hash collisions, filtered out by checking the record's keys.")
            st.subheader("6. Commit log records")
            if walk.matches.empty:
                st.caption("No record carries this key.")
            else:
                frame(walk.matches)
