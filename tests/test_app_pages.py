"""Every dashboard page under streamlit's AppTest: on the sample store (its scratch copy and the
checked-in directory read-only) and on every RocketMQ fixture (copied first), plus produce -> pull ->
query through the widgets, bad input, and proof that a read-only open changes no byte or mtime."""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from store.api import Message  # noqa: E402
from tests.fixtures_util import (REPO_ROOT, copy_store, fixture_dirs, fixture_id, load_dump,  # noqa: E402
                                 tree_fingerprint)
from tests.app_util import registry_cleanup  # noqa: E402,F401

MAIN = os.path.join(REPO_ROOT, "app", "main.py")
SAMPLE = os.path.join(REPO_ROOT, "sample_store")
PAGES = ["overview", "commitlog", "consumequeue", "index_files", "produce", "pull", "query",
         "browse", "topics", "consumer_groups", "recovery_lab", "health", "tour", "pipeline"]
TITLES = {"index_files": "Index", "recovery_lab": "Recovery lab", "consumer_groups": "Consumer groups"}


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
    handle = _registry_handle(at)
    assert handle.mode == "hosted" and handle.scratch
    assert os.path.realpath(handle.source_root) == os.path.realpath(SAMPLE)
    assert os.path.realpath(handle.root) != os.path.realpath(SAMPLE)
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
    times = [v for f in at.dataframe for c in ("store time", "born time") if c in f.value.columns
             for v in f.value[c]]
    assert times and all(v.endswith(" UTC") for v in times), times    # never raw milliseconds
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


def _registry_handle(at: AppTest):
    from app.ui.state import get_registry
    return get_registry().get(at.session_state["store_key"])


def test_long_poll_shows_a_countdown_and_a_put_releases_it():
    at = start_app()
    visit(at, "pull")
    store = _registry_handle(at).store
    assert store.get_max_offset_in_queue("PollTopic", 2) == 0
    at.text_input(key="pl_topic").input("PollTopic")
    at.number_input(key="pl_queue").set_value(2)
    at.number_input(key="pl_offset").set_value(0)
    at.number_input(key="pl_poll").set_value(20_000)
    button(at, "Pull").click()
    at.run()
    assert not at.exception
    job = at.session_state["pl_job"]
    assert not job.done
    countdown = [i.value for i in at.info if i.value.startswith("Long polling")]
    assert countdown and "s left" in countdown[0], [i.value for i in at.info]
    assert at.get("progress"), "the countdown has a progress bar"
    # A put from elsewhere (another session, the load generator, ...) releases the poll early.
    assert store.put_message(Message("PollTopic", b"wake up", queue_id=2)).ok
    assert job.wait(10.0), "the long poll was not released by the put"
    at.run()
    assert not at.exception
    assert any(h.value == "Status: FOUND" for h in at.subheader), [h.value for h in at.subheader]
    assert job.result.waited_ms < 10_000 and [m.body for m in job.result.messages] == [b"wake up"]
    assert not any(i.value.startswith("Long polling") for i in at.info)
    assert any("waited" in t.value for t in at.text)


def test_load_generator_starts_shows_progress_and_stops():
    at = start_app()
    visit(at, "produce")
    handle = _registry_handle(at)
    at.text_input(key="lg_topics").input("LoadA, LoadB")
    at.number_input(key="lg_queues").set_value(3)
    at.number_input(key="lg_rate").set_value(40)
    at.number_input(key="lg_size").set_value(100)
    at.number_input(key="lg_total").set_value(5000)
    button(at, "Start").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    generator = handle.load_generator
    assert generator is not None and generator.running
    assert button(at, "Start").disabled                      # one generator per store at a time
    deadline = time.monotonic() + 10
    while generator.sent < 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    at.run()
    bars = [p.proto.text for p in at.get("progress")]
    assert bars and "(running;" in bars[0] and "of 5,000" in bars[0], bars
    button(at, "Stop").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not generator.running and generator.stopped
    # The Stop handler reruns the page from inside the progress fragment; older Streamlit
    # versions (1.53, our lower bound) show that rerun's tree only on the next script run.
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert 20 <= generator.sent < 5000
    assert "(stopped;" in at.get("progress")[0].proto.text
    assert not [b for b in at.button if b.label == "Stop"] and not button(at, "Start").disabled
    store = handle.store
    store.dispatch_pending()
    spread = {(t, q): store.get_max_offset_in_queue(t, q) for t in ("LoadA", "LoadB") for q in range(4)}
    assert sum(spread.values()) == generator.sent
    assert all(spread[(t, q)] > 0 for t in ("LoadA", "LoadB") for q in range(3))
    assert spread[("LoadA", 3)] == spread[("LoadB", 3)] == 0  # queue spread 3: queues 0..2 only


