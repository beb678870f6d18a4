"""Finding the records of a commit-log segment, vectorised (spec §2, RocketMQ's
`CommitLog.checkMessageAndReturnSize` as recovery applies it).

1. `RecordScanner` walks a split with `store.kernel.scan` (C, or its Python twin with
   RMQ_KERNEL=python): each record is checked like `checkMessageAndReturnSize` (length formula, BODYCRC
   when asked) and becomes one row of int64s (header fields, body/topic/properties positions, the
   TAGS/KEYS/UNIQ_KEY/DELAY value positions). The first failing record ends the split — where
   RocketMQ's recovery ends the log — with the END_* kinds below. `store.pipeline.commitlog_decoder`
   turns the rows into Arrow columns.
2. `walk_records` (header-only walk, for planning splits and streaming) and `layout_records` /
   `crc_mismatches` (used by streaming's `advance`) keep the results of the former Python walk.

The record layout is the table in `store.codec.message`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from store import kernel
from store.kernel import columns as kernel_columns
from store.pipeline.arrowkit import gather_int
from store.pipeline.buffers import RECYCLER

MESSAGE_MAGIC_V1 = -626843481
MESSAGE_MAGIC_V2 = -626843477
BLANK_MAGIC = -875286124
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
MIN_RECORD_SIZE = 91  # v1, IPv4 hosts, empty body, topic and properties
_HEADER = struct.Struct(">ii")

END_BLANK = "blank"  # a BLANK record: the rest of the segment is filler
END_INVALID = "invalid"  # unknown magic / bad size / length mismatch: recovery ends the log here
END_ZEROS = "zeros"  # size 0 and magic 0: the never-written, zero-filled tail of a segment
END_FILE = "file_end"  # the last record ends exactly at the end of the file
END_STOP = "stop"  # reached the caller's stop_position (a split boundary)


@dataclass(frozen=True)
class WalkResult:
    """Record starts and sizes of one walk, and why it ended (`end_kind` at `end_position`)."""

    positions: np.ndarray
    sizes: np.ndarray
    magics: np.ndarray
    end_position: int
    end_kind: str


def walk_records(buf, start_position: int = 0, stop_position: int | None = None) -> WalkResult:
    """Follow TOTALSIZE from `start_position` (a record start) through a segment buffer.

    A header-only walk: a record counts when its magic is a message magic, its size is at least
    `MIN_RECORD_SIZE` and it fits in the file; its field layout is not judged (`layout_records` does
    that). Compiled, `kernel.walk_headers` walks in C reading 8 bytes per record; otherwise
    `kernel.scan` walks and also checks the layout, and where it stops at a record whose header alone
    is fine, the walk takes that record and scans on after it (tests/test_kernel_columns.py checks
    the two walks agree).
    """
    limit = len(buf)
    stop = limit if stop_position is None else min(stop_position, limit)
    if kernel.COMPILED and start_position >= 0:
        return _walk_headers(buf, start_position, stop)
    return _walk_by_scan(buf, start_position, stop)


def _walk_by_scan(buf, start_position: int, stop: int) -> WalkResult:
    """`walk_records` by `kernel.scan` runs (the twins' way: scan's Python twin is faster per record
    than walk_headers' twin would be, since it is taken only where scan stops)."""
    limit = len(buf)
    view = memoryview(buf)
    out = scan_rows_buffer(_PLAN_ROWS)
    chunks: list[np.ndarray] = []
    position = start_position
    while True:
        if position >= stop:
            end_kind = END_STOP if position < limit else END_FILE
            break
        count, next_position, kind, _ = kernel.scan(view, position, stop, False, out)
        if count:
            chunks.append(out[:count, _POS].copy())
        position = next_position
        if kind == kernel.STOP_FULL or (kind == kernel.STOP_END and position >= stop):
            continue
        if kind == kernel.STOP_BLANK:
            end_kind = END_BLANK
            break
        # Invalid for scan (or cut by `stop`): judge the header alone, against the whole file.
        if position + 8 > limit:
            end_kind = END_INVALID
            break
        size, magic = _HEADER.unpack_from(view, position)
        if (magic == MESSAGE_MAGIC_V1 or magic == MESSAGE_MAGIC_V2) and size >= MIN_RECORD_SIZE \
                and position + size <= limit:
            chunks.append(np.array([position], dtype=np.int64))
            position += size
            continue
        if magic == BLANK_MAGIC:
            end_kind = END_BLANK
        else:
            end_kind = END_ZEROS if size == 0 and magic == 0 else END_INVALID
        break
    starts = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    sizes = gather_int(buf, starts, 4) if len(starts) else np.zeros(0, dtype=np.int64)
    magics = gather_int(buf, starts + 4, 4) if len(starts) else np.zeros(0, dtype=np.int64)
    return WalkResult(starts, sizes, magics, position, end_kind)


_WALK_ENDS = {kernel_columns.WALK_STOP: END_STOP, kernel_columns.WALK_FILE: END_FILE,
              kernel_columns.WALK_BLANK: END_BLANK, kernel_columns.WALK_ZEROS: END_ZEROS,
              kernel_columns.WALK_INVALID: END_INVALID}


def _walk_headers(buf, start: int, stop: int) -> WalkResult:
    """`walk_records` by `kernel.walk_headers` (the same walk in C, 8 bytes read per record)."""
    out = np.frombuffer(pa.allocate_buffer(_PLAN_ROWS * 8), dtype=np.int64)
    chunks: list[np.ndarray] = []
    position = start
    while True:
        count, position, kind = kernel_columns.walk_headers(buf, position, stop, out)
        chunks.append(out[:count].copy())
        if kind != kernel_columns.WALK_FULL:
            break
    starts = np.concatenate(chunks)
    sizes = gather_int(buf, starts, 4) if len(starts) else np.zeros(0, dtype=np.int64)
    magics = gather_int(buf, starts + 4, 4) if len(starts) else np.zeros(0, dtype=np.int64)
    return WalkResult(starts, sizes, magics, position, _WALK_ENDS[kind])


def scan_rows_buffer(rows: int) -> np.ndarray:
    """`kernel.scan_buffer(rows)` from store.pipeline.buffers' recycler (already-mapped pages): a
    fresh numpy array of a batch's rows page-faults on every 4 KiB the scan writes (several times
    the cost of the scan itself on these VMs)."""
    memory = RECYCLER(rows * kernel.SCAN_FIELDS * 8)
    return np.frombuffer(memory, dtype=np.int64).reshape(rows, kernel.SCAN_FIELDS)


def scan_window(view, position: int, soft: int, check_crc: bool, rows_hint: int) -> tuple[np.ndarray, int, int]:
    """One scan window: `kernel.scan` from `position` (a record start) up to `soft` into a recycled
    row buffer of `rows_hint` rows, doubled as often as it fills. (rows, where the scan stopped,
    its STOP_* kind other than STOP_FULL)."""
    out = scan_rows_buffer(rows_hint)
    count = 0
    while True:
        got, position, kind, _ = kernel.scan(view, position, soft, check_crc, out[count:])
        count += got
        if kind != kernel.STOP_FULL:
            return out[:count], position, kind
        bigger = scan_rows_buffer(out.shape[0] * 2)
        bigger[:count] = out[:count]
        out = bigger


_PLAN_ROWS = 65536  # rows per kernel.scan call of a header walk (13 MiB of scratch)
_POS, _SIZE = kernel.COL["pos"], kernel.COL["size"]


def _end_kind_at(view, position: int, kind: int) -> str:
    """END_* of a scan that found no record at `position` (scanned against the whole file)."""
    if kind == kernel.STOP_BLANK:
        return END_BLANK
    if kind == kernel.STOP_END:
        return END_FILE
    if position + 8 <= len(view):
        size, magic = _HEADER.unpack_from(view, position)
        if size == 0 and magic == 0:
            return END_ZEROS
    return END_INVALID


class RecordScanner:
    """The records of one split as `kernel.scan` rows, one array per batch of at most `batch_bytes`.

    Equivalent to `walk_records` + `layout_records` (+ `crc_mismatches`) followed by cutting at the
    first failing record: a record counts when it starts before `stop_position` and passes
    `checkMessageAndReturnSize`'s checks against the whole file. A batch holds the records that end
    within `batch_bytes` of its first record (at least one record). After iteration `end_position`,
    `end_kind` and `records` say where and why the split ended.
    """

    def __init__(self, buf, start_position: int = 0, stop_position: int | None = None, *,
                 check_crc: bool = False, batch_bytes: int = 32 * 1024 * 1024, prepare=None):
        self.buf = buf
        self.prepare = prepare          # prepare(start, stop): called before each window is scanned
        self.start_position = start_position
        self.stop_position = stop_position
        self.check_crc = check_crc
        self.batch_bytes = max(1, batch_bytes)
        self.end_position = start_position
        self.end_kind = END_FILE
        self.records = 0

    def batches(self) -> Iterator[np.ndarray]:
        view = memoryview(self.buf)
        limit = len(view)
        stop = limit if self.stop_position is None else min(self.stop_position, limit)
        position = self.start_position
        rows_hint = 1024
        one = kernel.scan_buffer(1)
        while True:
            if position >= stop:
                self._finish(position, END_STOP if position < limit else END_FILE)
                return
            soft = min(position + self.batch_bytes, stop)
            if self.prepare is not None:
                self.prepare(position, soft)
            rows, position, kind = scan_window(view, position, soft, self.check_crc, rows_hint)
            count = len(rows)
            if count:
                rows_hint = max(rows_hint, count + count // 8 + 1)
                self.records += count
                yield rows
                if kind == kernel.STOP_BLANK:
                    self._finish(position, END_BLANK)
                    return
                continue  # a stop inside the batch window is judged again from its own start
            if kind == kernel.STOP_BLANK:
                self._finish(position, END_BLANK)
                return
            # Nothing fitted below the window (a record larger than batch_bytes, one crossing `stop`,
            # a header cut by the window, or an invalid record): judge it against the whole file.
            got, next_position, kind, _ = kernel.scan(view, position, limit, self.check_crc, one)
            if got:
                self.records += 1
                yield one.copy()
                position = int(one[0, _POS] + one[0, _SIZE])
                continue
            self._finish(position, _end_kind_at(view, position, kind))
            return

    def _finish(self, position: int, kind: str) -> None:
        self.end_position, self.end_kind = position, kind


@dataclass
class RecordLayout:
    """Per-record positions (absolute, in the buffer) of every variable-position field."""

    position: np.ndarray
    size: np.ndarray
    magic: np.ndarray
    sys_flag: np.ndarray
    born_v6: np.ndarray
    store_v6: np.ndarray
    store_timestamp_at: np.ndarray
    store_host_at: np.ndarray
    body_at: np.ndarray
    body_length: np.ndarray
    topic_at: np.ndarray
    topic_length: np.ndarray
    properties_at: np.ndarray
    properties_length: np.ndarray
    cache: dict = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> "RecordLayout":
        values = {k: v[rows] for k, v in self.__dict__.items() if isinstance(v, np.ndarray)}
        return RecordLayout(**values)

    def __len__(self) -> int:
        return self.position.shape[0]


def layout_records(buf: np.ndarray, walk: WalkResult) -> tuple[RecordLayout, np.ndarray]:
    """Field positions of every walked record and a mask of records that pass the length check."""
    pos, size, magic = walk.positions, walk.sizes, walk.magics
    sys_flag = gather_int(buf, pos + 36, 4)
    born_v6 = (sys_flag & SYSFLAG_BORNHOST_V6) != 0
    store_v6 = (sys_flag & SYSFLAG_STOREHOST_V6) != 0
    born_len = np.where(born_v6, 20, 8)
    store_len = np.where(store_v6, 20, 8)
    topic_len_width = np.where(magic == MESSAGE_MAGIC_V2, 2, 1)
    end = pos + size
    last = len(buf) - 1

    def at(p, width):  # clip reads of broken records into the buffer; they are masked out below
        return np.minimum(p, last - width + 1)

    body_length_at = pos + 68 + born_len + store_len
    ok = body_length_at + 4 + topic_len_width + 2 <= end
    body_length = gather_int(buf, at(body_length_at, 4), 4)
    body_at = body_length_at + 4
    topic_length_at = body_at + np.maximum(body_length, 0)
    ok &= topic_length_at + topic_len_width + 2 <= end
    topic_length = np.where(
        topic_len_width == 2, gather_int(buf, at(topic_length_at, 2), 2), gather_int(buf, at(topic_length_at, 1), 1)
    )
    ok &= topic_length >= 0
    topic_at = topic_length_at + topic_len_width
    properties_length_at = topic_at + topic_length
    ok &= properties_length_at + 2 <= end
    properties_length = gather_int(buf, at(properties_length_at, 2), 2)
    properties_at = properties_length_at + 2
    ok &= properties_at + np.maximum(properties_length, 0) == end  # spec §2.7 step 6
    layout = RecordLayout(
        pos, size, magic, sys_flag, born_v6, store_v6, pos + 48 + born_len, pos + 56 + born_len,
        body_at, np.maximum(body_length, 0), topic_at, topic_length, properties_at, np.maximum(properties_length, 0),
    )
    return layout, ok


def crc_mismatches(buf, layout: RecordLayout, body_crc: np.ndarray) -> np.ndarray:
    """Mask of records whose BODYCRC differs from crc32(body) & 0x7FFFFFFF (one zlib call per record)."""
    view = memoryview(buf)
    computed = np.fromiter(
        (zlib.crc32(view[s : s + n]) & 0x7FFFFFFF for s, n in zip(layout.body_at.tolist(), layout.body_length.tolist())),
        dtype=np.int64, count=len(layout),
    )
    return (layout.body_length > 0) & (computed != body_crc)
