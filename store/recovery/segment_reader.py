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

import os
from dataclasses import dataclass

from store.mappedfile.mapped_file import MappedFile

# Bytes per read: large enough that a read costs little more than its copy, small enough to stay
# out of the way (one buffer per walk).
CHUNK_BYTES = 16 << 20


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
