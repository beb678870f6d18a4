"""The Topics page under AppTest, on every RocketMQ fixture (values checked against the real store's
read-dump.json) and on the hosted sample copy with %RETRY% and %DLQ% topics; and app.topics_data."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app import topics_data  # noqa: E402
from app.times import human_bytes, human_ms  # noqa: E402
from store.api import Message  # noqa: E402
from tests.app_util import open_store, registry_cleanup, start, visit  # noqa: E402,F401
from tests.fixtures_util import (copy_store, fixture_dirs, fixture_id, load_dump,  # noqa: E402
                                 tree_fingerprint)


def start_page(path: str | None = None, properties: str = "") -> AppTest:
    at = start()
    if path is not None:
        open_store(at, path, "read-only", properties)
    visit(at, "topics")
    assert [t.value for t in at.title] == ["Topics"]
    return at


def table(at: AppTest, first_column: str, index: int = 0):
    frames = [f.value for f in at.dataframe if list(f.value.columns)[:1] == [first_column]]
    return frames[index]


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=fixture_id)
def test_topics_match_the_real_store(fixture, tmp_path):
    root = copy_store(fixture, tmp_path / "ro")
    before = tree_fingerprint(root)
    at = start_page(root, os.path.join(fixture, "store.properties"))
    assert not at.error, [e.value for e in at.error]
    dump = load_dump(fixture)
    expected: dict[str, dict] = {}
    for queue in dump["queues"]:
        row = expected.setdefault(queue["topic"], {"queues": 0, "messages": 0, "bytes": 0, "first": []})
        row["queues"] += 1
        row["messages"] += queue["maxOffset"] - queue["minOffset"]
        row["bytes"] += sum(unit["size"] for unit in queue["cq"])
        if queue.get("earliestMessageTime", -1) > 0 and queue["maxOffset"] > queue["minOffset"]:
            row["first"].append(queue["earliestMessageTime"])
    shown = table(at, "topic")
    retry = [f.value for f in at.dataframe if "kind" in f.value.columns][1:]
    shown_all = shown if not retry else shown._append(retry[0])
    by_topic = {row["topic"]: row for row in shown_all.to_dict("records")}
    assert sum(r["messages"] for r in by_topic.values()) == dump["totalMessages"]
    for topic, want in expected.items():
        got = by_topic[topic]
        assert (got["queues"], got["messages"], got["size"]) == \
            (want["queues"], want["messages"], human_bytes(want["bytes"])), topic
        if want["first"]:
            assert got["first store time"] == human_ms(min(want["first"])), topic
        assert got["last store time"].endswith(" UTC") and got["last store time"] >= \
            got["first store time"]
    # sorted by messages, largest first
    at.selectbox(key="tp_sort").set_value("messages")
    at.run()
    counts = list(table(at, "topic")["messages"])
    assert counts == sorted(counts, reverse=True)
    # one topic's queues, against the dump's min/max offsets
    topic = dump["queues"][0]["topic"]
    at.selectbox(key="tp_topic").set_value(topic)
    at.run()
    status = table(at, "queue", -1)
    want = sorted((q["queueId"], q["minOffset"], q["maxOffset"]) for q in dump["queues"]
                  if q["topic"] == topic)
    assert list(zip(status["queue"], status["min offset"], status["max offset"])) == want
    assert tree_fingerprint(root) == before
    from app.ui.state import get_registry
    get_registry().close(f"read-only:{os.path.realpath(root)}")


def test_retry_and_dlq_topics_are_listed_apart_with_their_messages():
    at = start_page()
    from app.ui.state import get_registry
    store = get_registry().get(at.session_state["store_key"]).store
    for topic, body in (("%RETRY%OrderGroup", b'{"order": 1, "retry": true}'),
                        ("%DLQ%OrderGroup", b"dead letter"), ("NormalT", b"x")):
        assert store.put_message(Message(topic, body, queue_id=0)).ok
    store.dispatch_pending()
    at.run()
    assert not at.exception
    normal = table(at, "topic", 0)
    retry = table(at, "topic", 1)
    assert "NormalT" in set(normal["topic"])
    assert not {"%RETRY%OrderGroup", "%DLQ%OrderGroup"} & set(normal["topic"])
    assert dict(zip(retry["topic"], retry["kind"])) == {"%DLQ%OrderGroup": "dlq",
                                                        "%RETRY%OrderGroup": "retry"}
    at.selectbox(key="tp_retry_topic").set_value("%RETRY%OrderGroup")
    at.run()
    messages = [f.value for f in at.dataframe if "msgId" in f.value.columns and "body" in f.value.columns]
    assert messages and list(messages[0]["body"]) == ['{"order": 1, "retry": true}']
    assert any(c.value == '{"order": 1, "retry": true}' for c in at.code)


def test_sorted_rows_puts_unknown_values_last():
    rows = [{"topic": "a", "put_rate_per_s": None}, {"topic": "b", "put_rate_per_s": 2.0},
            {"topic": "c", "put_rate_per_s": 5.0}]
    assert [r["topic"] for r in topics_data.sorted_rows(rows, "put rate", True)] == ["c", "b", "a"]
    assert [r["topic"] for r in topics_data.sorted_rows(rows, "put rate", False)] == ["b", "c", "a"]
