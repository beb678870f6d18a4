"""The commit-log stream: appends while a query runs, segment rolling, stop/restart, exactly once."""

from __future__ import annotations

import threading
import time

import pytest

from store.pipeline.frames import commitlog_table
from store.pipeline.jobs_export import export_stream, topic_rates_stream
from store.pipeline.streaming import advance, plan_range
from store.pipeline.synthetic import CommitLogWriter, SyntheticMessage
from tests.pipeline_util import (  # noqa: F401 (spark is a fixture)
    SPARK_WARNING_FILTERS, copy_store, fixture_dirs, spark,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow, *SPARK_WARNING_FILTERS]
ROLLED = next(f for f in fixture_dirs() if f.name == "rolled-64k")
SEGMENT_BYTES = 65536


def _append(writer: CommitLogWriter, count: int, start: int, pause_s: float = 0.0) -> None:
    for i in range(start, start + count):
        topic = ("TopicA", "TopicB", "TopicD")[i % 3]
        writer.append(SyntheticMessage(topic=topic, queue_id=i % 2, body=f"stream-{i}-".encode() * 20,
                                       properties_raw=f"KEYS\x01s{i}\x02TAGS\x01T{i % 4}".encode()))
        if pause_s:
            time.sleep(pause_s)


def test_advance_and_plan_cover_the_log_exactly():
    store = ROLLED / "store"
    offsets = commitlog_table(store, columns=["phy_offset"]).column("phy_offset").to_pylist()
    end = advance(str(store), 0)
    assert end == 265520
    middle = advance(str(store), 0, max_records=200)
    assert middle == offsets[200]
    first = [s for s in plan_range(str(store), 0, middle)]
    second = [s for s in plan_range(str(store), middle, end)]
    assert first[-1].stop_position is not None and second[0].start_position == middle - second[0].file_from_offset


def test_export_stream_is_exactly_once_across_rolling_and_restart(spark, tmp_path):
    store = copy_store(ROLLED, tmp_path)
    writer = CommitLogWriter(store, SEGMENT_BYTES)
    segments_before = len(list((store / "commitlog").iterdir()))
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    query = export_stream(spark, str(store), str(output), str(checkpoint), trigger_seconds=0.5)
    appender = threading.Thread(target=_append, args=(writer, 200, 0, 0.005))
    appender.start()
    appender.join()
    query.processAllAvailable()
    query.stop()
    assert len(list((store / "commitlog").iterdir())) > segments_before  # the appends rolled a segment

    _append(writer, 60, 200)  # written while no query runs
    restarted = export_stream(spark, str(store), str(output), str(checkpoint), available_now=True)
    restarted.awaitTermination(300)

    exported = sorted(r.phy_offset for r in spark.read.parquet(str(output)).select("phy_offset").collect())
    expected = commitlog_table(store, columns=["phy_offset"]).column("phy_offset").to_pylist()
    assert len(expected) == 720 + 260
    assert exported == expected  # every record once: none lost, none duplicated


def test_topic_rates_stream(spark, tmp_path):
    store = copy_store(ROLLED, tmp_path)
    frame = topic_rates_stream(spark, str(store), window_seconds=3600, starting="earliest")
    query = (frame.writeStream.outputMode("complete").format("memory").queryName("rates_test")
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    rows = spark.sql("select topic, sum(messages) as n from rates_test group by topic").collect()
    assert {r.topic: r.n for r in rows} == {"TopicA": 240, "TopicB": 240, "TopicC": 240}
