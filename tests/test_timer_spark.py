"""The `rocketmq-timerlog` Spark source (store/pipeline/source_timerlog.py) against the real 5.3.3
timer fixtures' raw timer-log units."""

from __future__ import annotations

import pytest

from store.errors import ConfigError
from tests.fixtures_util import fixture_id, load_dump, store_config
from tests.pipeline_util import SPARK_WARNING_FILTERS, spark  # noqa: F401 (spark is a fixture)
from tests.test_timer_util import timer_fixtures

pytestmark = [pytest.mark.spark, *SPARK_WARNING_FILTERS]
FIXTURES = timer_fixtures()


def _reader(spark, fixture):
    config = store_config(fixture, "/unused")
    return (spark.read.format("rocketmq-timerlog")
            .option("mappedFileSizeTimerLog", str(config.mapped_file_size_timer_log))
            .option("timerPrecisionMs", str(config.timer_precision_ms)))


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_timerlog_source_matches_the_raw_units(spark, fixture):
    from store.pipeline.source_timerlog import TIMERLOG_SCHEMA
    table = _reader(spark, fixture).load(f"{fixture}/store").toArrow()
    assert table.schema.equals(TIMERLOG_SCHEMA)
    rows = sorted(table.to_pylist(), key=lambda r: r["pos"])
    want = [u for u in load_dump(fixture)["timerBefore"]["timerlogUnits"] if not u.get("blank")]
    assert [(r["file_name"], r["pos"], r["size"], r["prev_pos"], r["magic"],
             r["curr_write_time_ms"], r["delay_ms"], r["due_time_ms"], r["offset_py"], r["size_py"],
             r["topic_hash"], r["reserved"]) for r in rows] == [
        (u["file"], u["pos"], u["size"], u["prevPos"], u["magic"], u["currWriteTimeMs"],
         u["delayMsRel"], u["delayedTimeMs"], u["offsetPy"], u["sizePy"], u["realTopicHash"],
         u["reserved"]) for u in want]
    slots = {s["index"] for s in load_dump(fixture)["timerBefore"]["timerwheelSlots"]}
    assert {r["slot_index"] for r in rows} == slots
    pruned = _reader(spark, fixture).schema("pos long, due_time_ms long").load(
        f"{fixture}/store").toArrow()
    assert pruned.column_names == ["pos", "due_time_ms"] and pruned.num_rows == len(want)


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_timerlog_source_refuses_a_wrong_file_size(spark, fixture):
    with pytest.raises(Exception, match="expected 1048576"):
        (spark.read.format("rocketmq-timerlog").option("mappedFileSizeTimerLog", "1048576")
         .load(f"{fixture}/store").count())
    with pytest.raises(ConfigError):
        from store.pipeline.source_timerlog import _int_option
        _int_option({"timerPrecisionMs": "0"}, "timerPrecisionMs", 1000)
