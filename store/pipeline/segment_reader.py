"""Reading one commit-log segment (or one split of it) into Arrow batches; planning splits.

A `SegmentSplit` is the picklable unit of work both the pandas path and every Spark partition use, so
the two paths run exactly the same code. Records belong to the split in which they *start*; a split
other than the first of its segment starts at a record boundary found by the planner.
"""

from __future__ import annotations

import mmap
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from store import kernel
from store.pipeline.commitlog_decoder import COMMITLOG_COLUMNS, RecordDecoder, RowFilter, ScanLayout
from store.kernel import columns as kernel_columns
from store.pipeline.commitlog_scan import END_BLANK, _POS, _SIZE, RecordScanner, scan_window, walk_records
from store.pipeline.layout import SegmentFile

DEFAULT_BATCH_BYTES = 32 * 1024 * 1024
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024
_WALK_SCRATCH = 4096     # positions per walk_headers call while planning (only the boundaries are kept)
# Windows scanned and decoded at once by one reader: both cores when the kernel is compiled (its scan
# and decode_columns release the GIL); the numpy path holds the GIL too much to gain.
DECODE_THREADS = min(2, os.cpu_count() or 1) if kernel.COMPILED else 1


@dataclass(frozen=True, slots=True)
class SegmentSplit:
    """Records of `path` starting in [start_position, stop_position) (None = to the segment's end)."""

    path: str
    file_from_offset: int
    start_position: int = 0
    stop_position: int | None = None
    dledger: bool = False           # a whole DLedger data file (store.pipeline.dledger_scan)


@dataclass(frozen=True, slots=True)
class SegmentEnd:
    """Where a read stopped: `phy_offset` of the first byte not read and why (`commitlog_scan.END_*`)."""

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


MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)   # Linux >= 5.14


def populate(buf: np.ndarray, start: int, stop: int) -> None:
    """Map the pages of buf[start:stop] in one call (page-cache pages; a no-op where unsupported),
    instead of one page fault per 16 pages while the records are read."""
    mapping = getattr(buf.base, "obj", buf.base)   # np.frombuffer(mmap) -> memoryview -> mmap
    if not isinstance(mapping, mmap.mmap) or stop <= start:
        return
    start -= start % mmap.PAGESIZE
    try:
        mapping.madvise(MADV_POPULATE_READ, start, min(stop, len(mapping)) - start)
    except (OSError, ValueError, AttributeError):
        pass


def release(buf: np.ndarray, start: int, stop: int) -> None:
    """Drop the process's mappings of the whole pages of buf[start:stop] (MADV_DONTNEED on the
    read-only file map: the page cache keeps the bytes, a later read maps them again), so that the
    resident memory of a read stays that of the batches in flight, not of the whole split."""
    mapping = getattr(buf.base, "obj", buf.base)
    start = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    stop = min(stop, len(buf)) // mmap.PAGESIZE * mmap.PAGESIZE
    if not isinstance(mapping, mmap.mmap) or stop <= start:
        return
    try:
        mapping.madvise(mmap.MADV_DONTNEED, start, stop - start)
    except (OSError, ValueError, AttributeError):
        pass


class _Window:
    """The pages of a split the reader works on: mapped (`populate`) ahead of each scan window,
    released behind the batches once decoded."""

    def __init__(self, buf: np.ndarray, start: int):
        self.buf = buf
        self.released = start

    def prepare(self, start: int, stop: int) -> None:
        populate(self.buf, start, stop)

    def done_below(self, position: int) -> None:
        if position > self.released:
            release(self.buf, self.released, position)
            self.released = position


def _span(part) -> tuple[int, int]:
    rows = part.rows
    return int(rows[0, _POS]), int(rows[-1, _POS] + rows[-1, _SIZE])


