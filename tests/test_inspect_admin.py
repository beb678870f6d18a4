"""store/inspect/admin_views.py and cleanup_view.py: the admin views against the real stores' answers
(read-dump.json), the lag edge cases, and cleanup explanations checked against the pass they predict."""

from __future__ import annotations

import os
from datetime import datetime

import pytest

from store import Message, MessageStore, StoreConfig
from store.inspect.admin_views import NOTE_NO_OFFSET, clamp_lag, topic_kind
from tests.fixtures_util import (copy_store, fixture_dirs, fixture_id, load_dump, store_config,
                                 tree_fingerprint)

HOUR_MS = 3_600_000


def _expected_topics(dump: dict) -> dict[str, dict]:
    """Per topic, from the real store's queues: messages, bytes of the units in [min, max), first
    and last store time."""
    out: dict[str, dict] = {}
    for queue in dump["queues"]:
        low, high = queue["minOffset"], queue["maxOffset"]
        row = out.setdefault(queue["topic"], {"queues": 0, "messages": 0, "bytes": 0, "times": []})
        row["queues"] += 1
        row["messages"] += high - low
        row["bytes"] += sum(u["size"] for u in queue["cq"] if low <= u["queueOffset"] < high)
        row["times"] += [m["storeTimestamp"] for m in queue["messages"]
                         if low <= m["queueOffset"] < high]
    return out


def _kind(topic: str) -> str:
    if topic.startswith("%RETRY%"):
        return "retry"
    if topic.startswith("%DLQ%"):
        return "dlq"
    if topic.startswith("rmq_sys_") or topic in {
            "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "TRANS_CHECK_MAX_TIME_TOPIC", "RMQ_SYS_TRACE_TOPIC", "OFFSET_MOVED_EVENT",
            "SELF_TEST_TOPIC", "BenchmarkTest", "TBW102"}:
        return "system"
    return "normal"


@pytest.fixture(scope="module", params=fixture_dirs(), ids=fixture_id)
def opened(request, tmp_path_factory):
    fixture = request.param
    root = copy_store(fixture, str(tmp_path_factory.mktemp("admin")))
    store = MessageStore.open(store_config(fixture, root), read_only=True)
    yield fixture, load_dump(fixture), store
    store.close()


def test_topics_agree_with_the_real_store(opened):
    _fixture, dump, store = opened
    expected = _expected_topics(dump)
    rows = {row["topic"]: row for row in store.inspect.topics()}
    assert set(expected) <= set(rows)
    for topic, want in expected.items():
        row = rows[topic]
        assert (row["queues"], row["messages"], row["bytes"]) == \
            (want["queues"], want["messages"], want["bytes"]), topic
        assert row["first_store_ms"] == min(want["times"])
        assert row["last_store_ms"] == max(want["times"])
        span_s = (row["last_store_ms"] - row["first_store_ms"]) / 1000
        assert row["put_rate_per_s"] == pytest.approx(want["messages"] / span_s)
        assert row["kind"] == _kind(topic)
    for topic in set(rows) - set(expected):        # only in topics.json: nothing stored
        assert rows[topic]["messages"] == 0 and rows[topic]["put_rate_per_s"] is None
    assert sum(r["messages"] for r in rows.values()) == dump["totalMessages"]


def test_topic_status_agrees_with_the_real_store(opened):
    _fixture, dump, store = opened
    for topic in {q["topic"] for q in dump["queues"]}:
        queues = sorted((q for q in dump["queues"] if q["topic"] == topic), key=lambda q: q["queueId"])
        rows = store.inspect.topic_status(topic)
        assert [(r["queue_id"], r["min_offset"], r["max_offset"]) for r in rows] == \
            [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in queues]
        for row, queue in zip(rows, queues):
            last = [m["storeTimestamp"] for m in queue["messages"]
                    if m["queueOffset"] == queue["maxOffset"] - 1]
            assert row["last_updated_ms"] == (last[0] if last else None)
    assert store.inspect.topic_status("NoSuchTopic") == []


