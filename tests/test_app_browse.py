"""Browsing a queue (app.browse) on the real RocketMQ fixtures: pages forwards and backwards across
consume-queue files, the body filter, seeking by time, the tail, the JSON view; and the Browse page
under AppTest (seek, Next, Previous, live tail)."""

from __future__ import annotations

import json
import os

import pytest

from app import browse
from app.paths import InputError
from app.times import human_ms, relative_range
from store.message_store import MessageStore
from tests.fixtures_util import REPO_ROOT, copy_store, fixture_dirs, fixture_id, load_dump, store_config

CLEAN = [f for f in fixture_dirs() if "crash" not in os.path.basename(f)]


def _messages(fixture: str) -> list[dict]:
    with open(os.path.join(fixture, "messages.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(params=CLEAN, ids=fixture_id)
def opened(request, tmp_path):
    fixture = request.param
    root = copy_store(fixture, tmp_path / "ro")
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        yield fixture, store


def test_pages_forwards_and_backwards_match_the_queue(opened):
    fixture, store = opened
    queue = max(load_dump(fixture)["queues"], key=lambda q: q["maxOffset"] - q["minOffset"])
    topic, queue_id, high = queue["topic"], queue["queueId"], queue["maxOffset"]
    phy = [unit["commitLogOffset"] for unit in queue["cq"]]
    first = browse.page_forward(store, topic, queue_id, 0, 25)
    second = browse.page_forward(store, topic, queue_id, first.end_offset, 25)
    assert [m.queue_offset for m in first.messages] == list(range(0, min(25, high)))
    assert [m.commit_log_offset for m in first.messages + second.messages] == phy[:len(first.messages) +
                                                                              len(second.messages)]
    back = browse.page_backward(store, topic, queue_id, second.start_offset, 25)
    assert [m.queue_offset for m in back.messages] == [m.queue_offset for m in first.messages]
    assert back.at_start
    last = browse.tail(store, topic, queue_id, 7)
    assert [m.queue_offset for m in last.messages] == list(range(high - 7, high))
    assert browse.page_forward(store, topic, queue_id, last.end_offset, 5).messages == []


def test_body_filter_keeps_the_matching_messages_in_queue_order(opened):
    fixture, store = opened
    sent = _messages(fixture)
    topic, queue_id = sent[0]["topic"], sent[0]["queueId"]
    # The queue's bodies in queue order (the walk itself is checked against the dump above).
    bodies = [m.body for m in browse._read_range(store, topic, queue_id, 0,
                                                 store.get_max_offset_in_queue(topic, queue_id))]
    assert len(bodies) == store.get_max_offset_in_queue(topic, queue_id)
    text = next(b.decode() for b in bodies[1:] if b.isascii() and len(b) >= 5)
    needle = text[:5].upper()                 # case-insensitive by default
    wanted = [b for b in bodies if needle.lower().encode() in b.lower()]
    assert wanted and len(wanted) < len(bodies) or needle.lower() != needle
    got, offset = [], 0
    for _ in range(100):
        page = browse.page_forward(store, topic, queue_id, offset, 4, needle=needle)
        got += [m.body for m in page.messages]
        if page.at_end:
            break
        offset = page.end_offset
    assert got == wanted
    if needle.lower() != needle and needle not in b"".join(bodies).decode("utf-8", "replace"):
        assert browse.page_forward(store, topic, queue_id, 0, 4, needle=needle,
                                   case_sensitive=True).messages == []


def test_seek_by_time_and_a_time_range(opened):
    fixture, store = opened
    queue = load_dump(fixture)["queues"][0]
    topic, queue_id = queue["topic"], queue["queueId"]
    everything = browse.page_forward(store, topic, queue_id, 0, browse.MAX_PAGE).messages
    middle = everything[len(everything) // 2]
    start = browse.seek_time(store, topic, queue_id, middle.store_timestamp)
    assert everything[start].store_timestamp >= middle.store_timestamp
    assert start == 0 or everything[start - 1].store_timestamp < middle.store_timestamp
    ranged = browse.page_forward(store, topic, queue_id, start, browse.MAX_PAGE,
                                 begin_ms=middle.store_timestamp, end_ms=middle.store_timestamp)
    assert ranged.messages and {m.store_timestamp for m in ranged.messages} == {middle.store_timestamp}
    begin, end = relative_range("last 15 min", 10 * 60 * 60_000)
    assert (begin, end) == (10 * 60 * 60_000 - 15 * 60_000, 10 * 60 * 60_000)
    with pytest.raises(InputError, match="No consume queue"):
        browse.page_forward(store, "NoSuchTopic", 0, 0, 5)


def test_json_view_and_times_with_their_zone():
    assert browse.pretty_json(b'{"a":[1,2],"b":"\xc3\xa9"}') == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": "\u00e9"\n}'
    assert browse.pretty_json(b"not json") is None and browse.pretty_json(b"\xff") is None
    assert human_ms(1_700_000_000_000) == "2023-11-14 22:13:20.000 UTC"
    assert human_ms(-1) == human_ms(None) == "-"


def test_browse_page_seek_next_previous_and_live_tail(tmp_path):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest
    fixture = [f for f in CLEAN if fixture_id(f) == "rocketmq-4.9.7/rolled-64k"][0]
    root = copy_store(fixture, tmp_path / "ro")
    at = AppTest.from_file(os.path.join(REPO_ROOT, "app", "main.py"), default_timeout=60)
    at.run()
    at.text_input(key="picker_path").input(root)
    at.radio(key="picker_mode").set_value("read-only")
    at.text_input(key="picker_props").input(os.path.join(fixture, "store.properties"))
    [b for b in at.button if b.label == "Open"][0].click()
    at.run()
    at.switch_page("../pages/browse.py")
    at.run()
    assert not at.exception and [t.value for t in at.title] == ["Browse"]
    at.selectbox(key="br_topic").set_value("TopicA")
    at.run()
    at.selectbox(key="br_queue").set_value(1)
    at.text_input(key="br_offset").input("100")
    [b for b in at.button if b.label == "Seek"][0].click()
    at.run()
    rows = [f.value for f in at.dataframe if "queue offset" in f.value.columns][0]
    assert list(rows["queue offset"]) == list(range(100, 120))
    assert all(t.endswith(" UTC") for t in rows["store time"])
    [b for b in at.button if b.label == "Next ▶"][0].click()
    at.run()
    rows = [f.value for f in at.dataframe if "queue offset" in f.value.columns][0]
    assert list(rows["queue offset"]) == list(range(120, 131))     # TopicA/1 holds 131
    assert [b for b in at.button if b.label == "Next ▶"][0].disabled        # the queue's end
    [b for b in at.button if b.label == "◀ Previous"][0].click()
    at.run()
    rows = [f.value for f in at.dataframe if "queue offset" in f.value.columns][0]
    assert list(rows["queue offset"]) == list(range(100, 120))
    at.toggle(key="br_live").set_value(True)
    at.run()
    assert not at.exception
    tails = [f.value for f in at.dataframe if "queue offset" in f.value.columns]
    assert list(tails[-1]["queue offset"]) == list(range(121, 131))
    from app.ui.state import get_registry
    get_registry().close(f"read-only:{os.path.realpath(root)}")
