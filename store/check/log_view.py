"""The commit log's segment files as they are on disk, mapped read-only, for the cross-check, the dump
tool, the inspector and index rebuilds.

Nothing here trusts the engine's recovery: segment files are mapped read-only as they are on disk (any
size); `iter_records` walks them with RocketMQ's validity rule (spec §2.7) the way recovery does
(`CommitLog.checkMessageAndReturnSize` over `MappedFileQueue`'s files), ending at the first invalid record.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from store.codec import message as msgcodec
from store.codec import record_check
from store.mappedfile.mapped_file import parse_file_name

_INT = struct.Struct(">i")
_ZERO_CHUNK_BYTES = 1 << 20

RELEASE_EVERY = 256                 # check_at reads between two release_pages


def release_map(buffer, advice: str = "MADV_DONTNEED") -> None:
    """Drop a map's pages from this process (they stay in the page cache), so the RSS of a check
    does not grow with the store; advice="MADV_WILLNEED" reads a map ahead instead. Anything that
    is not a live mmap (bytes, a closed map), or a kernel that refuses the advice, is left alone."""
    if isinstance(buffer, mmap.mmap) and hasattr(mmap, advice):
        try:
            buffer.madvise(getattr(mmap, advice))
        except (OSError, ValueError):
            pass


@dataclass
class Segment:
    path: str
    file_from_offset: int
    size_bytes: int               # on disk (the configured size unless damaged)
    buffer: object                # mmap (read-only) or b"" for an empty file


class CommitLogView:
    """The segment files of every commit-log directory, mapped read-only, in name order."""

    def __init__(self, directories, segment_size_bytes: int, delay_levels_ms=None, *,
                 force_verify_prop_crc: bool = False, multi_dispatch: bool = False):
        self.segment_size_bytes = segment_size_bytes
        # [5.x] enableMultiDispatch: every record's INNER_MULTI_DISPATCH is read (LMQ coverage), so
        # the walk goes record by record (the kernel scan's columns do not carry that property).
        self.multi_dispatch = multi_dispatch
        # [5.x] forceVerifyPropCRC: recovery checks each record's `__CRC32#` instead of BODYCRC.
        self.force_verify_prop_crc = force_verify_prop_crc
        self.delay_levels_ms = tuple(delay_levels_ms or record_check.DEFAULT_DELAY_LEVELS_MS)
        self.segments: list[Segment] = []
        self.ignored_names: list[str] = []
        self.leftover_names: list[str] = []
        for directory in directories:
            self._load_directory(directory)
        self.segments.sort(key=lambda s: s.file_from_offset)
        self._starts = [s.file_from_offset for s in self.segments]
        self._touched: set[int] = set()         # segments check_at read since release_pages
        self._reads = 0

    def _load_directory(self, directory: str) -> None:
        try:
            names = sorted(os.listdir(directory))
        except FileNotFoundError:
            return
        for name in names:
            path = os.path.join(directory, name)
            offset = parse_file_name(name)
            if offset is None or not os.path.isfile(path):
                (self.leftover_names if name.endswith(".creating") else self.ignored_names).append(path)
                continue
            size = os.path.getsize(path)
            buffer: object = b""
            if size > 0:
                with open(path, "rb") as handle:
                    buffer = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
            self.segments.append(Segment(path, offset, size, buffer))

    def release_pages(self) -> None:
        """Drop the mapped pages of the segments `check_at` read since the last release."""
        for start in self._touched:
            segment = self.find(start)
            if segment is not None:
                release_map(segment.buffer)
        self._touched.clear()
        self._reads = 0

    def close(self) -> None:
        for segment in self.segments:
            if isinstance(segment.buffer, mmap.mmap):
                segment.buffer.close()
        self.segments = []
        self._starts = []

    def __enter__(self) -> "CommitLogView":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def find(self, phy_offset: int) -> Segment | None:
        index = bisect.bisect_right(self._starts, phy_offset) - 1
        if index < 0:
            return None
        segment = self.segments[index]
        return segment if phy_offset < segment.file_from_offset + segment.size_bytes else None

    def check_at(self, phy_offset: int, *, check_crc: bool = False) -> record_check.CheckResult:
        """RocketMQ's record check at a physical offset (INVALID when no segment holds it).

        Every RELEASE_EVERY calls, the pages these reads mapped are dropped from the process (they
        stay in the page cache): scattered reads over a large log (a unit or an index entry per
        queue) fault in readahead around each, and the RSS would grow with the log's size."""
        segment = self.find(phy_offset)
        if segment is None:
            return record_check.CheckResult(record_check.CHECK_INVALID, -1, None)
        self._touched.add(segment.file_from_offset)
        self._reads += 1
        if self._reads >= RELEASE_EVERY:
            self.release_pages()
        return record_check.check_message(segment.buffer, phy_offset - segment.file_from_offset,
                                          check_crc=check_crc, limit=segment.size_bytes,
                                          delay_levels_ms=self.delay_levels_ms)


