"""Export jobs: the commit log as Parquet partitioned by topic and date (batch and continuous), and the
live per-topic rates stream.

The `date` partition is the UTC day of `store_timestamp` (broker time when the record was stored). The
batch export overwrites only the partitions it writes (dynamic partition overwrite), so exporting one
day or one topic again does not delete the others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

from store.pipeline.commitlog_decoder import COMMITLOG_SCHEMA

EXPORT_PARTITIONS = ["topic", "date"]


def commitlog_frame(spark, store_dir: str, *, topics=None, start_ms: int | None = None, end_ms: int | None = None,
                    columns: list[str] | None = None):
    """The `rocketmq-commitlog` DataFrame with topic / [start_ms, end_ms) store-time filters pushed down."""
    reader = spark.read.format("rocketmq-commitlog")
    if topics:
        reader = reader.option("topics", ",".join(topics))
    if start_ms is not None:
        reader = reader.option("storeTimestampMin", str(start_ms))
    if end_ms is not None:
        reader = reader.option("storeTimestampMax", str(end_ms))
    if columns is not None:
        from store.pipeline.spark_sources import spark_schema

        reader = reader.schema(spark_schema(pa.schema([COMMITLOG_SCHEMA.field(c) for c in columns])))  # decode only these
    return reader.load(os.fspath(store_dir))


def with_date(frame):
    from pyspark.sql import functions as F

    return frame.withColumn("date", F.to_date(F.timestamp_millis(F.col("store_timestamp"))))


@dataclass(frozen=True)
class ExportResult:
    output_dir: str
    rows: int
    partitions: int


def export(spark, store_dir: str, output_dir: str, *, topics=None, start_ms: int | None = None,
           end_ms: int | None = None, mode: str = "overwrite") -> ExportResult:
    """Write every record (optionally only `topics` / store time in [start_ms, end_ms)) as Parquet."""
    frame = with_date(commitlog_frame(spark, store_dir, topics=topics, start_ms=start_ms, end_ms=end_ms))
    frame.write.mode(mode).partitionBy(*EXPORT_PARTITIONS).parquet(os.fspath(output_dir))
    written = spark.read.parquet(os.fspath(output_dir))
    if topics or start_ms is not None or end_ms is not None:
        written = written.where(_written_filter(topics, start_ms, end_ms))
    counts = written.groupBy(*EXPORT_PARTITIONS).count().collect()  # Parquet footers, no re-decode
    return ExportResult(os.fspath(output_dir), sum(r["count"] for r in counts), len(counts))


def _written_filter(topics, start_ms, end_ms):
    from pyspark.sql import functions as F

    condition = F.lit(True)
    if topics:
        condition &= F.col("topic").isin(list(topics))
    if start_ms is not None:
        condition &= F.col("store_timestamp") >= start_ms
    if end_ms is not None:
        condition &= F.col("store_timestamp") < end_ms
    return condition


def commitlog_stream(spark, store_dir: str, *, starting: str = "earliest", topics=None,
                     max_records_per_trigger: int | None = None):
    reader = spark.readStream.format("rocketmq-commitlog").option("startingOffsets", starting)
    if topics:
        reader = reader.option("topics", ",".join(topics))
    if max_records_per_trigger:
        reader = reader.option("maxRecordsPerTrigger", str(max_records_per_trigger))
    return reader.load(os.fspath(store_dir))


def export_stream(spark, store_dir: str, output_dir: str, checkpoint_dir: str, *, topics=None,
                  trigger_seconds: float | None = 5.0, available_now: bool = False,
                  max_records_per_trigger: int | None = None):
    """Start the continuous Parquet export; returns the `StreamingQuery`.

    Exactly once: the file sink commits each micro-batch in `output_dir/_spark_metadata` and the source
    replays the checkpointed phy_offset range after a restart, so a record is never written twice.
    """
    frame = with_date(commitlog_stream(spark, store_dir, topics=topics,
                                       max_records_per_trigger=max_records_per_trigger))
    writer = (frame.writeStream.format("parquet").partitionBy(*EXPORT_PARTITIONS)
              .option("path", os.fspath(output_dir)).option("checkpointLocation", os.fspath(checkpoint_dir))
              .queryName(f"rmqstore-export-{abs(hash(os.fspath(output_dir))) % 10**8}"))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(
        processingTime=f"{trigger_seconds} seconds")
    return writer.start()


def topic_rates_stream(spark, store_dir: str, *, window_seconds: int = 10, watermark_seconds: int = 60,
                       starting: str = "latest"):
    """Streaming DataFrame of messages and bytes per topic per `window_seconds` window of store time."""
    from pyspark.sql import functions as F

    frame = commitlog_stream(spark, store_dir, starting=starting)
    stamped = frame.select("topic", "store_size", F.timestamp_millis("store_timestamp").alias("stored_at"))
    return (stamped.withWatermark("stored_at", f"{watermark_seconds} seconds")
            .groupBy(F.window("stored_at", f"{window_seconds} seconds"), "topic")
            .agg(F.count("*").alias("messages"), F.sum("store_size").alias("bytes"))
            .withColumn("messages_per_second", F.col("messages") / F.lit(float(window_seconds))))
