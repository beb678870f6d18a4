"""Display helpers that keep store content out of HTML: bodies and properties go through st.code,
st.text and st.dataframe only."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.bodies import CHARSETS, MODES, render_body


def body_viewer(body: bytes, key: str) -> None:
    cols = st.columns(3)
    mode = cols[0].selectbox("Show body as", MODES, key=f"{key}_mode")
    charset = cols[1].selectbox("Charset", CHARSETS, key=f"{key}_charset")
    limit = cols[2].number_input("Max bytes", min_value=16, max_value=1 << 20, value=4096, step=1024,
                                 key=f"{key}_limit")
    rendered = render_body(body, mode, charset, int(limit))
    if rendered.note:
        st.caption(rendered.note)
    st.code(rendered.text or "(empty body)", language=None)


def message_details(record, key: str) -> None:
    """Header fields, properties and body of one decoded message."""
    st.dataframe(pd.DataFrame([{
        "msgId": record.msg_id, "topic": record.topic, "queue_id": record.queue_id,
        "queue_offset": record.queue_offset, "phy_offset": record.commit_log_offset,
        "size": record.store_size, "store_timestamp": record.store_timestamp,
        "born_host": record.born_host, "store_host": record.store_host, "flag": record.flag,
        "sys_flag": record.sys_flag, "reconsume_times": record.reconsume_times,
    }]), hide_index=True)
    st.dataframe(pd.DataFrame(sorted(record.properties.items()), columns=["property", "value"]),
                 hide_index=True)
    body_viewer(record.body, key)


def frame(data, **kwargs) -> None:
    """st.dataframe with the index hidden (store strings are shown as data, never as markup)."""
    st.dataframe(data if isinstance(data, pd.DataFrame) else pd.DataFrame(data), hide_index=True,
                 **kwargs)
