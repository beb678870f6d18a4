"""Reading commit-log segments for recovery's walk with pread(2) into one reused buffer.

Walking a segment through its map costs a page fault per few pages, and on a cold page cache the
map's read-around waits for each window of the file in turn; `pread` on a descriptor advised
POSIX_FADV_SEQUENTIAL lets the kernel read ahead while the scan checks what it has (a cold walk runs
at the speed of a `cat` of the files instead of ~1.5x it). Nothing is mapped into the process either:
the walk's resident memory is the buffer, whatever the size of the log.

The page cache is shared: what `pread` returns is what the map holds. A read that comes back short
(a file shorter than its segment size) answers None and the caller reads through the map, as before.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

from store.mappedfile.mapped_file import MappedFile

# Bytes per read: large enough that a read costs little more than its copy, small enough to stay
# out of the way (one buffer per walk).
CHUNK_BYTES = 16 << 20
# Bytes of the log dispatch walks between two releases of its mapped pages (PageReleaser).
RELEASE_STEP_BYTES = 32 << 20


@dataclass(slots=True)
class Window:
    """Bytes of one segment read into memory: `buffer[0]` is the log's byte at `file_from_offset`
    (the two attributes a segment's walk reads, as a MappedFile has them)."""

    file_from_offset: int
    buffer: memoryview
    mapped: MappedFile


class SegmentReader:
    """Reads windows of segments, one descriptor open at a time (close() when done)."""

    def __init__(self, chunk_bytes: int | None = None):
        self._chunk = bytearray(chunk_bytes or CHUNK_BYTES)
        self._view = memoryview(self._chunk)
        self._fd: int | None = None
        self._path: str | None = None

    def read(self, mapped: MappedFile, position: int, limit: int) -> Window | None:
        """The segment's bytes from `position` up to `limit` (at most one chunk); None when they
        cannot be read with pread (the caller walks the map instead). The window's buffer is
        overwritten by the next read."""
        wanted = max(0, min(limit - position, len(self._chunk)))
        if wanted == 0:
            return Window(mapped.file_from_offset + position, self._view[:0], mapped)
        fd = self._descriptor(mapped.path)
        if fd is None or position < 0:
            return None
        try:
            got = os.preadv(fd, [self._view[:wanted]], position)
        except OSError:
            return None
        if got != wanted:
            return None
        return Window(mapped.file_from_offset + position, self._view[:wanted], mapped)

    def _descriptor(self, path: str) -> int | None:
        if path == self._path:
            return self._fd
        self.close()
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        except (OSError, AttributeError):
            pass                     # advice only
        self._fd, self._path = fd, path
        return fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = self._path = None


class PageReleaser:
    """Drops from the process the mapped pages of the commit log that a walk has passed (madvise
    MADV_DONTNEED on a shared file map: the pages stay in the page cache, a dirty one is still
    written back, a later read maps them again), so that catching dispatch up with a large log after
    a crash keeps the process's resident memory flat. Not for a DLedger log (its files are not laid
    out by commit-log offset): then it releases nothing and `next_bound` is None."""

    def __init__(self, commit_log, step_bytes: int | None = None):
        self._files = [] if getattr(commit_log, "walk_for_dispatch", None) is not None else \
            list(commit_log.mapped_files.files)
        self._step = step_bytes or RELEASE_STEP_BYTES
        self._next = 0                   # first file not wholly released
        self._done = self._files[0].file_from_offset if self._files else 0   # released below this

    def next_bound(self) -> int | None:
        """Where the walk should pause next: `step_bytes` past what is released, at most the end of
        that segment (None: nothing left to release)."""
        if self._next >= len(self._files):
            return None
        return min(self._done + self._step, self._files[self._next].file_end_offset)

    def below(self, offset: int) -> None:
        """Release the pages of the log below `offset` (whole pages) not released yet."""
        files = self._files
        while self._next < len(files) and self._done < offset:
            mapped = files[self._next]
            start = max(self._done, mapped.file_from_offset) - mapped.file_from_offset
            end = min(offset, mapped.file_end_offset) - mapped.file_from_offset
            first, last = start - start % mmap.PAGESIZE, end - end % mmap.PAGESIZE
            if end == mapped.file_size_bytes:
                last = end
            if last > first and not mapped.destroyed:
                try:
                    mapped.buffer.madvise(mmap.MADV_DONTNEED, first, last - first)
                except (OSError, ValueError, AttributeError):
                    pass         # advice only (a closed map, a platform without madvise)
            if end < mapped.file_size_bytes:
                self._done = mapped.file_from_offset + last
                return
            self._done = mapped.file_end_offset
            self._next += 1