def _expected_lag(broker: int, low: int, consumer: int) -> int:
    return 0 if consumer > broker else broker - max(consumer, low)


def test_consumer_progress_agrees_with_the_real_store(opened):
    _fixture, dump, store = opened
    queues = {(q["topic"], q["queueId"]): q for q in dump["queues"]}
    rows = store.inspect.consumer_progress()
    by_key = {(r["group"], r["topic"], r["queue_id"]): r for r in rows}
    committed = 0
    for key, offsets in dump["consumerOffsets"].items():
        topic, group = key.split("@", 1)
        for queue_id, offset in offsets.items():
            queue = queues.get((topic, int(queue_id)))
            row = by_key[(group, topic, int(queue_id))]
            committed += 1
            assert row["consumer_offset"] == offset
            broker = queue["maxOffset"] if queue else 0
            assert row["broker_offset"] == broker
            assert row["lag"] >= 0
            if queue:
                assert row["lag"] == _expected_lag(broker, queue["minOffset"], offset)
                stored = [m["storeTimestamp"] for m in queue["messages"]
                          if m["queueOffset"] == offset - 1]
                assert row["last_store_ms"] == (stored[0] if stored and offset <= broker else None)
            assert (row["note"] != "") == (queue is None or offset > broker or
                                           offset < queue["minOffset"])
    uncommitted = [r for r in rows if r["consumer_offset"] is None]
    assert len(rows) == committed + len(uncommitted)
    for row in uncommitted:
        queue = queues[(row["topic"], row["queue_id"])]
        assert row["lag"] == queue["maxOffset"] - queue["minOffset"] and row["note"] == NOTE_NO_OFFSET
    for group in {r["group"] for r in rows}:
        assert store.inspect.consumer_progress(group) == [r for r in rows if r["group"] == group]


def test_broker_status_agrees_with_the_real_store(opened):
    _fixture, dump, store = opened
    status = store.inspect.broker_status()
    log = dump["commitLog"]
    assert (status["commit_log_min_offset"], status["commit_log_max_offset"]) == \
        (log["minPhyOffset"], log["maxPhyOffset"])
    assert status["dispatch_behind_bytes"] == log["dispatchBehindBytes"] == 0
    assert status["messages"] == dump["totalMessages"]
    assert status["queues"] == len(dump["queues"])
    stored = [m for q in dump["queues"] for m in q["messages"]]
    first = [m["storeTimestamp"] for m in stored if m["commitLogOffset"] == log["minPhyOffset"]]
    if first:
        assert status["earliest_message_time_ms"] == first[0]
    elif stored:        # the first record is in no consume queue (e.g. a prepared transaction)
        assert status["earliest_message_time_ms"] <= min(m["storeTimestamp"] for m in stored)
    assert 0 <= status["commit_log_disk_ratio"] <= 1


# -- lag edge cases -------------------------------------------------------------------------------

@pytest.mark.parametrize("broker, low, consumer, exists, lag, note_has", [
    (10, 0, 4, True, 6, None),
    (10, 0, 10, True, 0, None),
    (10, 0, 15, True, 0, "ahead of the queue's max 10"),          # #2743: truncated queue
    (10, 3, 1, True, 7, "below the queue's min 3"),               # cleanup deleted 1..2
    (10, 2, None, True, 8, "no offset committed"),
    (10, 2, -1, True, 8, "no offset committed"),
    (0, 0, 7, False, 0, "no consume queue"),                      # queue deleted
])
def test_clamp_lag(broker, low, consumer, exists, lag, note_has):
    got_lag, note = clamp_lag(broker, low, consumer, exists)
    assert got_lag == lag and got_lag >= 0
    assert (note == "") if note_has is None else (note_has in note)


def test_topic_kinds():
    assert [topic_kind(t) for t in ("TopicA", "%RETRY%G1", "%DLQ%G1", "SCHEDULE_TOPIC_XXXX",
                                    "rmq_sys_wheel_timer", "TBW102")] == \
        ["normal", "retry", "dlq", "system", "system", "system"]


