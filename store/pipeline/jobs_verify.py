"""The verify job: do the consume queues and index files say what the commit log implies?

Everything is a Spark join, so memory stays bounded by Spark (it spills), whatever the store size; only
counts and at most `max_examples` findings per kind reach the driver.

Finding kinds (`problem` kinds make the report not clean):

| kind                   | problem | meaning |
|------------------------|---------|---------|
| cq_missing             | yes     | a NOT/COMMIT record whose (topic, queue, queue_offset) unit is absent |
| cq_extra               | yes     | a unit inside the log's range that no record implies |
| cq_mismatch            | yes     | unit and record disagree on phy_offset, size or tagsCode |
| cq_past_log_end        | yes     | a unit pointing at bytes after the log's recovered end |
| cq_expired             | no      | a unit below the log's min offset (kept until cleanup deletes its file) |
| index_no_record        | yes     | an entry whose phy_offset is not the start of any record |
| index_past_log_end     | yes     | an entry pointing after the log's end |
| index_key_mismatch     | yes     | the record exists but none of its keys has the entry's key hash |
| index_missing_key      | yes     | a record key inside the indexed range with no entry |
| segment_not_terminated | yes     | a segment other than the last one with records does not end with a BLANK |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pyarrow as pa

from store.pipeline.frames import index_table
from store.pipeline.jobs_export import commitlog_frame
from store.pipeline.layout import list_commit_log
from store.pipeline.segment_reader import SegmentReader, plan_splits

NOT_PROBLEMS = frozenset({"cq_expired"})
VERIFY_COLUMNS = ["topic", "queue_id", "queue_offset", "phy_offset", "store_size", "tags_code", "sys_flag", "keys",
                  "uniq_key"]
KIND_ORDER = ["cq_missing", "cq_extra", "cq_mismatch", "cq_past_log_end", "cq_expired", "index_no_record",
              "index_past_log_end", "index_key_mismatch", "index_missing_key", "segment_not_terminated"]


@dataclass
class VerifyReport:
    log_min_offset: int
    log_end_offset: int
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not any(n for kind, n in self.counts.items() if kind not in NOT_PROBLEMS)

    def summary(self) -> str:
        lines = [f"commit log [{self.log_min_offset}, {self.log_end_offset}): "
                 + ("clean" if self.clean else "PROBLEMS FOUND")]
        for kind in KIND_ORDER:
            if self.counts.get(kind):
                lines.append(f"  {kind}: {self.counts[kind]}")
                lines += [f"    {example}" for example in self.examples.get(kind, [])[:5]]
        return "\n".join(lines)


def _split_end(split):
    reader = SegmentReader(split, columns=["phy_offset"])
    for _ in reader.batches():
        pass
    return split.path, split.file_from_offset, reader.end.phy_offset, reader.end.kind, reader.end.records


def segment_ends(spark, store_dir: str) -> list[tuple]:
    """(path, file_from_offset, end phy_offset, end kind, records) per split, computed on executors."""
    splits = plan_splits(list_commit_log(store_dir))
    if not splits:
        return []
    return spark.sparkContext.parallelize(splits, max(1, min(len(splits), 64))).map(_split_end).collect()


def verify(spark, store_dir: str, *, max_examples: int = 20) -> VerifyReport:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    store_dir = os.fspath(store_dir)
    ends = sorted(segment_ends(spark, store_dir), key=lambda e: e[1])
    with_records = [e for e in ends if e[4]]
    log_min = ends[0][1] if ends else 0
    log_end = with_records[-1][2] if with_records else log_min
    report = VerifyReport(log_min, log_end)
    unterminated = [{"file": os.path.basename(e[0]), "end_phy_offset": e[2], "end": e[3]}
                    for e in with_records[:-1] if e[3] != "blank"]
    _add(report, "segment_not_terminated", len(unterminated), unterminated[:max_examples])

    log = commitlog_frame(spark, store_dir, columns=VERIFY_COLUMNS).cache()
    try:
        findings = _queue_findings(spark, store_dir, log, log_min, log_end, F).unionByName(
            _index_findings(spark, store_dir, log, log_end, F))
        # One job: every finding is counted, and only the first `max_examples` of a kind are collected.
        by_kind = Window.partitionBy("kind")
        ranked = (findings.withColumn("n", F.row_number().over(by_kind.orderBy("phy_offset", "queue_offset", "detail")))
                  .withColumn("total", F.count("*").over(by_kind)).where(F.col("n") <= max_examples))
        for row in ranked.collect():
            values = row.asDict()
            report.counts[values["kind"]] = values["total"]
            report.examples.setdefault(values["kind"], []).append(
                {k: v for k, v in values.items() if v is not None and k not in ("kind", "n", "total")})
    finally:
        log.unpersist()
    return report


def _add(report: VerifyReport, kind: str, count: int, examples: list[dict]) -> None:
    if count:
        report.counts[kind] = report.counts.get(kind, 0) + count
        report.examples[kind] = examples


def _finding_columns(F, frame, kind_column):
    return frame.select(
        kind_column.alias("kind"), F.col("topic").cast("string"), F.col("queue_id").cast("int"),
        F.col("queue_offset").cast("long"), F.col("phy_offset").cast("long"), F.col("detail").cast("string"))


def _queue_findings(spark, store_dir, log, log_min, log_end, F):
    expected = log.where(F.col("sys_flag").bitwiseAND(0x0C).isin(0x00, 0x08)).select(
        "topic", "queue_id", "queue_offset", F.col("phy_offset").alias("e_phy"), F.col("store_size").alias("e_size"),
        F.col("tags_code").alias("e_tags"))
    units = spark.read.format("rocketmq-consumequeue").load(store_dir).select(
        "topic", "queue_id", "queue_offset", F.col("phy_offset").alias("c_phy"), F.col("size").alias("c_size"),
        F.col("tags_code").alias("c_tags"), "file_name")
    joined = expected.join(units, ["topic", "queue_id", "queue_offset"], "full")
    kind = (F.when(F.col("c_phy").isNull(), F.lit("cq_missing"))
            .when(F.col("e_phy").isNull() & (F.col("c_phy") + F.col("c_size") > log_end), F.lit("cq_past_log_end"))
            .when(F.col("e_phy").isNull() & (F.col("c_phy") < log_min), F.lit("cq_expired"))
            .when(F.col("e_phy").isNull(), F.lit("cq_extra"))
            .when((F.col("e_phy") != F.col("c_phy")) | (F.col("e_size") != F.col("c_size"))
                  | (F.col("e_tags") != F.col("c_tags")), F.lit("cq_mismatch")))
    detail = F.concat_ws(" ", F.concat(F.lit("file="), F.coalesce("file_name", F.lit("-"))),
                         F.concat(F.lit("cq=("), F.concat_ws(",", "c_phy", "c_size", "c_tags"), F.lit(")")),
                         F.concat(F.lit("log=("), F.concat_ws(",", "e_phy", "e_size", "e_tags"), F.lit(")")))
    flagged = joined.withColumn("kind", kind).where(F.col("kind").isNotNull()).withColumn(
        "phy_offset", F.coalesce("c_phy", "e_phy")).withColumn("detail", detail)
    return _finding_columns(F, flagged, F.col("kind"))


def _key_hash_batches(batches):
    from store.codec.javahash import index_key_hashes

    for batch in batches:  # key strings are mostly distinct: hashing them as Python strings is the cost
        hashes = index_key_hashes(batch.column("key_string").to_pylist())
        yield pa.RecordBatch.from_arrays([batch.column("phy_offset"), pa.array(hashes, pa.int32())],
                                         names=["phy_offset", "key_hash"])


def record_key_hashes(log, F):
    """(phy_offset, key_hash) of every key the index service would put for each record (spec §5.6)."""
    indexed = log.where(F.col("sys_flag").bitwiseAND(0x0C) != 0x0C)  # ROLLBACK records are not indexed
    tokens = indexed.select("phy_offset", "topic", F.explode(F.split(F.coalesce("keys", F.lit("")), " ")).alias("key"))
    uniq = indexed.where(F.col("uniq_key").isNotNull()).select("phy_offset", "topic", F.col("uniq_key").alias("key"))
    keys = tokens.where(F.col("key") != "").unionByName(uniq).select(
        "phy_offset", F.concat_ws("#", "topic", "key").alias("key_string"))
    return keys.mapInArrow(_key_hash_batches, "phy_offset bigint, key_hash int").distinct()


def _index_findings(spark, store_dir, log, log_end, F):
    entries = spark.read.format("rocketmq-index").load(store_dir).select(
        "file_name", "entry_number", "key_hash", "phy_offset")
    keys = record_key_hashes(log, F)
    starts = log.select("phy_offset", F.lit(True).alias("is_record"))
    unmatched = entries.join(keys, ["phy_offset", "key_hash"], "left_anti").join(starts, "phy_offset", "left")
    kind = (F.when(F.col("phy_offset") >= log_end, F.lit("index_past_log_end"))
            .when(F.col("is_record").isNull(), F.lit("index_no_record"))
            .otherwise(F.lit("index_key_mismatch")))
    bad_entries = unmatched.withColumn("detail", F.concat(
        F.lit("file="), "file_name", F.lit(" entry="), F.col("entry_number").cast("string"),
        F.lit(" key_hash="), F.col("key_hash").cast("string")))
    bad_entries = bad_entries.withColumn("topic", F.lit(None)).withColumn("queue_id", F.lit(None)).withColumn(
        "queue_offset", F.lit(None))
    # Keys of records inside the indexed range that have no entry.
    # 40 bytes per index file: read on the driver instead of running a Spark job for them.
    headers = [h for h in index_table(store_dir, "headers").to_pylist() if h["index_count"] > 1]
    missing = keys.limit(0)
    if headers:
        low, high = min(h["begin_phy_offset"] for h in headers), max(h["end_phy_offset"] for h in headers)
        missing = keys.where((F.col("phy_offset") >= low) & (F.col("phy_offset") <= high)).join(
            entries.select("phy_offset", "key_hash"), ["phy_offset", "key_hash"], "left_anti")
    missing = missing.join(log.select("phy_offset", "topic", "queue_id", "queue_offset"), "phy_offset").withColumn(
        "detail", F.concat(F.lit("key_hash="), F.col("key_hash").cast("string")))
    return _finding_columns(F, bad_entries, kind).unionByName(
        _finding_columns(F, missing, F.lit("index_missing_key")))
