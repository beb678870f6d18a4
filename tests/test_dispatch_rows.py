"""Dispatch straight from scan rows (store.services.dispatch_rows) against the request path: the same
puts into two stores on the same clock, one dispatching from rows (the default), one made to use
requests made by the put path (as before); every file of the two stores must be byte-identical."""

from __future__ import annotations

import random

import pytest

from store import Message, MessageStore
from store.services.dispatch import ReputService
from tests.engine_util import FakeClock, small_config

TOPICS = ("T0", "T1", "Topic%2")


def _messages(seed: int, count: int):
    """Mixed traffic: tags plain, empty, non-ASCII; keys plain, several, none, non-ASCII; UNIQ_KEYs;
    transaction kinds (prepared, commit, rollback); a DELAY now and then; batches of one queue."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        topic = rng.choice(TOPICS)
        queue_id = rng.randrange(4)
        tags = rng.choice(["tagA", "tagB", None, "", "标签"])
        keys = rng.choice([(f"k{n}",), (f"k{n}", f"order-{n}"), (), f"a{n}  b{n} ", ("ключ",)])
        properties = {}
        if rng.random() < 0.7:
            properties["UNIQ_KEY"] = f"7F000001{n:012X}"
        if rng.random() < 0.03:
            properties["DELAY"] = "2"
        sys_flag = rng.choice([0, 0, 0, 0, 0x04, 0x08, 0x0C])
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        message = Message(topic, body, queue_id, tags, keys, properties, sys_flag=sys_flag)
        if rng.random() < 0.2:
            batch = [Message(topic, body[:50] + bytes([k]), queue_id, tags, (f"b{n}-{k}",),
                             {"UNIQ_KEY": f"B{n:08X}{k:04X}"}) for k in range(rng.randrange(1, 12))]
            out.append(("batch", batch))
        else:
            out.append(("one", message))
    return out


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for part in ("commitlog", "consumequeue", "index")
            for p in (root / part).rglob("*") if p.is_file()}


def _run(root, work, *, from_rows: bool, monkeypatch, passes: int):
    with monkeypatch.context() as patch:
        if not from_rows:
            patch.setattr(ReputService, "_row_dispatchers", lambda self: None)
        store = MessageStore.open(small_config(root), clock_ms=FakeClock(step_ms=7),
                                  start_services=False)
        try:
            assert store.commit_log.make_dispatch_requests is (not from_rows)
            step = max(1, len(work) // passes)
            for first in range(0, len(work), step):
                for kind, item in work[first:first + step]:
                    result = store.put_message(item) if kind == "one" else store.put_messages(item)
                    assert result.ok, result
                store.dispatch_pending()
            reput = store.services.reput
            assert reput.behind_bytes() == 0
            counts = (reput.dispatched_from_rows, reput.dispatched_records)
        finally:
            store.close()
    return _files(root), counts


@pytest.mark.parametrize("seed,passes", [(1, 1), (2, 5), (3, 40)])
def test_rows_and_requests_write_the_same_files(tmp_path, monkeypatch, seed, passes):
    work = _messages(seed, 400)
    rows_files, (from_rows, total) = _run(tmp_path / "rows", work, from_rows=True,
                                          monkeypatch=monkeypatch, passes=passes)
    request_files, (from_rows_b, total_b) = _run(tmp_path / "requests", work, from_rows=False,
                                                 monkeypatch=monkeypatch, passes=passes)
    assert from_rows > 0 and from_rows_b == 0          # each store took the path it was meant to
    assert total == total_b
    assert sorted(rows_files) == sorted(request_files)
    assert any(name.startswith("index/") for name in rows_files)
    assert sum(name.startswith("consumequeue/") for name in rows_files) > 12   # files rolled
    for name in rows_files:
        assert rows_files[name] == request_files[name], name


def test_a_delayed_record_ends_the_run_of_rows(tmp_path):
    """Rows up to a SCHEDULE_TOPIC_XXXX record are dispatched from rows; it and the rows after it get
    requests, in log order. Keys that are not ASCII stay on the row path (hashed in Python)."""
    store = MessageStore.open(small_config(tmp_path), clock_ms=FakeClock(), start_services=False)
    try:
        for n in range(20):
            assert store.put_message(Message("T", b"x", n % 2, "t", (f"k{n}", "ключ"))).ok
        assert store.put_message(Message("T", b"x", 0, "t", ("late",), {"DELAY": "1"})).ok
        for n in range(5):
            assert store.put_message(Message("T", b"y", n % 2, "t", (f"j{n}",))).ok
        reput = store.services.reput
        assert store.dispatch_pending() == 26
        assert reput.dispatched_from_rows == 20
        assert len(store.query_message("T", "ключ").messages) == 20
        assert store.query_message("T", "j4").messages and store.query_message("T", "k0").messages
        assert store.get_max_offset_in_queue("T", 0) == 13
        assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1
        for n in range(5):
            assert store.put_message(Message("T", b"z", 0, "t", (f"z{n}",))).ok
        assert store.dispatch_pending() == 5 and reput.dispatched_from_rows == 25
    finally:
        store.close()


def test_long_polling_hears_of_units_written_from_rows(tmp_path):
    store = MessageStore.open(small_config(tmp_path), clock_ms=FakeClock(), start_services=False)
    try:
        heard = []
        store.services.reput.add_listener(lambda arrivals: heard.append(dict(arrivals)))
        for n in range(5):
            assert store.put_message(Message("T", b"x", n % 2, "t", (f"k{n}",))).ok
        store.dispatch_pending()
        assert heard == [{("T", 0): 3, ("T", 1): 2}]
    finally:
        store.close()


def test_an_empty_uniq_key_gets_no_index_entry(tmp_path):
    """RocketMQ's reput parses the record, and string2messageProperties drops a property with an
    empty value: an empty UNIQ_KEY is no key. (Requests made by the put path used to index `T#`.)"""
    store = MessageStore.open(small_config(tmp_path), clock_ms=FakeClock(), start_services=False)
    try:
        assert store.put_message(Message("T", b"x", 0, "t", ("k",), {"UNIQ_KEY": ""})).ok
        store.dispatch_pending()
        assert [f.index_count for f in store._parts.index_service._files] == [2]   # 1 + one key
        assert store.query_message("T", "k").messages
    finally:
        store.close()
