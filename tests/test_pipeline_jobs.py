"""Pipeline jobs on the fixtures: verify (clean and on damaged copies), stats, export, the CLI."""

from __future__ import annotations

import collections
import json
import struct

import pytest

from store.codec import fastjson
from store.pipeline.frames import commitlog_table, consume_queue_table, index_table
from store.pipeline.jobs_export import export
from store.pipeline.jobs_stats import load_consumer_offsets, stats
from store.pipeline.jobs_verify import verify
from tests.pipeline_util import (  # noqa: F401 (spark is a fixture)
    SPARK_WARNING_FILTERS, copy_store, dump_messages, fixture_dirs, fixture_id, read_dump, spark,
)

pytestmark = [pytest.mark.spark, *SPARK_WARNING_FILTERS]
FIXTURES = fixture_dirs()
by_fixture = pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
ROLLED = next(f for f in FIXTURES if f.name == "rolled-64k")


@by_fixture
def test_verify_is_clean_on_every_fixture(spark, fixture):
    report = verify(spark, fixture / "store")
    assert report.clean, report.summary()
    assert report.log_end_offset == read_dump(fixture)["commitLog"]["maxPhyOffset"]


def _write_at(path, position, data):
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(data)


def test_verify_finds_each_damage_precisely(spark, tmp_path):
    store = copy_store(ROLLED, tmp_path)
    units = consume_queue_table(store).to_pylist()
    entries = index_table(store).to_pylist()
    geometry = index_table(store, "headers").to_pylist()[0]
    queue_a0 = [u for u in units if (u["topic"], u["queue_id"]) == ("TopicA", 0)]
    # 1. a wrong tagsCode in TopicA/0 unit 3
    victim = queue_a0[3]
    _write_at(store / "consumequeue/TopicA/0" / victim["file_name"], (victim["queue_offset"] * 20) % 2000 + 12,
              struct.pack(">q", 12345))
    # 2. one unit after the end of TopicB/1 that points past the log end
    queue_b1 = [u for u in units if (u["topic"], u["queue_id"]) == ("TopicB", 1)]
    last = queue_b1[-1]
    next_offset = last["queue_offset"] + 1
    _write_at(store / "consumequeue/TopicB/1" / f"{(next_offset * 20) // 2000 * 2000:020d}", (next_offset * 20) % 2000,
              struct.pack(">qiq", 10**7, 300, 0))
    # 3. an index entry moved to another record's start, 4. one moved to a non-record offset
    slots = geometry["max_hash_slot_num"]
    moved, broken = entries[10], entries[20]
    other_record = next(e["phy_offset"] for e in entries if e["phy_offset"] != moved["phy_offset"])
    for entry, new_offset in ((moved, other_record), (broken, broken["phy_offset"] + 1)):
        position = 40 + 4 * slots + 20 * entry["entry_number"] + 4
        _write_at(store / "index" / entry["file_name"], position, struct.pack(">q", new_offset))
    report = verify(spark, store)
    assert not report.clean
    assert report.counts == {"cq_mismatch": 1, "cq_past_log_end": 1, "index_key_mismatch": 1,
                             "index_no_record": 1, "index_missing_key": 2}, report.summary()
    mismatch = report.examples["cq_mismatch"][0]
    assert (mismatch["topic"], mismatch["queue_id"], mismatch["queue_offset"]) == ("TopicA", 0, victim["queue_offset"])
    assert report.examples["cq_past_log_end"][0]["queue_offset"] == next_offset
    missing = sorted(e["phy_offset"] for e in report.examples["index_missing_key"])
    assert missing == sorted([moved["phy_offset"], broken["phy_offset"]])


def test_verify_sees_consume_queue_units_past_a_truncated_log(spark, tmp_path):
    store = copy_store(ROLLED, tmp_path)
    rows = commitlog_table(store, columns=["phy_offset", "file_name", "position", "store_size", "keys",
                                           "uniq_key"]).to_pylist()
    last = rows[-1]
    _write_at(store / "commitlog" / last["file_name"], last["position"], b"\0" * last["store_size"])
    report = verify(spark, store)
    keys = len([k for k in (last["keys"] or "").split(" ") if k]) + (1 if last["uniq_key"] else 0)
    assert report.log_end_offset == last["phy_offset"]
    assert report.counts == {"cq_past_log_end": 1, "index_past_log_end": keys}, report.summary()


