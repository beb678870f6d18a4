"""The dashboard tells stores apart and shows their text as text: two stores whose folders are both
named `store` keep their own names and stay selected across pages; a store folder and a topic written
like markdown links are never rendered as links or bold on any page (every markdown-rendered string
of every element is scanned)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.test_app_pages import (PAGES, SAMPLE, _fixture, _registry_handle, button, open_store,  # noqa: E402
                                  start_app, visit)
from tests.fixtures_util import copy_store, load_dump  # noqa: E402
from tests.app_util import registry_cleanup  # noqa: E402,F401


def test_two_stores_named_store_stay_apart(tmp_path):
    """Both folders are called `store` (RocketMQ's default): the picker names them by the end of
    their real paths, and moving between pages keeps the one that was opened last."""
    crash = _fixture("rocketmq-4.9.7/crash-64k")
    rolled = _fixture("rocketmq-4.9.7/rolled-64k")
    crash_root = copy_store(crash, tmp_path / "crash")
    rolled_root = copy_store(rolled, tmp_path / "rolled")
    at = start_app()
    open_store(at, crash_root, "read-only", os.path.join(crash, "store.properties"))
    open_store(at, rolled_root, "read-only", os.path.join(rolled, "store.properties"))
    rolled_key = f"read-only:{os.path.realpath(rolled_root)}"
    assert at.session_state["store_key"] == rolled_key
    for page in ("consumequeue", "overview", "health", "query", "overview"):
        visit(at, page)
        assert at.session_state["store_key"] == rolled_key, page
        assert _registry_handle(at).store.total_messages() == load_dump(rolled)["totalMessages"]
        picker = at.sidebar.selectbox(key="picker_choice")
        assert picker.value == rolled_key
        shown = picker.format_func(picker.value)
        assert shown == "rolled/store [read-only]", shown
        assert len(set(map(picker.format_func, picker.options))) == len(picker.options)
        assert os.path.realpath(rolled_root) in [t.value for t in at.sidebar.text]
    from app.ui.state import get_registry
    for root in (crash_root, rolled_root):
        get_registry().close(f"read-only:{os.path.realpath(root)}")


EVIL_TOPIC = "**bold** [link](http://evil.example/x)"
EVIL_DIR = "**BOLD**[click](https:evil.example)"
# Elements Streamlit shows as plain text (their strings are data, never markdown).
PLAIN_ELEMENTS = {"text", "code", "dataframe", "arrow_data_frame", "json", "plotly_chart",
                  "text_input", "text_area", "number_input"}
# Unescaped emphasis or link syntax, or a GFM literal autolink (found after escapes are resolved,
# so an escaped `http\://` is still one: only a character between `:` and `//` breaks it).
MARKUP = re.compile(r"(?<!\\)\*\*|(?<!\\)\]\(|(?<!\\)\[click|(?<!\\)\[link|https?\\?://|www\\?\.")


def _strings(message, path=""):
    from google.protobuf.message import Message as ProtoMessage
    for field, value in message.ListFields():
        name = f"{path}.{field.name}"
        values = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        for item in values:
            if isinstance(item, ProtoMessage):
                yield from _strings(item, name)
            elif isinstance(item, str):
                yield name, item


def markup_leaks(at: AppTest) -> list[tuple[str, str, str]]:
    """(element type, proto field, text) of every markdown-rendered string that would render the
    evil topic or folder name as a link or bold."""
    leaks = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            kind = getattr(child, "type", "")
            proto = getattr(child, "proto", None)
            if proto is not None and kind not in PLAIN_ELEMENTS:
                for name, text in _strings(proto):
                    if ("evil" in text or "BOLD" in text) and MARKUP.search(text):
                        leaks.append((kind, name, text))
            walk(child)
    walk(at._tree)
    return leaks


def test_no_page_renders_store_or_user_text_as_markdown(tmp_path):
    """A store in a folder named like a markdown link, and a topic typed like one, are shown
    literally on every page: no element renders them as a link or as bold."""
    root = tmp_path / EVIL_DIR / "store"
    shutil.copytree(SAMPLE, root)
    at = start_app()
    open_store(at, str(root), "read-only")
    assert at.session_state["store_key"] == f"read-only:{os.path.realpath(root)}"
    leaks = []
    for page in PAGES:
        visit(at, page)
        leaks += [(page, *leak) for leak in markup_leaks(at)]
    open_store(at, str(tmp_path / EVIL_DIR / "missing"), "read-only")   # the error names the path
    leaks += [("picker", *leak) for leak in markup_leaks(at)]
    from app.ui.state import get_registry
    get_registry().close(f"read-only:{os.path.realpath(root)}")
    at = start_app()                                                    # the hosted sample copy
    for page, field, submit in (("produce", "pr_topic", "Send"), ("pull", "pl_topic", "Pull"),
                                ("query", "q_topic", "Search")):
        visit(at, page)
        at.text_input(key=field).input(EVIL_TOPIC)
        button(at, submit).click()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.warning or at.error or at.info or at.text, page
        leaks += [(page, *leak) for leak in markup_leaks(at)]
    assert not leaks, leaks


def test_display_names_tell_every_store_apart(tmp_path):
    from app.registry import StoreRegistry, distinct_names
    assert distinct_names(["/x/crash/store", "/x/rolled/store", "/y/other"]) == \
        {"/x/crash/store": "crash/store", "/x/rolled/store": "rolled/store", "/y/other": "other"}
    assert distinct_names(["/a/store", "/b/a/store"]) == {"/a/store": "/a/store", "/b/a/store": "b/a/store"}
    registry = StoreRegistry(scratch_root=str(tmp_path / "scratch"))
    try:
        first = registry.open_copy(SAMPLE, label="lab copy")
        assert registry.display_names() == {first.key: "lab copy [hosted]"}
        second = registry.open_copy(SAMPLE, label="lab copy")
        names = registry.display_names()
        assert set(names) == {first.key, second.key} and len(set(names.values())) == 2
        assert all(n.startswith("lab copy: ") and n.endswith(" [hosted]") for n in names.values())
    finally:
        registry.close_all()