def test_rocksdb_store_pages(tmp_path):
    """A RocksDB-backed store (storeType=defaultRocksDB), read-only and hosted: every page renders
    and the ConsumeQueue page shows the RocksDB figures."""
    from store.message_store import MessageStore
    from tests.engine_util import small_config
    root = tmp_path / "rocks"
    config = small_config(root, "defaultRocksDB")
    with MessageStore.open(config) as store:
        for number in range(120):
            assert store.put_message(Message("RocksTopic", f"m{number}".encode(),
                                             queue_id=number % 2, keys=[f"k{number}"])).ok
    (root / "store.properties").write_text(config.to_properties(), encoding="utf-8")
    hosted_root = shutil.copytree(root, tmp_path / "rocks-hosted")
    before = tree_fingerprint(str(root))
    at = start_app()
    open_store(at, str(root), "read-only")
    visit_all(at)
    assert not at.error, [e.value for e in at.error]
    visit(at, "consumequeue")
    assert "RocksDB" in [h.value for h in at.header]
    facts = _facts(at)
    assert facts["column families"] == "default, offset" and facts["database open"] == "yes (snapshot)"
    assert int(facts["estimated keys"].replace(",", "")) >= 120
    assert int(facts["SST files (live)"]) >= 1 and facts["compaction pending"] == "no"
    assert tree_fingerprint(str(root)) == before
    open_store(at, str(hosted_root), "hosted")
    visit(at, "consumequeue")
    facts = _facts(at)
    assert facts["database open"] == "yes" and int(facts["estimated keys"].replace(",", "")) >= 120
    from app.ui.state import get_registry
    for key in (f"read-only:{os.path.realpath(root)}", f"hosted:{os.path.realpath(hosted_root)}"):
        get_registry().close(key)


def _facts(at: AppTest) -> dict[str, str]:
    for frame in at.dataframe:
        data = frame.value
        if list(data.columns) == ["fact", "value"]:
            return dict(zip(data["fact"], data["value"]))
    raise AssertionError("no RocksDB facts table on the page")


def _fixture(name: str) -> str:
    found = [f for f in fixture_dirs() if fixture_id(f) == name]
    assert found, name
    return found[0]


def _health_messages(at: AppTest) -> list[str]:
    frames = [f.value for f in at.dataframe if "message" in f.value.columns]
    return [m for f in frames for m in f["message"]]


def test_health_shows_the_current_stores_findings(tmp_path):
    crash = _fixture("rocketmq-4.9.7/crash-64k")
    rolled = _fixture("rocketmq-4.9.7/rolled-64k")
    crash_root = copy_store(crash, tmp_path / "crash")
    rolled_root = copy_store(rolled, tmp_path / "rolled")
    at = start_app()
    open_store(at, crash_root, "read-only", os.path.join(crash, "store.properties"))
    visit(at, "health")
    assert any(m.startswith("abort file present: the last run") for m in _health_messages(at))
    open_store(at, rolled_root, "read-only", os.path.join(rolled, "store.properties"))
    visit(at, "health")      # no button pressed: the rolled store's own findings, at once
    assert not any("abort" in m for m in _health_messages(at)), _health_messages(at)
    from app.ui.state import get_registry
    for root in (crash_root, rolled_root):
        get_registry().close(f"read-only:{os.path.realpath(root)}")


def test_health_on_a_hosted_store_explains_its_own_abort_file():
    at = start_app()
    visit(at, "health")
    messages = _health_messages(at)
    assert not any("did not shut down cleanly" in m for m in messages), messages
    assert any("it is this dashboard's own" in m for m in messages), messages
    assert any(c.value.startswith("confirm offset -1: not set") for c in at.caption)


def test_query_show_message_follows_the_new_result():
    at = start_app()
    store = _registry_handle(at).store
    ids = {}
    for key in ("orders-1", "orders-2"):
        put = store.put_message(Message("OrdersTopic", key.encode(), queue_id=0, keys=[key]))
        assert put.ok
        ids[key] = put.msg_id
    store.dispatch_pending()
    visit(at, "query")
    for key in ("orders-1", "orders-2"):
        at.text_input(key="q_topic").input("OrdersTopic")
        at.text_input(key="q_key").input(key)
        button(at, "Search").click()
        at.run()
        assert not at.exception
        shown = [s for s in at.selectbox if s.label == "Show message"]
        assert len(shown) == 1
        assert ids[key] in shown[0].format_func(shown[0].value), (key, shown[0].value)
        details = [f.value for f in at.dataframe if "msgId" in f.value.columns]
        assert list(details[-1]["msgId"]) == [ids[key]]


