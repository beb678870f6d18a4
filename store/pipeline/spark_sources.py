"""Spark batch data sources (Python Data Source API) over a store directory.

    register_data_sources(spark)
    spark.read.format("rocketmq-commitlog").load(store_dir)        # one row per record
    spark.readStream.format("rocketmq-commitlog").load(store_dir)   # see streaming.py
    spark.read.format("rocketmq-consumequeue").load(store_dir)     # one row per CQ unit
    spark.read.format("rocketmq-index").option("kind", "entries"|"headers"|"slots").load(store_dir)

Every partition runs the same decoder the pandas path uses and yields Arrow record batches whose schema
equals the declared one. Columns can be pruned by passing a subset schema (`.schema(...)`); only those
columns are decoded. Options of `rocketmq-commitlog`: `topics` (comma list), `storeTimestampMin` /
`storeTimestampMax` (ms, [min, max)), `checkCrc` (bool), `splitBytes` (int), `pushFilters` ("true" to
also take `topic` / `store_timestamp` predicates from the query; needs
`spark.sql.python.filterPushdown.enabled=true`, which `session.build_session` sets).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource, DataSourceReader, EqualTo, GreaterThan, GreaterThanOrEqual, In, InputPartition, LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from store.errors import ConfigError
from store.pipeline.commitlog_decoder import COMMITLOG_SCHEMA, RowFilter
from store.pipeline.cq_decoder import CQ_SCHEMA, queue_batches
from store.pipeline.index_decoder import INDEX_SCHEMAS, IndexGeometry, entry_batch, header_batch, slot_batch
from store.pipeline.layout import QueueFiles, list_commit_log, list_index_files, list_queues
from store.pipeline.segment_reader import DEFAULT_SPLIT_BYTES, SegmentReader, SegmentSplit, plan_splits
from store.pipeline.source_options import (bool_option, commitlog_row_filter, requested_columns,
                                           store_dir_option)

QUEUE_GROUP_BYTES = 64 * 1024 * 1024


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The Spark schema whose Arrow form (`to_arrow_schema`) equals `arrow_schema`."""
    return from_arrow_schema(arrow_schema)


class _Partition(InputPartition):
    pass


class CommitLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-commitlog"

    def schema(self):
        return spark_schema(COMMITLOG_SCHEMA)

    def streamReader(self, schema: StructType):
        from store.pipeline.streaming import CommitLogStreamReader

        return CommitLogStreamReader(self.options, schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        cls = PushdownCommitLogReader if bool_option(self.options, "pushFilters") else CommitLogReader
        return cls(self.options, schema)


class CommitLogReader(DataSourceReader):
    def __init__(self, options, schema: StructType):
        self.store_dir = store_dir_option(options)
        self.columns = requested_columns(schema, COMMITLOG_SCHEMA)
        self.row_filter = commitlog_row_filter(options)
        self.check_crc = bool_option(options, "checkCrc")
        self.split_bytes = int(options.get("splitBytes", DEFAULT_SPLIT_BYTES))

    def partitions(self):
        return [_Partition(s) for s in plan_splits(list_commit_log(self.store_dir), self.split_bytes)]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        split: SegmentSplit = partition.value
        reader = SegmentReader(split, columns=self.columns, row_filter=self.row_filter, check_crc=self.check_crc)
        yield from reader.batches()


class PushdownCommitLogReader(CommitLogReader):
    """Also applies `topic` equality / IN and `store_timestamp` comparisons while decoding."""

    def pushFilters(self, filters):
        topics = set(self.row_filter.topics) if self.row_filter.topics is not None else None
        low, high = self.row_filter.store_timestamp_min_ms, self.row_filter.store_timestamp_max_ms
        for f in filters:
            column = f.attribute[0] if len(f.attribute) == 1 else None
            if column == "topic" and isinstance(f, (EqualTo, In)):
                values = {f.value} if isinstance(f, EqualTo) else set(f.value)
                topics = values if topics is None else topics & values
            elif column == "store_timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                bound = int(f.value) + (1 if isinstance(f, GreaterThan) else 0)
                low = bound if low is None else max(low, bound)
            elif column == "store_timestamp" and isinstance(f, (LessThan, LessThanOrEqual)):
                bound = int(f.value) + (1 if isinstance(f, LessThanOrEqual) else 0)
                high = bound if high is None else min(high, bound)
            else:
                yield f
        self.row_filter = RowFilter(None if topics is None else frozenset(topics), low, high)


class ConsumeQueueDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-consumequeue"

    def schema(self):
        return spark_schema(CQ_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return ConsumeQueueReader(self.options, schema)


def group_queues(queues: list[QueueFiles], group_bytes: int = QUEUE_GROUP_BYTES) -> list[list[QueueFiles]]:
    """Consecutive queues packed into partitions of about `group_bytes` of CQ files each."""
    groups: list[list[QueueFiles]] = []
    size = 0
    for queue in queues:
        if not groups or size + queue.size_bytes > group_bytes:
            groups.append([])
            size = 0
        groups[-1].append(queue)
        size += queue.size_bytes
    return groups


class ConsumeQueueReader(DataSourceReader):
    def __init__(self, options, schema: StructType):
        self.store_dir = store_dir_option(options)
        self.columns = requested_columns(schema, CQ_SCHEMA)
        topics = options.get("topics")
        self.topics = None if not topics else {t.strip() for t in topics.split(",")}
        self.include_prefill = bool_option(options, "includePrefill")

    def partitions(self):
        return [_Partition(g) for g in group_queues(list_queues(self.store_dir, self.topics))]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        for queue in partition.value:
            yield from queue_batches(queue, columns=self.columns, include_prefill=self.include_prefill)


class IndexDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-index"

    def _kind(self) -> str:
        kind = self.options.get("kind", "entries")
        if kind not in INDEX_SCHEMAS:
            raise ConfigError(f"option kind must be one of {sorted(INDEX_SCHEMAS)}, not {kind!r}")
        return kind

    def schema(self):
        return spark_schema(INDEX_SCHEMAS[self._kind()])

    def reader(self, schema: StructType) -> DataSourceReader:
        return IndexReader(self.options, schema, self._kind())


class IndexReader(DataSourceReader):
    def __init__(self, options, schema: StructType, kind: str):
        self.store_dir = store_dir_option(options)
        self.kind = kind
        self.columns = requested_columns(schema, INDEX_SCHEMAS[kind])
        hint = None
        if options.get("maxHashSlotNum") and options.get("maxIndexNum"):
            hint = IndexGeometry(int(options["maxHashSlotNum"]), int(options["maxIndexNum"]))
        paths = list_index_files(self.store_dir)
        self.geometries = IndexGeometry.resolve(paths, self.store_dir, hint)  # once, on the driver

    def partitions(self):
        paths = list(self.geometries)
        if self.kind == "headers":
            return [_Partition(paths)] if paths else []
        return [_Partition([p]) for p in paths]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        paths = partition.value
        if self.kind == "headers":
            batch = header_batch(paths, self.geometries)
        else:
            build = entry_batch if self.kind == "entries" else slot_batch
            batch = build(paths[0], self.geometries[paths[0]])
        yield batch.select(self.columns)


def register_data_sources(spark) -> None:
    """Register `rocketmq-commitlog` (batch and streaming), `rocketmq-consumequeue`, `rocketmq-index`,
    `rocketmq-timerlog`, `rocketmq-dledger`."""
    from store.pipeline.source_dledger import DLedgerDataSource       # DLedger entries
    from store.pipeline.source_timerlog import TimerLogDataSource     # the 5.x timer log

    for source in (CommitLogDataSource, ConsumeQueueDataSource, IndexDataSource, TimerLogDataSource,
                   DLedgerDataSource):
        spark.dataSource.register(source)
