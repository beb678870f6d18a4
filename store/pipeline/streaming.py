"""Structured Streaming over the commit log: `spark.readStream.format("rocketmq-commitlog")`.

Stream offsets are phy_offsets: `{"phy_offset": n}` means "every record starting before n has been
offered". The end offset of a micro-batch is always a record boundary (or the start of the next segment
after a BLANK), found by walking new records from the previous end and checking each one exactly as the
batch decoder does, plus BODYCRC (`checkCrc`, on by default) so a record whose bytes are still being
copied in is not offered until it is complete. A micro-batch is then planned as ordinary
`SegmentSplit`s, so segment rolling is just "the range covers two files", and a restarted query
re-plans the same ranges from its checkpointed offsets (the files are immutable below the end).

Options: `startingOffsets` ("earliest" | "latest" | a phy_offset), `maxRecordsPerTrigger`, `checkCrc`,
`topics`, `storeTimestampMin/Max` (row filters, as in batch reads). Trigger.AvailableNow is supported.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from store.errors import ConfigError
from store.pipeline.arrowkit import gather_int
from store.pipeline.commitlog_decoder import COMMITLOG_SCHEMA
from store.pipeline.commitlog_scan import END_BLANK, crc_mismatches, layout_records, walk_records
from store.pipeline.layout import SegmentFile, list_commit_log
from store.pipeline.segment_reader import SegmentReader, SegmentSplit, map_file
from store.pipeline.source_options import (bool_option, commitlog_row_filter, requested_columns,
                                           store_dir_option)

OFFSET_KEY = "phy_offset"
MAX_SEGMENTS_PER_ADVANCE = 64  # bound on files walked by one latestOffset call


def _segment_holding(segments: list[SegmentFile], phy_offset: int) -> int | None:
    for i, segment in enumerate(segments):
        if segment.file_from_offset <= phy_offset < segment.file_from_offset + segment.size_bytes:
            return i
    return None


def advance(store_dir: str, from_offset: int, *, max_records: int | None = None, check_crc: bool = True) -> int:
    """The phy_offset after the complete, valid records that follow `from_offset` (a record boundary)."""
    segments = list_commit_log(store_dir)
    offset = from_offset
    if segments and offset < segments[0].file_from_offset:
        offset = segments[0].file_from_offset  # the files below were deleted by cleanup
    budget = max_records
    for _ in range(MAX_SEGMENTS_PER_ADVANCE):
        index = _segment_holding(segments, offset)
        if index is None:
            return offset
        segment = segments[index]
        buf = map_file(segment.path)
        walk = walk_records(buf, offset - segment.file_from_offset)
        layout, ok = layout_records(buf, walk)
        if check_crc and len(layout):
            ok &= ~crc_mismatches(buf, layout, gather_int(buf, layout.position + 8, 4))
        good = len(layout) if bool(ok.all()) else int(np.argmin(ok))
        if budget is not None and good >= budget:
            return int(segment.file_from_offset + layout.position[budget - 1] + layout.size[budget - 1])
        if good < len(layout) or walk.end_kind != END_BLANK:
            end = layout.position[good] if good < len(layout) else walk.end_position
            return int(segment.file_from_offset + end)
        if budget is not None:
            budget -= good
        offset = segment.file_from_offset + segment.size_bytes  # BLANK: continue in the next file
    return offset


def tail_start(store_dir: str) -> int:
    """Start of the last segment that holds a record (records before it need no walking to find "now")."""
    segments = list_commit_log(store_dir)
    for segment in reversed(segments):
        if walk_records(map_file(segment.path), 0, 1).positions.shape[0]:
            return segment.file_from_offset
    return segments[0].file_from_offset if segments else 0


def plan_range(store_dir: str, start: int, end: int) -> list[SegmentSplit]:
    """Splits holding exactly the records that start in [start, end)."""
    splits = []
    for segment in list_commit_log(store_dir):
        low, high = segment.file_from_offset, segment.file_from_offset + segment.size_bytes
        if high <= start or low >= end:
            continue
        stop = end - low if end < high else None
        splits.append(SegmentSplit(segment.path, low, max(start - low, 0), stop))
    return splits


class CommitLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema: StructType):
        self.store_dir = store_dir_option(options)
        if any(segment.dledger for segment in list_commit_log(self.store_dir)):
            # The offsets here are record boundaries found by walking records; a DLedger log's
            # records sit inside entries (store.pipeline.dledger_scan): batch reads only.
            raise ConfigError(f"{self.store_dir} keeps a DLedger log: read it with "
                              f"spark.read (batch), streaming over DLedger entries is not supported")
        self.columns = requested_columns(schema, COMMITLOG_SCHEMA)
        self.row_filter = commitlog_row_filter(options)
        self.check_crc = bool_option(options, "checkCrc", True)
        self.starting = str(options.get("startingOffsets", "earliest")).strip().lower()
        max_records = options.get("maxRecordsPerTrigger")
        self.max_records = int(max_records) if max_records else None
        self.target: int | None = None  # set by Trigger.AvailableNow

    def _earliest(self) -> int:
        segments = list_commit_log(self.store_dir)
        return segments[0].file_from_offset if segments else 0

    def initialOffset(self) -> dict:
        if self.starting == "earliest":
            return {OFFSET_KEY: self._earliest()}
        if self.starting == "latest":
            return {OFFSET_KEY: advance(self.store_dir, tail_start(self.store_dir), check_crc=self.check_crc)}
        return {OFFSET_KEY: int(self.starting)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = int(start[OFFSET_KEY])
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = advance(self.store_dir, begin, max_records=max_records, check_crc=self.check_crc)
        if self.target is not None:
            end = min(end, max(self.target, begin))
        return {OFFSET_KEY: end}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = advance(self.store_dir, tail_start(self.store_dir), check_crc=self.check_crc)

    def partitions(self, start: dict, end: dict):
        return [InputPartition(s) for s in plan_range(self.store_dir, int(start[OFFSET_KEY]), int(end[OFFSET_KEY]))]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        reader = SegmentReader(partition.value, columns=self.columns, row_filter=self.row_filter)
        yield from reader.batches()

    def commit(self, end: dict) -> None:
        """Nothing to release: the commit log is only read."""
