"""The records of a DLedger commit log (`enableDLegerCommitLog=true`) for the pipeline, no Spark.

A DLedger store keeps its log in `<store>/dledger-<selfId>/data/` (layout: `store.dledger`): each
entry is a 48-byte header and one whole RocketMQ record, whose physical offset is the entry's pos +
48 (`DLedgerCommitLog`). `DLedgerScanner` has `RecordScanner`'s contract (kernel rows, positions in
the file, `end_position`/`end_kind`/`records`), so `SegmentReader` and every job built on it read a
DLedger log like a commit log: rows are the records inside the entries, `phy_offset` is RocketMQ's.

The walk is `DLedgerMmapFileStore.recover`'s (`store.dledger.entries.walk_entries`) within one file:
a DLedger BLANK ends the file (END_BLANK), a zero size ends the log (END_ZEROS), a broken entry too
(END_INVALID). A record the kernel rejects inside a valid entry is left out and the walk goes on, as
DLedger recovery keeps the entry and RocketMQ's dispatch skips its `bufferSize`. A file larger than
the split size is split at entry starts found by walking it from its start (`entry_boundaries`).

`dledger_entry_batch` gives one row per entry (index, term, pos, sizes, CRC fields) for the
`rocketmq-dledger` source (`store.pipeline.source_dledger`) and its pandas twin.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from store import kernel
from store.dledger.entries import BLANK, ENTRY, walk_entries
from store.dledger.entry_codec import ENTRY_HEADER_BYTES
from store.pipeline.commitlog_scan import END_BLANK, END_FILE, END_INVALID, END_STOP, END_ZEROS

DLEDGER_COLUMNS: dict[str, pa.DataType] = {
    "file_name": pa.string(),
    "dledger_index": pa.int64(),
    "term": pa.int64(),
    "entry_pos": pa.int64(),               # the entry's offset in the data files
    "entry_size": pa.int32(),              # 48 + body size
    "magic": pa.int32(),
    "channel": pa.int32(),
    "chain_crc": pa.int32(),
    "body_crc": pa.int32(),
    "body_size": pa.int32(),
    "commit_log_offset": pa.int64(),       # RocketMQ's offset of the record inside: entry_pos + 48
}
DLEDGER_SCHEMA = pa.schema(list(DLEDGER_COLUMNS.items()))


def _walk(buf, file_from_offset: int, path: str, start_position: int = 0):
    view = memoryview(buf)
    return walk_entries([(file_from_offset, view, len(view), path)], start_position=start_position)


def entry_boundaries(buf, file_from_offset: int, path: str, split_bytes: int) -> list[int]:
    """Entry starts (positions) about every `split_bytes` of one data file, 0 first (planning
    splits of large files: a split starts at an entry)."""
    boundaries = [0]
    for step, _number, position, _what in _walk(buf, file_from_offset, path):
        if step != ENTRY:
            break
        if position >= boundaries[-1] + split_bytes:
            boundaries.append(position)
    return boundaries


class DLedgerScanner:
    """The records inside the entries of one data file as `kernel.scan` rows (see the module doc)."""

    def __init__(self, buf, file_from_offset: int, path: str, *, start_position: int = 0,
                 stop_position: int | None = None, check_crc: bool = False,
                 batch_rows: int = 65536):
        self.buf = buf
        self.start_position = start_position
        self.stop_position = stop_position
        self.file_from_offset = file_from_offset
        self.path = path
        self.check_crc = check_crc
        self.batch_rows = max(1, batch_rows)
        self.end_position = 0
        self.end_kind = END_FILE
        self.records = 0
        self.skipped = 0

    def batches(self) -> Iterator[np.ndarray]:
        view = memoryview(self.buf)
        out = kernel.scan_buffer(self.batch_rows)
        count = 0
        for step, _number, position, what in _walk(self.buf, self.file_from_offset, self.path,
                                                   self.start_position):
            if step == ENTRY and self.stop_position is not None and position >= self.stop_position:
                self.end_position, self.end_kind = position, END_STOP
                break
            if step == ENTRY:
                body = position + ENTRY_HEADER_BYTES
                got, _next, _kind, _ = kernel.scan(view, body, position + what.size,
                                                   self.check_crc, out[count:count + 1])
                if got:
                    count += 1
                    self.records += 1
                else:
                    self.skipped += 1
                if count == out.shape[0]:
                    yield out[:count].copy()
                    count = 0
                continue
            if step == BLANK:
                self.end_position, self.end_kind = position, END_BLANK
            else:
                self.end_position = position
                self.end_kind = END_ZEROS if what.clean and what.reason.startswith("zeros") else \
                    END_FILE if what.clean else END_INVALID
            break
        if count:
            yield out[:count].copy()


def dledger_entry_batch(path: str, file_from_offset: int,
                        columns: list[str] | None = None) -> pa.RecordBatch:
    """One row per valid entry of one data file (the walk of `DLedgerScanner`)."""
    with open(path, "rb") as handle:
        buf = handle.read()
    headers = [what for step, _n, _p, what in _walk(buf, file_from_offset, path) if step == ENTRY]
    values = {
        "file_name": [os.path.basename(path)] * len(headers),
        "dledger_index": [h.index for h in headers], "term": [h.term for h in headers],
        "entry_pos": [h.pos for h in headers], "entry_size": [h.size for h in headers],
        "magic": [h.magic for h in headers], "channel": [h.channel for h in headers],
        "chain_crc": [h.chain_crc for h in headers], "body_crc": [h.body_crc for h in headers],
        "body_size": [h.body_size for h in headers],
        "commit_log_offset": [h.body_pos for h in headers],
    }
    names = columns or DLEDGER_SCHEMA.names
    return pa.RecordBatch.from_arrays([pa.array(values[n], DLEDGER_COLUMNS[n]) for n in names],
                                      schema=pa.schema([(n, DLEDGER_COLUMNS[n]) for n in names]))


def dledger_entries_table(store_dir: str | os.PathLike,
                          columns: list[str] | None = None) -> pa.Table:
    """Every entry of a DLedger store's data files (the pandas path of `rocketmq-dledger`)."""
    from store.pipeline.layout import list_commit_log
    names = columns or DLEDGER_SCHEMA.names
    batches = [dledger_entry_batch(s.path, s.file_from_offset, names)
               for s in list_commit_log(store_dir) if s.dledger]
    return pa.Table.from_batches(batches, schema=pa.schema([(n, DLEDGER_COLUMNS[n])
                                                            for n in names]))
