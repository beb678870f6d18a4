"""The stats job: what is in the store, per topic and queue, and how far behind each consumer group is.

Every result is a small pandas DataFrame (aggregates only ever leave Spark): `queues`, `topics`,
`size_histogram`, `rates`, `tags`, `properties`, `consumer_lag`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from store.codec import fastjson
from store.errors import CorruptDataError
from store.pipeline.jobs_export import commitlog_frame

STATS_COLUMNS = ["topic", "queue_id", "queue_offset", "store_size", "store_timestamp", "sys_flag", "keys",
                 "uniq_key", "tags", "properties"]


def load_consumer_offsets(store_dir: str | os.PathLike) -> pd.DataFrame:
    """(group, topic, queue_id, consumer_offset) from config/consumerOffset.json (or its .bak)."""
    config = Path(store_dir) / "config"
    rows = []
    for name in ("consumerOffset.json", "consumerOffset.json.bak"):
        path = config / name
        if path.is_file() and path.stat().st_size:
            # fastjson writes the queue-id keys bare (`{0:5,1:12}`): the codec's reader parses them.
            # A torn file (crash while writing) falls back to the .bak, as the broker does.
            try:
                table = fastjson.loads(path.read_text(encoding="utf-8")).get("offsetTable", {})
            except CorruptDataError:
                continue
            for topic_at_group, queues in table.items():
                topic, _, group = topic_at_group.rpartition("@")
                rows += [(group, topic, int(q), int(o)) for q, o in queues.items()]
            break
    return pd.DataFrame(rows, columns=["group", "topic", "queue_id", "consumer_offset"])


def stats(spark, store_dir: str, *, bucket_ms: int = 60_000, top: int = 20, topics=None) -> dict[str, pd.DataFrame]:
    """Aggregates of the commit log (one decode, cached) and consumer lag against the consume queues."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    frame = commitlog_frame(spark, store_dir, topics=topics, columns=STATS_COLUMNS).cache()
    try:
        result = {
            "queues": frame.groupBy("topic", "queue_id").agg(
                F.count("*").alias("messages"), F.sum("store_size").alias("bytes"),
                F.min("queue_offset").alias("min_queue_offset"), F.max("queue_offset").alias("max_queue_offset"),
                F.min("store_timestamp").alias("first_store_timestamp"),
                F.max("store_timestamp").alias("last_store_timestamp")).orderBy("topic", "queue_id"),
            "topics": _topics(frame, F),
            "size_histogram": frame.withColumn(
                "size_bucket_bytes", F.pow(F.lit(2), F.ceil(F.log2("store_size"))).cast("long"))
            .groupBy("topic", "size_bucket_bytes").agg(F.count("*").alias("messages"))
            .orderBy("topic", "size_bucket_bytes"),
            "rates": frame.withColumn("bucket_start_ms", F.floor(F.col("store_timestamp") / bucket_ms) * bucket_ms)
            .groupBy("topic", "bucket_start_ms").agg(F.count("*").alias("messages"), F.sum("store_size").alias("bytes"))
            .withColumn("messages_per_second", F.col("messages") / F.lit(bucket_ms / 1000.0))
            .orderBy("topic", "bucket_start_ms"),
            "tags": frame.groupBy("topic", "tags").agg(F.count("*").alias("messages"))
            .withColumn("rank", F.row_number().over(Window.partitionBy("topic").orderBy(F.desc("messages"), "tags")))
            .where(F.col("rank") <= top).drop("rank").orderBy("topic", F.desc("messages"), "tags"),
            "properties": frame.select(F.explode("properties").alias("name", "value")).groupBy("name")
            .agg(F.count("*").alias("messages"), F.countDistinct("value").alias("distinct_values"))
            .orderBy(F.desc("messages"), "name").limit(top),
        }
        collected = {name: df.toPandas() for name, df in result.items()}
        collected["consumer_lag"] = consumer_lag(spark, store_dir, frame)
        return collected
    finally:
        frame.unpersist()


def _topics(frame, F):
    keys = frame.select("topic", F.explode(F.split(F.coalesce("keys", F.lit("")), " ")).alias("key")).where("key != ''")
    key_counts = keys.groupBy("topic").agg(F.countDistinct("key").alias("distinct_keys"))
    base = frame.groupBy("topic").agg(
        F.count("*").alias("messages"), F.sum("store_size").alias("bytes"),
        F.countDistinct("uniq_key").alias("distinct_uniq_keys"), F.countDistinct("tags").alias("distinct_tags"),
        F.countDistinct("queue_id").alias("queues"))
    return (base.join(key_counts, "topic", "left").fillna(0, ["distinct_keys"]).orderBy("topic"))


def consumer_lag(spark, store_dir: str, frame=None) -> pd.DataFrame:
    """Per group/topic/queue: consumer offset, the queue's max offset (next offset to write) and the lag.

    The max offset comes from the consume queue (what a broker reports); a queue with no consume-queue
    files falls back to the commit log (max queue_offset + 1 of its records).
    """
    from pyspark.sql import functions as F

    offsets = load_consumer_offsets(store_dir)
    columns = ["group", "topic", "queue_id", "consumer_offset", "max_offset", "lag"]
    if offsets.empty:
        return pd.DataFrame(columns=columns)
    cq = (spark.read.format("rocketmq-consumequeue").schema("topic string, queue_id int, queue_offset bigint")
          .load(os.fspath(store_dir)).groupBy("topic", "queue_id").agg((F.max("queue_offset") + 1).alias("cq_max")))
    log = (frame if frame is not None else commitlog_frame(spark, store_dir, columns=["topic", "queue_id", "queue_offset"]))
    log_max = log.groupBy("topic", "queue_id").agg((F.max("queue_offset") + 1).alias("log_max"))
    maxima = cq.join(log_max, ["topic", "queue_id"], "full").toPandas()
    maxima["max_offset"] = maxima["cq_max"].fillna(maxima["log_max"]).fillna(0).astype("int64")
    merged = offsets.merge(maxima[["topic", "queue_id", "max_offset"]], on=["topic", "queue_id"], how="left")
    merged["max_offset"] = merged["max_offset"].fillna(0).astype("int64")
    merged["lag"] = (merged["max_offset"] - merged["consumer_offset"]).clip(lower=0)
    return merged[columns].sort_values(["group", "topic", "queue_id"]).reset_index(drop=True)