def test_consumer_progress_edge_cases_on_a_written_store(tmp_path):
    config = StoreConfig.from_dict({}, store_path_root_dir=str(tmp_path / "store"))
    with MessageStore.open(config) as store:
        for i in range(5):
            store.put_message(Message("T", b"m%d" % i, queue_id=0))
        store.put_message(Message("T", b"x", queue_id=1))
        store.dispatch_pending()
        store.commit_consumer_offset("G", "T", 0, 9)        # ahead of max 5
        store.commit_consumer_offset("G", "Gone", 0, 3)     # a queue with no consume queue
        store.commit_consumer_offset("H", "T", 0, 2)
        store.put_message(Message("%RETRY%Quiet", b"r", queue_id=0))   # a group without offsets
        store.dispatch_pending()
        assert store.inspect.consumer_groups() == ["G", "H", "Quiet"]
        rows = {(r["group"], r["topic"], r["queue_id"]): r for r in store.inspect.consumer_progress()}
    assert rows[("G", "T", 0)]["lag"] == 0 and "ahead" in rows[("G", "T", 0)]["note"]
    assert rows[("G", "T", 0)]["last_store_ms"] is None
    assert rows[("G", "T", 1)]["consumer_offset"] is None and rows[("G", "T", 1)]["lag"] == 1
    assert rows[("G", "Gone", 0)]["lag"] == 0 and "no consume queue" in rows[("G", "Gone", 0)]["note"]
    assert rows[("H", "T", 0)]["lag"] == 3 and rows[("H", "T", 0)]["note"] == ""
    assert rows[("H", "T", 0)]["last_store_ms"] is not None


# -- cleanup explanation --------------------------------------------------------------------------

# Stores with a commit-log directory (a DLedger store keeps its log in dledger-<id>/ instead).
ROLLED = [f for f in fixture_dirs() if os.path.isdir(os.path.join(f, "store", "commitlog"))
          and len(os.listdir(os.path.join(f, "store", "commitlog"))) >= 3]


def _local_ms(hour: int) -> int:
    return int(datetime(2026, 6, 15, hour, 30).timestamp() * 1000)


def _open_aged(fixture, tmp_path, age_ms: int, now_ms: int, **overrides):
    root = copy_store(fixture, str(tmp_path))
    log_dir = os.path.join(root, "commitlog")
    for name in os.listdir(log_dir):
        os.utime(os.path.join(log_dir, name), ((now_ms - age_ms) / 1000,) * 2)
    store = MessageStore.open(store_config(fixture, root, **overrides), start_services=False)
    store.services.cleanup.now_ms = lambda: now_ms
    return root, store


@pytest.mark.parametrize("fixture", ROLLED[:1], ids=fixture_id)
@pytest.mark.parametrize("ratio, space_full, immediately, refused", [
    (0.50, False, False, False), (0.80, True, False, False),
    (0.87, True, True, False), (0.95, True, True, True)])
@pytest.mark.parametrize("expired", [False, True])
def test_explain_predicts_the_pass_at_each_watermark(fixture, tmp_path, ratio, space_full,
                                                     immediately, refused, expired):
    now_ms = _local_ms(10)                                 # not deleteWhen's 04
    age_ms = (73 if expired else 1) * HOUR_MS
    root, store = _open_aged(fixture, tmp_path, age_ms, now_ms)
    try:
        store.services.cleanup.disk_ratio_of = lambda _path: ratio
        files = sorted(os.listdir(os.path.join(root, "commitlog")))
        before = tree_fingerprint(root)
        explain = store.inspect.cleanup_explain(now_ms)
        assert tree_fingerprint(root) == before                     # no change to disk
        assert (explain["space_full"], explain["clean_immediately"], explain["writes_refused"]) == \
            (space_full, immediately, refused)
        assert explain["oldest_file_expired"] is expired and not explain["time_up"]
        assert explain["runs_now"] is space_full
        goes = space_full and (expired or immediately)
        want = files[:-1] if goes else []                       # never the last file
        assert explain["would_delete_files"] == want
        assert explain["would_delete_bytes"] == sum(
            os.path.getsize(os.path.join(root, "commitlog", f)) for f in want)
        manual = files[:-1] if (expired or immediately) else []
        assert explain["manual_would_delete_files"] == manual
        assert any("fileReservedTime is 72 h" in r for r in explain["reasons"])
        result = store.services.cleanup.run_once()                  # the pass it predicted
        assert result.commit_log_files_deleted == len(want)
        assert sorted(os.listdir(os.path.join(root, "commitlog"))) == files[len(want):]
    finally:
        store.close()


