"""The cross-check's walk of the commit log (over `store.check.log_view`'s read-only segments).

Nothing here trusts the engine's recovery: the walk reads every record with RocketMQ's validity rule
(spec §2.7), carrying on past damage where the damage does not hide the next record, so one bad byte
gives one finding.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

import numpy as np

from store.check.columns import RecordColumns
from store.check.findings import Sink
from store.check.log_view import (CommitLogView, Segment, body_crc_matches, is_all_zero,
                                  release_map)
from store.codec import message as msgcodec
from store.codec import prop_crc, record_check
from store.consumequeue.lmq import PROPERTY_INNER_MULTI_DISPATCH

_INT = struct.Struct(">i")


@dataclass
class LogScan:
    """What the walk learned, for the consume-queue and index checks."""

    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    min_offset: int = 0
    end_offset: int = 0                 # end of the valid data (where recovery would stop at best)
    walked_to: int = 0                  # how far the walk got (< end when max_records cut it)
    records: int = 0
    capped: bool = False
    last_store_timestamp: int = 0
    queue_ends: dict = field(default_factory=dict)   # (topic, queue_id) -> max queue offset + 1
    queue_starts: dict = field(default_factory=dict)  # (topic, queue_id) -> min queue offset
    # Queued records whose properties name multi-dispatch queues (INNER_MULTI_DISPATCH): their
    # LMQ units are checked for coverage like a record's own (store.check.consumequeue).
    multi_dispatch: list = field(default_factory=list)
    # CQ units / index entries matching a walked record (stream_units, stream_index); None: none.
    unit_matches: object = None
    entry_matches: object = None
    segment_starts: object = None    # phy_offset -> starts near it (SegmentStarts); None: `starts`

    def note_queued(self, request) -> None:
        """A record that gets a consume-queue unit (NOT / COMMIT transaction type)."""
        key = (request.topic, request.queue_id)
        self.queue_ends[key] = max(self.queue_ends.get(key, 0), request.consume_queue_offset + 1)
        self.queue_starts[key] = min(self.queue_starts.get(key, 1 << 62),
                                     request.consume_queue_offset)
        if request.properties and PROPERTY_INNER_MULTI_DISPATCH in request.properties:
            self.multi_dispatch.append(request)

    def starts_near(self, phy_offset: int) -> np.ndarray:
        """Walked record starts, sorted: at least those near phy_offset in its segment."""
        return self.starts if self.segment_starts is None else self.segment_starts(phy_offset)

    def is_record_start(self, phy_offset: int) -> bool | None:
        """True/False for offsets the walk covered, None beyond it (then only the fields can tell)."""
        if phy_offset >= self.walked_to:
            return None
        starts = self.starts_near(phy_offset)
        index = int(np.searchsorted(starts, phy_offset))
        return index < len(starts) and int(starts[index]) == phy_offset


def _last_data_segment(view: CommitLogView, sink: Sink) -> int:
    """Index of the last segment holding any non-zero byte; all-zero trailing files are
    preallocated (RocketMQ creates file N+1 together with file N)."""
    index = len(view.segments) - 1
    while index >= 0:
        segment = view.segments[index]
        if not is_all_zero(segment.buffer, 0, segment.size_bytes, segment.path):
            break
        sink.add("info", "commitlog", segment.path, 0, "all-zero segment after the end of the log "
                 "(preallocated, or created and never written)")
        index -= 1
    return index


def _release(segment: Segment, advice: str = "MADV_DONTNEED") -> None:
    """Drop the walked segment's pages from this process: the RSS does not grow with the log.
    MADV_WILLNEED: read it ahead (the next segment, while walking)."""
    release_map(segment.buffer, advice)


def walk_commit_log(view: CommitLogView, sink: Sink, *, max_records: int | None,
                    unclean: bool, progress=None, matchers=()) -> LogScan:
    """Walk every record of every segment; report damage; return the record starts. `matchers`
    (stream_units.UnitMatcher, stream_index.EntryMatcher) get the columns of each window of about
    WINDOW_RECORDS records (`take`), then `finish(scan)`: no column outlives its window."""
    scan = LogScan()
    if not view.segments:
        return scan
    scan.min_offset = view.segments[0].file_from_offset
    last_data = _last_data_segment(view, sink)
    starts, columns, last_start, checkpoints = array("q"), RecordColumns(), -1, []
    scan.end_offset = scan.min_offset
    if not view.force_verify_prop_crc and not view.multi_dispatch:     # _walk_segment's `fast`
        columns.scan_ahead([(segment.buffer, segment.size_bytes)
                            for segment in view.segments[:last_data + 1] if segment.size_bytes])
    try:
        for index, segment in enumerate(view.segments[:last_data + 1]):
            if sink.full or scan.capped:
                break
            if index < last_data:
                _release(view.segments[index + 1], "MADV_WILLNEED")
            end = _walk_segment(view, segment, index == last_data, sink, scan, starts,
                                max_records, unclean, columns)
            scan.end_offset = end if index == last_data else scan.end_offset
            _release(segment)
            if columns.count >= WINDOW_RECORDS:
                last_start = _hand_over(columns, starts, matchers, last_start, checkpoints)
            if progress is not None:
                progress("commitlog", index + 1, last_data + 1)
    finally:
        columns.close()
    columns.fold_spans(scan)
    last_start = _hand_over(columns, starts, matchers, last_start, checkpoints)
    scan.walked_to = last_start + 1 if scan.capped else max(scan.end_offset, scan.min_offset)
    scan.segment_starts = SegmentStarts(view, last_data, unclean, scan.walked_to, checkpoints)
    if scan.capped:
        sink.add("info", "commitlog", None, None,
                 f"max_records={max_records} cut the commit log walk short at "
                 f"{last_start}; later records were not checked")
    for matcher in matchers:
        matcher.finish(scan)
    return scan


WINDOW_RECORDS = 1 << 19
CHECKPOINT_EVERY = 1024                 # one walked record start kept in this many

def _hand_over(columns: RecordColumns, starts, matchers, last_start: int, checkpoints) -> int:
    """Hand the window to the matchers, forget it but for `checkpoints`; the last start."""
    columns.finish()
    if columns.count:
        window = np.frombuffer(starts[:], dtype=np.int64)
        last_start = int(window[-1])
        checkpoints.extend(window[::CHECKPOINT_EVERY].tolist())
        for matcher in matchers:
            if not getattr(matcher, "broken", False):
                try:
                    matcher.take(columns, window)
                except (OSError, ValueError):
                    matcher.broken = True     # what it matched stays true; the rest goes slow
    del starts[:]
    columns.reset()
    return last_start


class SegmentStarts:
    """Walked record starts below `walked_to` near an offset: walked again (findings dropped) from
    the last checkpoint before it in its segment, for CHECKPOINT_EVERY records; 8 kept."""

    def __init__(self, view, last_data: int, unclean: bool, walked_to: int, checkpoints):
        self.view, self.last_data, self.unclean = view, last_data, unclean
        self.walked_to, self.checkpoints = walked_to, np.array(checkpoints, dtype=np.int64)
        self.cache: dict[int, np.ndarray] = {}

    def __call__(self, phy_offset: int) -> np.ndarray:
        segment = self.view.find(phy_offset)
        if segment is None:
            return np.zeros(0, dtype=np.int64)
        base = segment.file_from_offset
        at = int(np.searchsorted(self.checkpoints, phy_offset, side="right")) - 1
        begin = int(self.checkpoints[at]) if at >= 0 and self.checkpoints[at] >= base else base
        starts = self.cache.get(begin)
        if starts is None:
            found = array("q")
            _walk_segment(self.view, segment, segment is self.view.segments[self.last_data],
                          Sink(1, None), LogScan(), found, CHECKPOINT_EVERY + 2, self.unclean,
                          RecordColumns(CHECKPOINT_EVERY + 2), begin - base)
            _release(segment)
            starts = np.frombuffer(found, dtype=np.int64).copy()
            starts = starts[:int(np.searchsorted(starts, self.walked_to))]
            if len(self.cache) >= 8:
                self.cache.pop(next(iter(self.cache)))
            self.cache[begin] = starts
        return starts


def _walk_segment(view, segment: Segment, is_last: bool, sink: Sink, scan: LogScan, starts,
                  max_records, unclean: bool, columns: RecordColumns | None = None,
                  position: int = 0) -> int:
    """Walk one segment; return the phy_offset where its valid data ends. Runs of clean records
    go through `columns` (kernel.scan); everything else record by record here."""
    buffer, size, base = segment.buffer, segment.size_bytes, segment.file_from_offset
    # In a truncated segment, what the cut tore is repaired by padding it back to size.
    advice = _PAD_ADVICE if size < view.segment_size_bytes else {}
    fast = columns is not None and not view.force_verify_prop_crc and not view.multi_dispatch
    while position < size:           # every iteration moves forward or leaves the loop
        if fast:
            position = columns.walk_rows(buffer, base, position, size, scan, starts, max_records)
            if scan.capped:
                return base + position
            if position >= size:
                break
        if position + 8 > size:
            sink.add("error", "commitlog", segment.path, position,
                     f"{size - position} bytes left at the end of the file: no room for the "
                     f"BLANK record every finished segment ends with", **advice)
            return base + position
        result = record_check.check_message(buffer, position, check_crc=False, limit=size,
                                            delay_levels_ms=view.delay_levels_ms)
        if result.kind == record_check.CHECK_RECORD:
            _check_record(segment, position, result, sink, view.force_verify_prop_crc)
            starts.append(base + position)
            request = result.request
            if columns is not None:
                columns.add_request(request, base + position)
            scan.records += 1
            scan.last_store_timestamp = max(scan.last_store_timestamp, request.store_timestamp)
            if request.sys_flag & 0x0C in (0x00, 0x08):
                scan.note_queued(request)
            position += result.size
            if max_records is not None and scan.records >= max_records:
                scan.capped = True
                return base + position
            continue
        if result.kind == record_check.CHECK_BLANK:
            blank_size = _INT.unpack_from(buffer, position)[0]
            if blank_size != size - position:
                sink.add("error", "commitlog", segment.path, position,
                         f"BLANK record says {blank_size} bytes but {size - position} bytes "
                         f"remain in the file", **advice)
            return base + position if is_last else base + size
        return _invalid(segment, position, result, is_last, sink, unclean, advice)
    if not is_last:
        sink.add("error", "commitlog", segment.path, size,
                 "records fill the file to its last byte: no BLANK record ends it", **advice)
    return base + position


def _check_record(segment: Segment, position: int, result, sink: Sink,
                  force_verify_prop_crc: bool = False) -> None:
    phy_offset = segment.file_from_offset + position
    if result.request.commit_log_offset != phy_offset:
        sink.add("error", "commitlog", segment.path, position + msgcodec.PHY_OFFSET_POSITION,
                 f"PHYSICALOFFSET field says {result.request.commit_log_offset} but the record "
                 f"starts at {phy_offset}")
    if not body_crc_matches(segment.buffer, position):
        sink.add("warning" if force_verify_prop_crc else "error", "commitlog", segment.path,
                 position + 8, f"BODYCRC does not match the body of the record at {phy_offset} "
                 + ("(forceVerifyPropCRC: recovery checks the property CRC instead)"
                    if force_verify_prop_crc else "(recovery with checkCRCOnRecover stops here)"))
    if force_verify_prop_crc or prop_crc.has_reserved_trailer(segment.buffer, position, result.size):
        _check_prop_crc(segment, position, result, sink, force_verify_prop_crc)


def _check_prop_crc(segment: Segment, position: int, result, sink: Sink, forced: bool) -> None:
    """[5.x] The record's `__CRC32#` (store.codec.prop_crc) against its bytes: an error when
    forceVerifyPropCRC makes recovery check it, else a warning (a restart with it on would cut)."""
    ok, reason = prop_crc.check_property_crc(segment.buffer, result.request.properties,
                                             position + result.size, result.size)
    if ok:
        return
    phy_offset = segment.file_from_offset + position
    sink.add("error" if forced else "warning", "commitlog", segment.path,
             position + result.size - prop_crc.CRC32_RESERVED_LENGTH,
             f"{reason} at {phy_offset}; `rmqstore dump records --verify` shows its bytes",
             on_restart="recovery (checkCRCOnRecover + forceVerifyPropCRC) ends the log before this "
                        "record and cuts everything after it" if forced else
                        "nothing while forceVerifyPropCRC=false; with it on, recovery would end "
                        "the log before this record")


_PAD_ADVICE = {"repair": "rmqstore recover --pad-truncated --store {store}"}


def _invalid(segment: Segment, position: int, result, is_last: bool, sink: Sink,
             unclean: bool, advice: dict) -> int:
    buffer, size, base = segment.buffer, segment.size_bytes, segment.file_from_offset
    if is_all_zero(buffer, position, size, segment.path):
        if not is_last:
            sink.add("error", "commitlog", segment.path, position,
                     f"data ends at {base + position} without a BLANK record, but later "
                     f"segments hold data: recovery stops here and drops them", **advice)
        return base + position
    total_size, magic = struct.unpack_from(">ii", buffer, position)
    if result.size > 0:
        what = (f"TOTALSIZE {total_size} differs from the length its fields add up to")
    elif magic in (msgcodec.MESSAGE_MAGIC_V1, msgcodec.MESSAGE_MAGIC_V2):
        what = f"record of TOTALSIZE {total_size} is torn (runs past what the file holds)"
    else:
        what = f"unknown magic {magic & 0xFFFFFFFF:#010x} (TOTALSIZE {total_size})"
    if is_last:
        severity = "warning" if unclean else "error"
        sink.add(severity, "commitlog", segment.path, position,
                 f"non-zero bytes after the end of the log at {base + position}: {what}; "
                 f"recovery cuts the log here", **advice)
    else:
        sink.add("error", "commitlog", segment.path, position,
                 f"invalid record at {base + position}: {what}; the rest of this segment "
                 f"cannot be read", **advice)
    return base + position
