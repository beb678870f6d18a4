"""The dashboard's pages against the real RocketMQ's answers: for every fixture (copied first, opened
read-only through the sidebar picker) the Overview, CommitLog, ConsumeQueue, Index and Health pages
run under AppTest, and what they SHOW (metric tiles, pointer tables, segment rows, record rows, queue
offsets, raw units, consumer offsets, key lookups, findings) is compared with the fixture's
read-dump.json, which the real broker wrote after loading the same files."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.app_util import close_fixture_stores, ok, open_store, registry_cleanup, start, visit  # noqa: E402,F401
from tests.fixtures_util import REPO_ROOT, copy_store, fixture_dirs, fixture_id, load_dump  # noqa: E402

LOOKUPS_PER_FIXTURE = 3


pytestmark = pytest.mark.usefixtures("close_fixture_stores")


def _open(fixture: str, tmp_path) -> tuple[AppTest, dict]:
    root = copy_store(fixture, str(tmp_path))
    at = open_store(start(timeout_s=90), root, "read-only", os.path.join(fixture, "store.properties"))
    assert at.session_state["store_key"] == f"read-only:{root}", "the fixture copy is the current store"
    return at, load_dump(fixture)


def _frame_with(at: AppTest, *columns: str):
    frames = [f.value for f in at.dataframe if set(columns) <= set(f.value.columns)]
    assert frames, (columns, [list(f.value.columns) for f in at.dataframe])
    return frames[0]


def _commitlog_files(dump: dict) -> int:
    # The log's files: commitlog/, or a DLedger store's dledger-<selfId>/data/.
    return sum(1 for f in dump["before"]["files"] if f["path"].startswith("commitlog/") or
               (f["path"].startswith("dledger-") and "/data/" in f["path"]))


def _records_by_offset(dump: dict) -> dict[int, tuple]:
    return {u["commitLogOffset"]: (q["topic"], q["queueId"], u["queueOffset"], u["size"])
            for q in dump["queues"] for u in q["cq"]}


FIXTURES = [pytest.param(f, id=fixture_id(f)) for f in fixture_dirs()]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_overview_and_commitlog_match_the_dump(fixture, tmp_path):
    at, dump = _open(fixture, tmp_path)
    at.toggle(key="overview_live").set_value(False)
    at.run()
    ok(at, "overview")
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["messages"] == f"{dump['totalMessages']:,}"
    assert tiles["queues"] == f"{len(dump['queues']):,}"
    assert tiles["topics"] == f"{len({q['topic'] for q in dump['queues']}):,}"
    assert tiles["segments"] == f"{_commitlog_files(dump):,}"
    pointers = _frame_with(at, "wrote", "min_phy_offset", "max_phy_offset").iloc[0]
    log = dump["commitLog"]
    assert (pointers["min_phy_offset"], pointers["max_phy_offset"], pointers["confirm"]) == \
        (log["minPhyOffset"], log["maxPhyOffset"], log["confirmOffset"])
    assert pointers["reput"] == log["maxPhyOffset"] - log["dispatchBehindBytes"]
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    titles = [s["layout"]["title"]["text"] for s in specs]
    assert any(f"{_commitlog_files(dump):,} segment file(s)" in t for t in titles), titles
    lanes = [t["y"][0] for s in specs for t in s["data"]
             if t.get("type") == "scatter" and t.get("mode") == "markers"]
    assert f"reput<br>{log['maxPhyOffset']:,}" in lanes

    visit(at, "commitlog")
    segments = _frame_with(at, "name", "file_from_offset", "records")
    assert len(segments) == _commitlog_files(dump)
    assert int(segments["records"].sum()) == dump["totalMessages"]
    rows = _frame_with(at, "phy_offset", "kind", "topic")
    expected = _records_by_offset(dump)
    records = rows[rows["kind"] == "RECORD"]
    first = log["minPhyOffset"] + (48 if "dledgerAfterStart" in dump else 0)  # DLedger: pos + 48
    assert len(records) and int(records.iloc[0]["phy_offset"]) == first
    for _, row in records.iterrows():
        topic, queue_id, queue_offset, size = expected[int(row["phy_offset"])]
        assert (row["topic"], row["queue_id"], row["queue_offset"], row["size"]) == \
            (topic, queue_id, queue_offset, size)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_consumequeue_matches_the_dump(fixture, tmp_path):
    at, dump = _open(fixture, tmp_path)
    visit(at, "consumequeue")
    queues = _frame_with(at, "topic", "queue_id", "min_offset", "max_offset")
    shown = {(r.topic, int(r.queue_id)): (int(r.min_offset), int(r.max_offset))
             for r in queues.itertuples()}
    assert shown == {(q["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"])
                     for q in dump["queues"]}
    committed = {}
    for key, per_queue in dump["consumerOffsets"].items():
        topic, group = key.split("@", 1)
        for queue_id, offset in per_queue.items():
            committed[(group, topic, int(queue_id))] = offset
    if committed:
        lag = _frame_with(at, "group", "topic", "queue_id")
        offset_column = next(c for c in lag.columns if "commit" in c)
        assert {(r["group"], r["topic"], int(r["queue_id"])): int(r[offset_column])
                for _, r in lag.iterrows()} == committed
    selected = at.selectbox(key="cq_queue").value
    queue = next(q for q in dump["queues"] if (q["topic"], q["queueId"]) == tuple(selected))
    units = _frame_with(at, "queue_offset", "unit_hex", "phy_offset")
    assert len(units) == min(20, len(queue["cq"]))
    for row, unit in zip(units.itertuples(), queue["cq"]):
        assert (row.queue_offset, row.phy_offset, row.size, row.tags_code) == \
            (unit["queueOffset"], unit["commitLogOffset"], unit["size"], unit["tagsCode"])
        assert row.record.startswith(f"{queue['topic']} q{queue['queueId']} #{unit['queueOffset']}")
    # Jump by store time: the default is the queue's own first store time, not a pinned date.
    at.radio(key="cq_jump").set_value("store time")
    at.run()
    ok(at, "store time")
    first_ms = _first_store_ms(at, queue)
    if queue.get("earliestMessageTime", -1) > 0:
        assert first_ms == queue["earliestMessageTime"]
    day = at.date_input(key=f"cq_date_{queue['topic']}_{queue['queueId']}").value
    assert day == dt.datetime.fromtimestamp(first_ms / 1000, dt.timezone.utc).date()
    assert any(f"queue offset {queue['minOffset']}" in i.value for i in at.info), \
        [i.value for i in at.info]


def _first_store_ms(at: AppTest, queue: dict) -> int:
    """The first message's store time as the page's caption states it, parsed back to ms."""
    caption = next(c.value for c in at.caption if c.value.startswith("This queue's messages"))
    text = caption.split("stored from ")[1].split(" UTC")[0]
    moment = dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)


@pytest.mark.parametrize("fixture", FIXTURES)
def test_index_and_health_match_the_dump(fixture, tmp_path):
    at, dump = _open(fixture, tmp_path)
    visit(at, "index_files")
    index_files = sum(1 for f in dump["before"]["files"] if f["path"].startswith("index/"))
    if index_files:
        headers = _frame_with(at, "file", "index_count", "entries_used")
        assert len(headers) == index_files
    topics = at.selectbox(key="ix_topic").options if index_files else []
    for query in dump["queries"][:LOOKUPS_PER_FIXTURE]:
        if query["topic"] not in topics:
            continue
        at.selectbox(key="ix_topic").set_value(query["topic"])
        at.text_input(key="ix_key").input(query["key"])
        [b for b in at.button if b.label == "Walk the index"][0].click()
        at.run()
        ok(at, query["key"])
        hits = sorted(h["commitLogOffset"] for h in query["hits"])
        found = sorted(int(v) for v in _frame_with(at, "phy_offset", "msg_id")["phy_offset"]) \
            if hits else []
        if len(hits) < query["maxNum"]:
            assert found == hits, query["key"]
        else:
            assert set(hits) <= set(found), query["key"]
        charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
        walk = [s for s in charts if "Index walk" in s["layout"]["title"]["text"]]
        assert walk and f"{len(found)} match(es)" in walk[0]["layout"]["title"]["text"]

    visit(at, "health")
    findings = [f.value for f in at.dataframe if "severity" in f.value.columns]
    rows = findings[0] if findings else None
    abort_rows = 0 if rows is None else \
        int(((rows["component"] == "files") & (rows["path"] == "abort")).sum())
    assert abort_rows == (1 if dump["before"]["abortFileExists"] else 0)
    errors = 0 if rows is None else int((rows["severity"] == "error").sum())
    assert dump["loadOk"] and errors == 0, None if rows is None else rows.to_dict("records")
    if rows is None:
        assert [s.value for s in at.success]


def test_overview_explains_confirm_minus_one():
    """The Overview's pointer table shows confirm -1; the page says what it means (not an error)."""
    at = AppTest.from_file(os.path.join(REPO_ROOT, "app", "main.py"), default_timeout=60)
    at.run()
    at.switch_page("../pages/overview.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("confirm offset -1: not set" in c.value for c in at.caption)