def test_pull_starts_at_the_committed_offset_and_guards_a_backward_commit():
    at = start_app()
    store = _registry_handle(at).store
    assert store.put_messages([Message("BackTopic", f"m{n}".encode(), queue_id=0)
                               for n in range(200)]).ok
    store.dispatch_pending()
    store.commit_consumer_offset("G191", "BackTopic", 0, 191)
    visit(at, "pull")
    at.text_input(key="pl_group").input("G191")
    at.text_input(key="pl_topic").input("BackTopic")
    at.number_input(key="pl_queue").set_value(0)
    button(at, "Pull").click()
    at.run()
    assert not at.exception
    job = at.session_state["pl_job"]
    assert job.request["queue_offset"] == 191
    assert [m.queue_offset for m in job.result.messages] == list(range(191, 199))
    assert not at.warning and not button(at, "Commit offset 199 for group G191").disabled

    at.radio(key="pl_start_from").set_value("this queue offset")
    at.number_input(key="pl_offset").set_value(0)
    button(at, "Pull").click()
    at.run()
    assert at.session_state["pl_job"].result.next_begin_offset == 8
    assert any("BACKWARDS from 191" in w.value for w in at.warning), [w.value for w in at.warning]
    commit = button(at, "Commit offset 8 for group G191")
    assert commit.disabled                                  # not before the confirmation
    [box] = [c for c in at.checkbox if c.label.startswith("Yes, move G191 back from 191 to 8")]
    box.check()
    at.run()
    button(at, "Commit offset 8 for group G191").click()
    at.run()
    assert any("Committed" in s.value for s in at.success)
    assert store.query_consumer_offset("G191", "BackTopic", 0) == 8


def test_health_explains_what_a_restart_would_do_to_a_crashed_store(tmp_path):
    crash = _fixture("rocketmq-5.3.3/crash")
    root = copy_store(crash, tmp_path / "crash")
    at = start_app()
    open_store(at, root, "read-only", os.path.join(crash, "store.properties"))
    visit(at, "health")
    assert "Crash diagnosis: what a broker restart would do" in [h.value for h in at.header]
    text = " ".join(m.value.replace("\\", "") for m in at.markdown)
    end = load_dump(crash)["commitLog"]["maxPhyOffset"]
    assert f"stops at {end:,}" in text and "The segment files end at 131,072" in text
    assert "00000000000000131072 (preallocated, all zero)" in text
    assert "Index: 1 file(s) newer than the checkpoint" in text
    from app.ui.state import get_registry
    get_registry().close(f"read-only:{os.path.realpath(root)}")


def test_pipeline_page_runs_pandas_without_spark(tmp_path, monkeypatch):
    """The first README command installs no pyspark: the page says in one line how to add it and
    runs the pandas stats, whose numbers are the real store's."""
    monkeypatch.setitem(sys.modules, "pyspark", None)        # `import pyspark` raises ImportError
    fixture = _fixture("rocketmq-4.9.7/rolled-64k")
    root = copy_store(fixture, tmp_path / "ro")
    at = start_app()
    open_store(at, root, "read-only", os.path.join(fixture, "store.properties"))
    visit(at, "pipeline")
    [info] = [i.value for i in at.info if "Spark is not installed" in i.value]
    assert "pip install -e '.[spark]'" in info and "\n" not in info
    assert at.selectbox(key="pipe_job").options == ["pandas stats"]
    button(at, "Run").click()
    at.run()
    run = _registry_handle(at).pipeline_run
    deadline = time.monotonic() + 60
    while not run.done and time.monotonic() < deadline:
        time.sleep(0.1)
    at.run()
    assert not at.exception and run.error is None, run.error
    assert [h.value for h in at.main.subheader] == ["queues", "topics", "consumer\\_lag"]
    dump = load_dump(fixture)
    queues = run.result["queues"]
    assert {(r.topic, r.queue_id): r.messages for r in queues.itertuples()} == \
        {(q["topic"], q["queueId"]): q["maxOffset"] - q["minOffset"] for q in dump["queues"]}
    lag = run.result["consumer_lag"]
    want = {(key.split("@")[1], key.split("@")[0], int(q)): o
            for key, table in dump["consumerOffsets"].items() for q, o in table.items()}
    assert {(r.group, r.topic, r.queue_id): r.consumer_offset for r in lag.itertuples()} == want
    shown = [f.value for f in at.dataframe if "first_store_timestamp" in f.value.columns][0]
    assert all(str(v).endswith(" UTC") for v in shown["first_store_timestamp"])
    from app.ui.state import get_registry
    get_registry().close(f"read-only:{os.path.realpath(root)}")
