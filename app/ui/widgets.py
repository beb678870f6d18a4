"""Display helpers that keep user and store text out of markdown and HTML.

Bodies and properties go through st.code, st.text and st.dataframe only. Every other element that
Streamlit renders as markdown (titles, headers, captions, st.info/warning/error/success, widget labels,
help texts, button labels) gets user or store text only through `plain()`, which backslash-escapes
every ASCII punctuation character (CommonMark: any of them may be escaped, and an escaped one is shown
as itself). So a topic `**bold** [x](http://evil)` or a folder named `:red[x]` reads literally.
"""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from app.bodies import CHARSETS, MODES, render_body
from app.times import human_ms

_INLINE = str.maketrans({c: "\\" + c for c in "\\`*_[]()<>#~:$|!{}&^@\"'"})
_LINE_START = re.compile(r"^(\s*)([-+=]|\d+[.)])", re.MULTILINE)
# GFM's literal autolinks (`http://x`, `www.x`, `a@b.c`) are found in the text *after* escapes are
# resolved (mdast-util-gfm-autolink-literal), so a backslash cannot stop them: a WORD JOINER
# (U+2060, invisible, no line break) goes inside each trigger instead.
WORD_JOINER = "\u2060"
_AUTOLINK = re.compile(r"(?i)(:)(//)|\b(www)(\\?\.)|(@)")


def _line_start(match: re.Match) -> str:
    lead, mark = match.group(1), match.group(2)
    return lead + (mark[:-1] + "\\" + mark[-1] if mark[0].isdigit() else "\\" + mark)


def _break_autolink(match: re.Match) -> str:
    if match.group(1):
        return match.group(1) + WORD_JOINER + match.group(2)
    if match.group(3):
        return match.group(3) + WORD_JOINER + match.group(4)
    return match.group(5) + WORD_JOINER


def plain(value) -> str:
    """`value` as text that markdown shows literally: no links (GFM's literal autolinks broken by an
    invisible WORD JOINER after `:` of `://`, after `www` and after `@`), emphasis, HTML, icons,
    colors, math, lists or headings. Inline markup characters are escaped everywhere; `-`, `+`, `=`
    and an ordered list's `1.` only where a line starts, so `inspector-group` stays readable."""
    text = _AUTOLINK.sub(_break_autolink, str(value).translate(_INLINE))
    return _LINE_START.sub(_line_start, text)


def say(kind: str, template: str, *values) -> None:
    """st.info/warning/error/success/caption/markdown of our own `template` (markdown allowed) with
    `values` (user or store text) filled in as plain text: `say("warning", "No topic {}", name)`."""
    text = template.format(*(plain(v) for v in values))
    {"info": st.info, "warning": st.warning, "error": st.error, "success": st.success,
     "caption": st.caption, "markdown": st.markdown}[kind](text)


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
        "size": record.store_size, "store time": human_ms(record.store_timestamp),
        "born time": human_ms(record.born_timestamp),
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