def body_crc_matches(buffer, position: int) -> bool:
    """Whether BODYCRC of the (already length-checked) record at `position` matches its body."""
    sys_flag = _INT.unpack_from(buffer, position + msgcodec.SYSFLAG_POSITION)[0]
    b = msgcodec.born_host_size(sys_flag)
    s = msgcodec.store_host_size(sys_flag)
    body_length = _INT.unpack_from(buffer, position + 68 + b + s)[0]
    if body_length <= 0:
        return True
    stored = _INT.unpack_from(buffer, position + 8)[0]
    body_position = position + 72 + b + s
    return zlib.crc32(buffer[body_position:body_position + body_length]) & msgcodec.CRC_MASK == stored


def is_all_zero(buffer, start: int, end: int, path: str | None = None) -> bool:
    """Whether buffer[start:end] holds only zero bytes. With the file's `path`, holes of a sparse
    file are skipped (SEEK_DATA/SEEK_HOLE): a fresh 1 GiB segment costs nothing to check."""
    for data_start, data_end in data_regions(path, start, end):
        for chunk_start in range(data_start, data_end, _ZERO_CHUNK_BYTES):
            count = min(data_end, chunk_start + _ZERO_CHUNK_BYTES) - chunk_start
            if np.frombuffer(buffer, dtype=np.uint8, count=count, offset=chunk_start).any():
                return False
    return True


def data_regions(path: str | None, start: int, end: int):
    """(start, end) ranges of [start, end) that may hold data: everything without SEEK_DATA."""
    if start >= end:
        return []
    if path is None or not hasattr(os, "SEEK_DATA"):
        return [(start, end)]
    regions = []
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return [(start, end)]
    try:
        position = start
        while position < end:          # each step moves past one data region
            try:
                data = os.lseek(fd, position, os.SEEK_DATA)
            except OSError:            # ENXIO: only a hole is left
                break
            if data >= end:
                break
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
            regions.append((data, hole))
            position = hole
    except OSError:
        return [(start, end)]
    finally:
        os.close(fd)
    return regions


def iter_records(view: CommitLogView, start_phy_offset: int = 0, *, check_crc: bool = False):
    """Yield (phy_offset, CheckResult) like recovery walks: BLANKs move on to the next file, and
    the walk ends at the first invalid record (which is yielded too)."""
    if not view.segments:
        return
    phy_offset = max(start_phy_offset, view.segments[0].file_from_offset)
    for _ in range(1 << 40):          # bounded by the log size: each step moves forward
        segment = view.find(phy_offset)
        if segment is None:
            return
        result = view.check_at(phy_offset, check_crc=check_crc)
        yield phy_offset, result
        if result.kind == record_check.CHECK_RECORD:
            phy_offset += result.size
        elif result.kind == record_check.CHECK_BLANK:
            phy_offset = segment.file_from_offset + segment.size_bytes
        else:
            return
