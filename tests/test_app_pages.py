"""Every dashboard page under streamlit's AppTest: on the sample store (its scratch copy and the
checked-in directory read-only) and on every RocketMQ fixture (copied first), plus produce -> pull ->
query through the widgets, bad input, and proof that a read-only open changes no byte or mtime."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.fixtures_util import REPO_ROOT, copy_store, fixture_dirs, fixture_id, tree_fingerprint  # noqa: E402

MAIN = os.path.join(REPO_ROOT, "app", "main.py")
SAMPLE = os.path.join(REPO_ROOT, "sample_store")
PAGES = ["overview", "commitlog", "consumequeue", "index_files", "produce", "pull", "query",
         "recovery_lab", "health", "tour", "pipeline"]
TITLES = {"index_files": "Index", "recovery_lab": "Recovery lab"}


@pytest.fixture(scope="module", autouse=True)
def registry_cleanup():
    yield
    from app.ui.state import get_registry
    get_registry().close_all()
    get_registry.clear()


def start_app() -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def visit(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"../pages/{page}.py")
    at.run()
    assert not at.exception, (page, [e.value for e in at.exception])
    expected = TITLES.get(page, {"commitlog": "CommitLog", "consumequeue": "ConsumeQueue"}.get(
        page, page.capitalize()))
    assert [t.value for t in at.title] == [expected], page
    return at


def button(at: AppTest, label: str):
    matches = [b for b in at.button if b.label == label]
    assert matches, (label, [b.label for b in at.button])
    return matches[0]


def open_store(at: AppTest, path: str, mode: str, properties: str = "") -> AppTest:
    at.text_input(key="picker_path").input(path)
    at.radio(key="picker_mode").set_value(mode)
    at.text_input(key="picker_props").input(properties)
    button(at, "Open").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def visit_all(at: AppTest) -> None:
    for page in PAGES:
        visit(at, page)


def test_every_page_on_the_sample_copy():
    at = start_app()
    assert "scratch copy" in at.session_state["store_key"] or at.session_state["store_key"]
    visit_all(at)
    assert not at.error, [e.value for e in at.error]


def test_produce_then_pull_then_query():
    at = start_app()
    visit(at, "produce")
    at.text_input(key="pr_topic").input("AppTestTopic")
    at.text_input(key="pr_keys").input("apptest-key-1 other-key")
    at.text_area(key="pr_body").input("<b>hello</b> from AppTest")
    at.text_area(key="pr_props").input("color=blue")
    button(at, "Send").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("PUT_OK" in s.value for s in at.success)
    produced = at.session_state["pr_last"]
    assert produced["topic"] == "AppTestTopic"

    visit(at, "pull")
    at.text_input(key="pl_topic").input("AppTestTopic")
    at.number_input(key="pl_queue").set_value(produced["queue_id"])
    at.number_input(key="pl_offset").set_value(0)
    button(at, "Pull").click()
    at.run()
    assert not at.exception
    assert any("FOUND" in h.value for h in at.subheader), [h.value for h in at.subheader]
    button(at, "Commit offset 1 for group inspector-group").click()
    at.run()
    assert any("Committed" in s.value for s in at.success)

    visit(at, "query")
    at.text_input(key="q_topic").input("AppTestTopic")
    at.text_input(key="q_key").input("apptest-key-1")
    button(at, "Search").click()
    at.run()
    assert not at.exception
    outcome = at.session_state["q_outcome"]
    assert [m.body for m in outcome.messages] == [b"<b>hello</b> from AppTest"]
    assert any("1 message" in h.value for h in at.subheader)
    # the body is shown as code (plain text), never as markdown/HTML
    assert any("<b>hello</b> from AppTest" in c.value for c in at.code)

    at.radio(key="q_kind").set_value("msgId")
    at.run()
    at.text_input(key="q_msgid").input(produced["msg_id"])
    button(at, "Search").click()
    at.run()
    assert len(at.session_state["q_outcome"].messages) == 1


def test_bad_input_gets_a_message_not_a_traceback():
    at = start_app()
    open_store(at, "/definitely/not/here", "read-only")
    assert any("not a directory" in w.value for w in at.warning)
    open_store(at, "/etc", "read-only")
    assert any("does not look like a RocketMQ store" in w.value for w in at.warning)
    visit(at, "query")
    at.radio(key="q_kind").set_value("msgId")
    at.run()
    at.text_input(key="q_msgid").input("not-hex")
    button(at, "Search").click()
    at.run()
    assert not at.exception
    assert any("msgId" in w.value for w in at.warning)
    visit(at, "produce")
    at.text_input(key="pr_topic").input("bad/topic")
    button(at, "Send").click()
    at.run()
    assert not at.exception and any("topic" in w.value.lower() for w in at.warning)
    visit(at, "commitlog")
    at.text_input(key="cl_offset").input("abc")
    button(at, "Go").click()
    at.run()
    assert not at.exception and any("integer" in w.value for w in at.warning)


def test_sample_store_read_only_changes_nothing():
    before = tree_fingerprint(SAMPLE)
    at = start_app()
    open_store(at, SAMPLE, "read-only")
    assert at.session_state["store_key"] == f"read-only:{os.path.realpath(SAMPLE)}"
    visit_all(at)
    assert tree_fingerprint(SAMPLE) == before


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=fixture_id)
def test_every_page_on_fixture(fixture, tmp_path):
    read_only_root = copy_store(fixture, tmp_path / "ro")
    hosted_root = copy_store(fixture, tmp_path / "hosted")
    properties = os.path.join(fixture, "store.properties")
    before = tree_fingerprint(read_only_root)
    at = start_app()
    open_store(at, read_only_root, "read-only", properties)
    assert at.session_state["store_key"] == f"read-only:{os.path.realpath(read_only_root)}"
    visit_all(at)
    assert not at.error, [e.value for e in at.error]
    assert tree_fingerprint(read_only_root) == before
    open_store(at, hosted_root, "hosted", properties)
    assert at.session_state["store_key"] == f"hosted:{os.path.realpath(hosted_root)}"
    for page in ("overview", "commitlog", "consumequeue", "index_files", "query", "health"):
        visit(at, page)
    from app.ui.state import get_registry
    for key in (f"read-only:{os.path.realpath(read_only_root)}",
                f"hosted:{os.path.realpath(hosted_root)}"):
        get_registry().close(key)
    shutil.rmtree(tmp_path, ignore_errors=True)
