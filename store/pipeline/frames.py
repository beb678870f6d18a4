"""The decoders outside Spark: Arrow tables and pandas DataFrames of a store directory.

These functions run exactly the per-partition code of the Spark sources (`SegmentReader`,
`queue_batches`, `entry_batch`) in one process, one split after another, so both paths give identical
rows (tests compare them).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import pandas as pd
import pyarrow as pa

from store.pipeline.commitlog_decoder import COMMITLOG_COLUMNS, RowFilter, commitlog_schema
from store.pipeline.cq_decoder import CQ_COLUMNS, queue_batches
from store.pipeline.index_decoder import INDEX_SCHEMAS, IndexGeometry, entry_batch, header_batch, slot_batch
from store.pipeline.layout import list_commit_log, list_index_files, list_queues
from store.pipeline.segment_reader import SegmentEnd, SegmentReader, plan_splits


def _row_filter(topics: Iterable[str] | None, store_time_range_ms: tuple[int | None, int | None] | None) -> RowFilter:
    low, high = store_time_range_ms or (None, None)
    return RowFilter(None if topics is None else frozenset(topics), low, high)


def commitlog_batches(
    store_dir: str | os.PathLike,
    columns: list[str] | None = None,
    topics: Iterable[str] | None = None,
    store_time_range_ms: tuple[int | None, int | None] | None = None,
    *,
    check_crc: bool = False,
    split_bytes: int | None = None,
    views: bool = False,
    ends: list[SegmentEnd] | None = None,
) -> Iterator[pa.RecordBatch]:
    """`commitlog_table`'s batches, one at a time (nothing kept here: a store larger than memory
    streams through)."""
    columns = list(COMMITLOG_COLUMNS) if columns is None else list(columns)
    row_filter = _row_filter(topics, store_time_range_ms)
    for split in plan_splits(list_commit_log(store_dir), split_bytes):
        reader = SegmentReader(split, columns=columns, row_filter=row_filter, check_crc=check_crc,
                               views=views)
        yield from reader.batches()
        if ends is not None:
            ends.append(reader.end)


def commitlog_table(
    store_dir: str | os.PathLike,
    columns: list[str] | None = None,
    topics: Iterable[str] | None = None,
    store_time_range_ms: tuple[int | None, int | None] | None = None,
    *,
    check_crc: bool = False,
    split_bytes: int | None = None,
    views: bool = False,
    ends: list[SegmentEnd] | None = None,
) -> pa.Table:
    """Every record of the commit log (up to each segment's recovered end) as an Arrow table.

    `columns` selects and orders columns (default: all of `COMMITLOG_COLUMNS`); `topics` keeps only
    those topics; `store_time_range_ms` is [min, max) on store_timestamp. When `ends` is a list, one
    `SegmentEnd` per split is appended to it (where and why each split stopped). A split is a whole
    segment unless `split_bytes` asks for smaller ones (Spark's partitions; here they run one after
    another, so they only cost a walk of each segment's headers). `views=True`: body, topic,
    properties_raw, tags, keys and uniq_key as Arrow views into the segments' maps, not copies
    (`SegmentReader`; binary_view / string_view columns).
    """
    columns = list(COMMITLOG_COLUMNS) if columns is None else list(columns)
    batches = list(commitlog_batches(store_dir, columns, topics, store_time_range_ms, check_crc=check_crc,
                                     split_bytes=split_bytes, views=views, ends=ends))
    return pa.Table.from_batches(batches, schema=commitlog_schema(columns, views))


def consume_queue_table(
    store_dir: str | os.PathLike,
    topics: Iterable[str] | None = None,
    *,
    columns: list[str] | None = None,
    include_prefill: bool = False,
) -> pa.Table:
    """Every consume-queue unit, queue by queue in (topic, queue_id) order, as an Arrow table."""
    columns = list(CQ_COLUMNS) if columns is None else list(columns)
    topic_set = None if topics is None else set(topics)
    batches = [b for q in list_queues(store_dir, topic_set) for b in queue_batches(q, columns=columns,
                                                                                   include_prefill=include_prefill)]
    return pa.Table.from_batches(batches, schema=pa.schema([(c, CQ_COLUMNS[c]) for c in columns]))


def index_table(
    store_dir: str | os.PathLike,
    kind: str = "entries",
    *,
    geometry: IndexGeometry | None = None,
) -> pa.Table:
    """Index files as a table of `kind` "entries" (default), "headers" or "slots"."""
    if kind not in INDEX_SCHEMAS:
        raise ValueError(f"kind must be one of {sorted(INDEX_SCHEMAS)}, not {kind!r}")
    paths = list_index_files(store_dir)
    geometries = IndexGeometry.resolve(paths, os.fspath(store_dir), geometry)
    if kind == "headers":
        batches = [header_batch(paths, geometries)] if paths else []
    else:
        build = entry_batch if kind == "entries" else slot_batch
        batches = [build(p, geometries[p]) for p in paths]
    return pa.Table.from_batches(batches, schema=INDEX_SCHEMAS[kind])


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """Arrow -> pandas with maps as dicts (a property name occurs at most once per record)."""
    return table.to_pandas(maps_as_pydicts="strict")


def read_commitlog(store_dir, columns=None, topics=None, store_time_range_ms=None, **options) -> pd.DataFrame:
    """pandas version of `commitlog_table`."""
    return to_pandas(commitlog_table(store_dir, columns, topics, store_time_range_ms, **options))


def read_consume_queues(store_dir, topics=None, **options) -> pd.DataFrame:
    """pandas version of `consume_queue_table`."""
    return to_pandas(consume_queue_table(store_dir, topics, **options))


def read_index(store_dir, kind: str = "entries", **options) -> pd.DataFrame:
    """pandas version of `index_table`."""
    return to_pandas(index_table(store_dir, kind, **options))