def test_stats_agree_with_read_dump(spark):
    result = stats(spark, ROLLED / "store", bucket_ms=1000)
    dump = read_dump(ROLLED)
    per_queue = {(r.topic, r.queue_id): r.messages for r in result["queues"].itertuples()}
    assert per_queue == {(q["topic"], q["queueId"]): len(q["messages"]) for q in dump["queues"]}
    tags = collections.Counter((m["topic"], m["tags"]) for m in dump_messages(ROLLED).values())
    top = {(r.topic, r.tags): r.messages for r in result["tags"].itertuples()}
    assert all(tags[key] == count for key, count in top.items())
    assert result["rates"]["messages"].sum() == len(dump_messages(ROLLED))
    assert result["size_histogram"]["messages"].sum() == len(dump_messages(ROLLED))
    max_offsets = {(q["topic"], q["queueId"]): q["maxOffset"] for q in dump["queues"]}
    for row in result["consumer_lag"].itertuples():
        expected = dump["consumerOffsets"][f"{row.topic}@{row.group}"][str(row.queue_id)]
        assert row.consumer_offset == expected
        assert row.lag == max_offsets[(row.topic, row.queue_id)] - expected
    keys = {t: len({k for m in dump_messages(ROLLED).values() if m["topic"] == t for k in (m["keys"] or "").split()})
            for t in per_queue and {t for t, _ in per_queue}}
    assert {r.topic: r.distinct_keys for r in result["topics"].itertuples()} == keys


def test_consumer_offsets_parse_both_versions():
    for fixture in FIXTURES:
        offsets = load_consumer_offsets(fixture / "store")
        expected = read_dump(fixture).get("consumerOffsets") or {}
        got = {f"{r.topic}@{r.group}": {} for r in offsets.itertuples()}
        for r in offsets.itertuples():
            got[f"{r.topic}@{r.group}"][str(r.queue_id)] = r.consumer_offset
        assert got == expected, fixture
    assert fastjson.loads('{"t@g":{0:5,12:7\n}}') == {"t@g": {0: 5, 12: 7}}


def test_consumer_offsets_fall_back_to_bak(tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    (config / "consumerOffset.json").write_text('{"offsetTable":{"T@G":{0:', encoding="utf-8")  # torn write
    (config / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@G":{0:5,1:12\n}}}', encoding="utf-8")
    offsets = load_consumer_offsets(tmp_path)
    assert sorted(offsets.itertuples(index=False, name=None)) == [("G", "T", 0, 5), ("G", "T", 1, 12)]


def test_export_parquet_by_topic_and_date(spark, tmp_path):
    all_rows = commitlog_table(ROLLED / "store", columns=["phy_offset", "topic", "store_timestamp"])
    result = export(spark, str(ROLLED / "store"), str(tmp_path / "all"))
    assert result.rows == all_rows.num_rows
    written = spark.read.parquet(str(tmp_path / "all"))
    assert sorted(r.phy_offset for r in written.select("phy_offset").collect()) == all_rows.column(
        "phy_offset").to_pylist()
    assert {p.name.split("=")[0] for p in (tmp_path / "all").iterdir() if p.is_dir()} == {"topic"}
    stamps = sorted(all_rows.column("store_timestamp").to_pylist())
    middle = stamps[len(stamps) // 2]
    part = export(spark, str(ROLLED / "store"), str(tmp_path / "part"), topics=["TopicB"], start_ms=middle)
    expected = [r for r in all_rows.to_pylist() if r["topic"] == "TopicB" and r["store_timestamp"] >= middle]
    assert part.rows == len(expected)


def test_cli_verify_and_stats(spark, capsys):
    from store.pipeline.cli import add_spark_subcommands
    import argparse

    parser = argparse.ArgumentParser()
    add_spark_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["spark", "verify", "--store", str(ROLLED / "store"), "--json", "--no-progress"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["clean"] is True
    args = parser.parse_args(["spark", "stats", "--store", str(ROLLED / "store"), "--json", "--top", "3"])
    assert args.func(args) == 0
    payload = json.loads(capsys.readouterr().out)
    assert len(payload["properties"]) == 3 and payload["consumer_lag"]
