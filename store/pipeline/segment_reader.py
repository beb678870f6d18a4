"""Reading one commit-log segment (or one split of it) into Arrow batches; planning splits.

A `SegmentSplit` is the picklable unit of work both the pandas path and every Spark partition use, so
the two paths run exactly the same code. Records belong to the split in which they *start*; a split
other than the first of its segment starts at a record boundary found by the planner.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from store.pipeline.commitlog_decoder import (
    COMMITLOG_COLUMNS, END_FILE, END_INVALID, RecordDecoder, RowFilter, crc_mismatches, layout_records,
    walk_records,
)
from store.pipeline.arrowkit import gather_int
from store.pipeline.layout import SegmentFile

DEFAULT_BATCH_BYTES = 32 * 1024 * 1024
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SegmentSplit:
    """Records of `path` starting in [start_position, stop_position) (None = to the segment's end)."""

    path: str
    file_from_offset: int
    start_position: int = 0
    stop_position: int | None = None


@dataclass(frozen=True, slots=True)
class SegmentEnd:
    """Where a read stopped: `phy_offset` of the first byte not read and why (`commitlog_decoder.END_*`)."""

    phy_offset: int
    kind: str
    records: int


def map_file(path: str) -> np.ndarray:
    """A read-only uint8 view of the whole file (empty array for an empty file)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return np.zeros(0, dtype=np.uint8)
        mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    # The mapping stays alive as long as the array refers to it; closing the file does not unmap it.
    return np.frombuffer(mapping, dtype=np.uint8)


class SegmentReader:
    """Decodes one split. Iterate `batches()`; afterwards `end` says where and why reading stopped."""

    def __init__(
        self,
        split: SegmentSplit,
        *,
        columns: list[str] | None = None,
        row_filter: RowFilter | None = None,
        check_crc: bool = False,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ):
        self.split = split
        self.columns = list(COMMITLOG_COLUMNS) if columns is None else list(columns)
        unknown = [c for c in self.columns if c not in COMMITLOG_COLUMNS]
        if unknown:
            raise ValueError(f"unknown commit-log columns {unknown}; known: {list(COMMITLOG_COLUMNS)}")
        self.row_filter = row_filter or RowFilter()
        self.check_crc = check_crc
        self.batch_bytes = batch_bytes
        self.end: SegmentEnd | None = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        buf = map_file(self.split.path)
        walk = walk_records(buf, self.split.start_position, self.split.stop_position)
        decoder = RecordDecoder(buf, self.split.file_from_offset, os.path.basename(self.split.path))
        layout, ok = layout_records(buf, walk)
        if self.check_crc and len(layout):
            ok &= ~crc_mismatches(buf, layout, gather_int(buf, layout.position + 8, 4))
        end_position, end_kind = walk.end_position, walk.end_kind
        good = len(layout)
        if not bool(ok.all()):
            good = int(np.argmin(ok))
            end_position, end_kind = int(layout.position[good]), END_INVALID
        if end_kind == END_FILE and end_position < len(buf):
            end_kind = END_INVALID  # a torn header in the last 8 bytes
        self.end = SegmentEnd(self.split.file_from_offset + end_position, end_kind, good)
        ends = np.cumsum(layout.size[:good])
        start_row = 0
        while start_row < good:
            base = ends[start_row - 1] if start_row else 0
            stop_row = int(np.searchsorted(ends, base + self.batch_bytes, side="right"))
            stop_row = min(max(stop_row, start_row + 1), good)
            part = layout.take(np.arange(start_row, stop_row))
            keep = self.row_filter.mask(decoder, part)
            if keep is not None:
                part = part.take(np.flatnonzero(keep))
            if len(part):
                yield decoder.batch(part, self.columns)
            start_row = stop_row


def plan_splits(segments: list[SegmentFile], split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[SegmentSplit]:
    """One split per segment, or several at record boundaries for segments larger than `split_bytes`.

    Finding a boundary inside a segment needs the record chain up to it, so only large segments are
    walked here (8 bytes read per record); small ones cost the planner nothing but a file listing.
    """
    splits = []
    for segment in segments:
        if segment.size_bytes <= split_bytes:
            splits.append(SegmentSplit(segment.path, segment.file_from_offset))
            continue
        walk = walk_records(map_file(segment.path))
        boundaries = [0]
        if walk.positions.shape[0]:
            targets = np.arange(split_bytes, segment.size_bytes, split_bytes)
            index = np.searchsorted(walk.positions, targets, side="left")
            index = index[index < walk.positions.shape[0]]
            boundaries += sorted(set(int(walk.positions[i]) for i in index) - {0})
        for start, stop in zip(boundaries, boundaries[1:] + [None]):
            splits.append(SegmentSplit(segment.path, segment.file_from_offset, start, stop))
    return splits
