"""Spark data sources: same rows as read-dump.json and as the pandas path, for every fixture."""

from __future__ import annotations

import pyarrow as pa
import pytest

from store.pipeline.commitlog_decoder import COMMITLOG_SCHEMA
from store.pipeline.cq_decoder import CQ_SCHEMA
from store.pipeline.frames import commitlog_table, consume_queue_table, index_table
from store.pipeline.index_decoder import INDEX_SCHEMAS
from store.pipeline.spark_sources import spark_schema
from tests.pipeline_util import (  # noqa: F401 (spark is a fixture)
    SPARK_WARNING_FILTERS, compare_with_dump, dump_units, fixture_dirs, fixture_id, spark,
)

pytestmark = [pytest.mark.spark, *SPARK_WARNING_FILTERS]
FIXTURES = fixture_dirs()
by_fixture = pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])


def _sorted(table: pa.Table, keys: list[str]) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in keys])


def test_declared_schemas_round_trip_through_spark():
    from pyspark.sql.pandas.types import to_arrow_schema

    for schema in (COMMITLOG_SCHEMA, CQ_SCHEMA, *INDEX_SCHEMAS.values()):
        assert to_arrow_schema(spark_schema(schema), timezone="UTC").equals(schema)


@by_fixture
def test_commitlog_source_matches_read_dump_and_pandas(spark, fixture):
    store = str(fixture / "store")
    frame = spark.read.format("rocketmq-commitlog").option("splitBytes", "16384").load(store)
    from_spark = _sorted(frame.toArrow(), ["phy_offset"])
    assert from_spark.schema.equals(COMMITLOG_SCHEMA)
    assert compare_with_dump(from_spark.to_pylist(), fixture, fixture / "store") == []
    assert from_spark.equals(commitlog_table(store))


@by_fixture
def test_consumequeue_and_index_sources_match_pandas(spark, fixture):
    store = str(fixture / "store")
    keys = ["topic", "queue_id", "queue_offset"]
    units = _sorted(spark.read.format("rocketmq-consumequeue").load(store).toArrow(), keys)
    assert units.equals(_sorted(consume_queue_table(store), keys))
    got = sorted(zip(*[units.column(c).to_pylist() for c in
                       ("topic", "queue_id", "queue_offset", "phy_offset", "size", "tags_code")]))
    assert got == dump_units(fixture)
    for kind, order in (("entries", ["file_name", "entry_number"]), ("headers", ["file_name"]),
                        ("slots", ["file_name", "slot"])):
        table = spark.read.format("rocketmq-index").option("kind", kind).load(store).toArrow()
        assert _sorted(table, order).equals(_sorted(index_table(store, kind), order)), kind


def test_pruned_schema_and_pushed_filters(spark):
    store = str(FIXTURES[0] / "store")
    pruned = spark.read.format("rocketmq-commitlog").schema("topic string, phy_offset bigint, tags string").load(store)
    table = pruned.toArrow()
    assert table.schema.names == ["topic", "phy_offset", "tags"]
    expected = commitlog_table(store, columns=["topic", "phy_offset", "tags"])
    assert _sorted(table, ["phy_offset"]).equals(expected)
    stamps = sorted(expected.column("phy_offset").to_pylist())
    pushed = (spark.read.format("rocketmq-commitlog").option("pushFilters", "true").load(store)
              .where("topic IN ('TopicA') AND phy_offset >= 0").select("topic", "phy_offset"))
    rows = pushed.collect()
    assert {r.topic for r in rows} == {"TopicA"}
    assert len(rows) == sum(1 for t in expected.column("topic").to_pylist() if t == "TopicA")
    assert len(stamps) == expected.num_rows


def test_wrong_column_type_is_a_clear_error(spark):
    store = str(FIXTURES[0] / "store")
    with pytest.raises(Exception, match="phy_offset"):
        spark.read.format("rocketmq-commitlog").schema("phy_offset int").load(store).collect()