class SegmentReader:
    """Decodes one split. Iterate `batches()`; afterwards `end` says where and why reading stopped.

    `views=True` gives body, topic, properties_raw, tags, keys and uniq_key as Arrow views
    (binary_view / string_view) into the segment's read-only map instead of copies: the batches
    then keep the map alive, and show what the file holds when they are read (a live broker may
    still append to, or recovery cut, the segment behind them; copy what must outlive that).
    """

    def __init__(
        self,
        split: SegmentSplit,
        *,
        columns: list[str] | None = None,
        row_filter: RowFilter | None = None,
        check_crc: bool = False,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        decode_threads: int = DECODE_THREADS,
        views: bool = False,
    ):
        self.split = split
        self.columns = list(COMMITLOG_COLUMNS) if columns is None else list(columns)
        unknown = [c for c in self.columns if c not in COMMITLOG_COLUMNS]
        if unknown:
            raise ValueError(f"unknown commit-log columns {unknown}; known: {list(COMMITLOG_COLUMNS)}")
        self.row_filter = row_filter or RowFilter()
        self.check_crc = check_crc
        self.batch_bytes = batch_bytes
        self.decode_threads = decode_threads
        self.views = views      # body, topic, properties_raw, tags, keys, uniq_key as views into the map
        self.end: SegmentEnd | None = None
        self.windows_in_threads = 0     # windows scanned by the decode threads (the rest: sequentially)

    def batches(self) -> Iterator[pa.RecordBatch]:
        buf = map_file(self.split.path)
        window = _Window(buf, self.split.start_position)
        decoder = RecordDecoder(buf, self.split.file_from_offset, os.path.basename(self.split.path),
                                views=self.views)
        if self.decode_threads > 1 and not self.split.dledger:
            yield from self._scanned_in_threads(buf, decoder, window)
            return
        if self.split.dledger:
            from store.pipeline.dledger_scan import DLedgerScanner
            scanner = DLedgerScanner(buf, self.split.file_from_offset, self.split.path,
                                     start_position=self.split.start_position,
                                     stop_position=self.split.stop_position,
                                     check_crc=self.check_crc)
        else:
            scanner = RecordScanner(buf, self.split.start_position, self.split.stop_position,
                                    check_crc=self.check_crc, batch_bytes=self.batch_bytes,
                                    prepare=window.prepare)
        parts = self._parts(scanner, decoder, window)
        if self.decode_threads <= 1:
            for part in parts:
                batch = decoder.batch(part, self.columns)
                window.done_below(_span(part)[1])
                yield batch
        else:
            yield from self._decoded_in_threads(parts, decoder, window)
        self.end = SegmentEnd(self.split.file_from_offset + scanner.end_position, scanner.end_kind, scanner.records)

    def _parts(self, scanner, decoder: RecordDecoder, window: _Window | None = None) -> Iterator[ScanLayout]:
        for rows in scanner.batches():
            part = self._kept(rows, decoder)
            if len(part):
                yield part
            elif window is not None:
                # Nothing kept (a topic filter): no batch will release these pages. The decodes
                # still in flight may fault theirs back in; none reads past its own part.
                window.done_below(int(rows[-1, _POS]))

    def _kept(self, rows: np.ndarray, decoder: RecordDecoder) -> ScanLayout:
        """The scan rows the row filter keeps."""
        part = ScanLayout(rows)
        keep = self.row_filter.mask(decoder, part)
        return part if keep is None else part.take(np.flatnonzero(keep))

    def _decoded_in_threads(self, parts: Iterator[ScanLayout], decoder: RecordDecoder,
                            window: _Window | None = None) -> Iterator[pa.RecordBatch]:
        """The batches of `parts` in order, decoded `decode_threads` at a time while the scan goes on
        (kernel.scan and kernel.decode_columns release the GIL, so they run on both cores), one more
        batch scanned and queued ahead so no worker waits for the scan. A scan
        error is raised after the batches before it, as the sequential loop would."""
        with ThreadPoolExecutor(self.decode_threads, thread_name_prefix="segment-decode") as pool:
            pending: deque = deque()
            parts = iter(parts)
            try:
                while True:
                    try:
                        part = next(parts)
                    except StopIteration:
                        break
                    except Exception:
                        while pending:               # the batches before the failure first
                            yield self._next_decoded(pending, window)
                        raise
                    pending.append((pool.submit(decoder.batch, part, self.columns), _span(part)))
                    if len(pending) > self.decode_threads:
                        yield self._next_decoded(pending, window)
                while pending:
                    yield self._next_decoded(pending, window)
            finally:
                for future, _ in pending:            # closed early, or a decode failed
                    future.cancel()

    def _scanned_in_threads(self, buf, decoder: RecordDecoder, window: _Window) -> Iterator[pa.RecordBatch]:
        """`batches()` with each window scanned by the thread that decodes it, so the scan (a fifth
        of the work) leaves the reader's thread and both cores scan and decode.

        Window k is `RecordScanner`'s window k: it starts where the scan of window k - 1 stopped
        (its worker hands that position on as soon as its scan is done, before its decode) and
        scans with the same limit, so its rows are the sequential ones. Only the usual case goes
        on this way: a window with records, not ended by a BLANK or the split's end. A window that
        finds no record (one the scan refuses, or one larger than a window) stops the hand-over,
        and `RecordScanner` goes on from that window's start (or from a BLANK or the split's end):
        the batches and `end` are the sequential ones (tests compare them on damaged segments).
        """
        view = memoryview(buf)
        stop = len(view) if self.split.stop_position is None else min(self.split.stop_position, len(view))
        records, position = 0, stop
        first = Future()
        first.set_result(self.split.start_position)
        handed = first                   # the start of the next window to submit, once known
        rows_hint = [1024]
        with ThreadPoolExecutor(self.decode_threads, thread_name_prefix="segment-decode") as pool:
            pending: deque = deque()
            try:
                while True:
                    while handed is not None and len(pending) <= self.decode_threads:
                        following = Future()
                        pending.append(pool.submit(self._scan_and_decode, view, handed, following, stop,
                                                   rows_hint, decoder, window))
                        handed = following
                    if not pending:
                        break
                    result = pending.popleft().result()
                    if result is None:       # an earlier window stopped the hand-over
                        continue
                    count, start, next_position, kind, batch, end, goes_on = result
                    records += count
                    self.windows_in_threads += 1
                    if count:
                        window.done_below(end)
                    if batch is not None:
                        yield batch
                    if goes_on:
                        continue
                    for later in pending:    # they return None at once: their start never comes
                        later.cancel()
                    pending.clear()
                    handed = None
                    if count and kind == kernel.STOP_BLANK:
                        self.end = SegmentEnd(self.split.file_from_offset + next_position, END_BLANK,
                                              records)
                        return
                    position = next_position if count else start
                    break
            finally:
                for later in pending:        # closed early, or a decode failed
                    later.cancel()
        scanner = RecordScanner(buf, position, self.split.stop_position, check_crc=self.check_crc,
                                batch_bytes=self.batch_bytes, prepare=window.prepare)
        yield from self._decoded_in_threads(self._parts(scanner, decoder, window), decoder, window)
        self.end = SegmentEnd(self.split.file_from_offset + scanner.end_position, scanner.end_kind,
                              records + scanner.records)

    def _scan_and_decode(self, view, started: Future, following: Future, stop: int, rows_hint: list,
                         decoder: RecordDecoder, window: _Window):
        """In a worker: wait for this window's start, scan it as `RecordScanner` does, hand the next
        start on (or None: the hand-over stops), then filter and decode. None when no start came;
        else (records, start, where the scan stopped, its kind, the batch or None, the last record's
        end, whether the next window goes on from here)."""
        try:
            start = started.result()
            if start is None:
                following.set_result(None)
                return None
            soft = min(start + self.batch_bytes, stop)
            if start >= stop:
                following.set_result(None)
                return 0, start, start, kernel.STOP_END, None, start, False
            window.prepare(start, soft)
            rows, position, kind = scan_window(view, start, soft, self.check_crc, rows_hint[0])
            count = len(rows)
            # As RecordScanner: after a window with records, the next starts where the scan
            # stopped (a record crossing the limit, or one it refused: that window then finds
            # nothing and the sequential scan judges it), unless at a BLANK or the split's end.
            goes_on = count > 0 and kind != kernel.STOP_BLANK and position < stop
            following.set_result(position if goes_on else None)
        except BaseException:
            if not following.done():
                following.set_result(None)
            raise
        if not count:
            return 0, start, position, kind, None, start, False
        rows_hint[0] = max(rows_hint[0], count + count // 8 + 1)
        end = int(rows[-1, _POS] + rows[-1, _SIZE])
        part = self._kept(rows, decoder)
        batch = decoder.batch(part, self.columns) if len(part) else None
        return count, start, position, kind, batch, end, goes_on

    @staticmethod
    def _next_decoded(pending: deque, window: _Window | None) -> pa.RecordBatch:
        """The oldest pending batch, once decoded; the pages below the next one's are released."""
        future, (_, end) = pending[0]
        batch = future.result()
        pending.popleft()
        if window is not None:
            window.done_below(pending[0][1][0] if pending else end)
        return batch


def plan_splits(segments: list[SegmentFile], split_bytes: int | None = DEFAULT_SPLIT_BYTES) -> list[SegmentSplit]:
    """One split per segment, or several at record boundaries for segments larger than `split_bytes`
    (None: never).

    Finding a boundary inside a segment needs the record chain up to it, so only large segments are
    walked here (8 bytes read per record); small ones cost the planner nothing but a file listing.
    """
    splits = []
    for segment in segments:
        if split_bytes is None:
            splits.append(SegmentSplit(segment.path, segment.file_from_offset, dledger=segment.dledger))
            continue
        if segment.dledger:             # entry boundaries need the walk from the file's start
            from store.pipeline.dledger_scan import entry_boundaries
            starts = [0] if segment.size_bytes <= split_bytes else entry_boundaries(
                map_file(segment.path), segment.file_from_offset, segment.path, split_bytes)
            for start, stop in zip(starts, starts[1:] + [None]):
                splits.append(SegmentSplit(segment.path, segment.file_from_offset, start, stop,
                                           dledger=True))
            continue
        if segment.size_bytes <= split_bytes:
            splits.append(SegmentSplit(segment.path, segment.file_from_offset))
            continue
        boundaries = [0] + split_boundaries(map_file(segment.path), split_bytes)
        for start, stop in zip(boundaries, boundaries[1:] + [None]):
            splits.append(SegmentSplit(segment.path, segment.file_from_offset, start, stop))
    return splits


def split_boundaries(buf: np.ndarray, split_bytes: int) -> list[int]:
    """The start of the first record at or after each multiple of `split_bytes` (0 excluded, no
    repeats), following `walk_records`' header chain: a boundary is a record the walk takes.

    Compiled, `kernel.walk_headers` walks to each target in turn and only the boundaries come back
    (the whole walk's positions, sizes and magics cost the planner 6x the walk itself: 30 ms of
    the 512 MiB decode bench on the main thread before any batch); the twin walks by scan runs.
    """
    targets = range(split_bytes, len(buf), split_bytes)
    if not kernel.COMPILED:
        walk = walk_records(buf)
        if not walk.positions.shape[0]:
            return []
        index = np.searchsorted(walk.positions, np.array(targets, dtype=np.int64), side="left")
        index = index[index < walk.positions.shape[0]]
        return sorted(set(int(walk.positions[i]) for i in index) - {0})
    scratch = np.empty(_WALK_SCRATCH, dtype=np.int64)
    one = scratch[:1]
    boundaries: list[int] = []
    position = 0
    for target in targets:
        while True:                  # to the first record starting at or after target
            _, position, kind = kernel_columns.walk_headers(buf, position, target, scratch)
            if kind != kernel_columns.WALK_FULL:
                break
        if kind != kernel_columns.WALK_STOP:
            break                    # the chain ended before target (BLANK, zeros, invalid, file end)
        if kernel_columns.walk_headers(buf, position, position + 1, one)[0] != 1:
            break                    # the record at the target is not one the walk takes
        if position and (not boundaries or boundaries[-1] != position):
            boundaries.append(position)
    return boundaries
