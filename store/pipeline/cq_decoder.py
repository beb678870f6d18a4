"""Consume-queue files -> Arrow (spec §4.1, §4.5).

| field     | offset | size_bytes | meaning                                   |
|-----------|--------|------------|-------------------------------------------|
| phy_offset| 0      | 8          | commit-log position of the record         |
| size      | 8      | 4          | TOTALSIZE of the record                   |
| tags_code | 12     | 8          | Java hash of TAGS (or delivery time, ext) |

A queue is read the way `ConsumeQueue.recover` sees it: in each file, units up to the first invalid one
(`phy_offset < 0 or size <= 0`, e.g. the zero-filled tail); a file that is not completely valid ends
the queue. Pre-fill units (`phy_offset 0, size 0x7FFFFFFF`) are left out unless asked for.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from store.pipeline.layout import QueueFiles
from store.pipeline.segment_reader import map_file

CQ_UNIT_SIZE = 20
CQ_UNIT_DTYPE = np.dtype([("phy_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_UNIT_DTYPE.itemsize == CQ_UNIT_SIZE
PREFILL_SIZE = 0x7FFFFFFF

CQ_COLUMNS: dict[str, pa.DataType] = {
    "topic": pa.string(),
    "queue_id": pa.int32(),
    "queue_offset": pa.int64(),
    "phy_offset": pa.int64(),
    "size": pa.int32(),
    "tags_code": pa.int64(),
    "file_name": pa.string(),
}
CQ_SCHEMA = pa.schema(list(CQ_COLUMNS.items()))


def queue_units(queue: QueueFiles, *, include_prefill: bool = False) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(file name, queue offsets, units) per file of one queue, stopping where recovery would."""
    for file in queue.files:
        whole_units = file.size_bytes // CQ_UNIT_SIZE
        raw = map_file(file.path)[: whole_units * CQ_UNIT_SIZE]
        units = raw.view(CQ_UNIT_DTYPE)
        invalid = (units["phy_offset"] < 0) | (units["size"] <= 0)
        count = int(np.argmax(invalid)) if invalid.any() else units.shape[0]
        units = units[:count]
        queue_offsets = file.file_from_offset // CQ_UNIT_SIZE + np.arange(count, dtype=np.int64)
        if not include_prefill:
            real = ~((units["phy_offset"] == 0) & (units["size"] == PREFILL_SIZE))
            units, queue_offsets = units[real], queue_offsets[real]
        yield os.path.basename(file.path), queue_offsets, units
        if count < whole_units:
            return


def queue_batches(queue: QueueFiles, *, columns: list[str] | None = None,
                  include_prefill: bool = False) -> Iterator[pa.RecordBatch]:
    """One batch per consume-queue file of `queue` (files after the queue's end are not read)."""
    columns = list(CQ_COLUMNS) if columns is None else columns
    schema = pa.schema([(c, CQ_COLUMNS[c]) for c in columns])
    for file_name, queue_offsets, units in queue_units(queue, include_prefill=include_prefill):
        n = queue_offsets.shape[0]
        if n == 0:
            continue
        values = {
            "topic": lambda: pa.array([queue.topic], pa.string()).take(pa.array(np.zeros(n, np.int64))),
            "queue_id": lambda: pa.array(np.full(n, queue.queue_id, dtype=np.int32)),
            "queue_offset": lambda: pa.array(queue_offsets, pa.int64()),
            "phy_offset": lambda: pa.array(units["phy_offset"].astype(np.int64)),
            "size": lambda: pa.array(units["size"].astype(np.int32)),
            "tags_code": lambda: pa.array(units["tags_code"].astype(np.int64)),
            "file_name": lambda: pa.array([file_name], pa.string()).take(pa.array(np.zeros(n, np.int64))),
        }
        yield pa.RecordBatch.from_arrays([values[c]() for c in columns], schema=schema)