@pytest.mark.parametrize("fixture", ROLLED[:1], ids=fixture_id)
def test_explain_uses_the_configured_watermarks_and_delete_when(fixture, tmp_path):
    now_ms = _local_ms(4)
    _root, store = _open_aged(fixture, tmp_path, 100 * HOUR_MS, now_ms,
                              disk_max_used_space_ratio=60, delete_when="03;04",
                              file_reserved_time=120)
    try:
        store.services.cleanup.disk_ratio_of = lambda _path: 0.65
        explain = store.inspect.cleanup_explain(now_ms)
        assert explain["disk_max_used_space_ratio"] == 0.60 and explain["space_full"]
        assert explain["time_up"] and explain["hour_now"] == 4 and explain["delete_when"] == "03;04"
        assert explain["file_reserved_time_hours"] == 120 and not explain["oldest_file_expired"]
        assert explain["would_delete_files"] == []
        assert "younger than fileReservedTime" in explain["stops_because"]
    finally:
        store.close()


def test_explain_on_a_single_file_store_says_the_last_file_stays(tmp_path):
    config = StoreConfig.from_dict({}, store_path_root_dir=str(tmp_path / "store"))
    with MessageStore.open(config) as store:
        store.put_message(Message("T", b"x"))
        store.services.cleanup.disk_ratio_of = lambda _path: 0.99
        explain = store.inspect.cleanup_explain()
    assert explain["commit_log_files"] == 1 and explain["would_delete_files"] == []
    assert "never deleted" in explain["stops_because"] and explain["writes_refused"]
    assert any("last file is never deleted" in r for r in explain["reasons"])


@pytest.mark.parametrize("fixture", ROLLED[:1], ids=fixture_id)
def test_explain_without_clean_file_forcibly_keeps_young_files(fixture, tmp_path):
    now_ms = _local_ms(10)
    _root, store = _open_aged(fixture, tmp_path, HOUR_MS, now_ms, clean_file_forcibly_enable=False)
    try:
        store.services.cleanup.disk_ratio_of = lambda _path: 0.87
        explain = store.inspect.cleanup_explain(now_ms)
        assert explain["clean_immediately"] and explain["runs_now"]
        assert explain["would_delete_files"] == [] and explain["manual_would_delete_files"] == []
        assert any("cleanFileForciblyEnable=false keeps the age rule" in r for r in explain["reasons"])
        assert store.services.cleanup.run_once().commit_log_files_deleted == 0
    finally:
        store.close()


@pytest.mark.parametrize("fixture", ROLLED[-1:], ids=fixture_id)
def test_the_rocksdb_consume_queue_gives_the_same_views(fixture, tmp_path):
    from store.tools.convert_cq import convert_consume_queues
    root = copy_store(fixture, str(tmp_path))
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        want = (store.inspect.topics(), store.inspect.consumer_progress(),
                [store.inspect.topic_status(t["topic"]) for t in store.inspect.topics()])
    convert_consume_queues(store_config(fixture, root), "rocksdb")
    with MessageStore.open(store_config(fixture, root, store_type="defaultRocksDB"),
                           read_only=True) as store:
        got = (store.inspect.topics(), store.inspect.consumer_progress(),
               [store.inspect.topic_status(t["topic"]) for t in store.inspect.topics()])
    assert got == want and sum(t["messages"] for t in got[0]) == load_dump(fixture)["totalMessages"]
