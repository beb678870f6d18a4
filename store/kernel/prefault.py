"""`prefault` (C: c/prefault.c): madvise(MADV_POPULATE_WRITE) over the whole pages of
[start, start+length) of a writable `mmap.mmap`, clipped to it; the answer is the bytes advised.
`sync_range` (C: the same file): msync [start, end) after dropping the map's whole pages below
end's page (MappedFile.flush of the commit log; the C says why).

A background thread (store/services/prefault.py) calls it a few MiB ahead of the commit log's
writer, so that the page faults of a segment's first writes (and the kernel's zeroing of a sparse
file's new pages) happen there instead of on the put thread. The C releases the GIL around the
madvise; `prefault_py`, its twin, is `mmap.madvise` (the GIL held), with the same answers and
refusals (tests/test_kernel_prefault.py, the fuzz target in tests/kernel_fuzz/prefault_target.py).
"""

from __future__ import annotations

import mmap
import operator

from store.kernel import COMPILED, _native

MADV_POPULATE_WRITE = 23    # Linux 5.14 (Python 3.11's mmap module has no name for it)


def _ssize(value) -> int:
    value = operator.index(value)       # TypeError as PyNumber_AsSsize_t's
    if not -2**63 <= value < 2**63:
        raise OverflowError("cannot fit 'int' into an index-sized integer")
    return value


def _mmap_type() -> type:
    """mmap.mmap itself, or the class a test's replacement subclass derives from (as the C's)."""
    return next(t for t in mmap.mmap.__mro__ if t.__module__ == "mmap" and t.__name__ == "mmap")


def prefault_py(*args) -> int:
    """The twin of the compiled `prefault(map, start, length)` (see the module docstring)."""
    if len(args) != 3:
        raise TypeError("prefault(map, start, length)")
    map_, start, length = args
    if not isinstance(map_, _mmap_type()):
        raise TypeError("prefault: the map must be an mmap.mmap")
    start = _ssize(start)
    length = _ssize(length)
    if start < 0 or length < 0:
        raise ValueError("prefault: start and length must be >= 0")
    with memoryview(map_) as view:      # a closed map: ValueError, as the C's buffer request
        if view.readonly:
            raise BufferError("Object is not writable.")
        size = len(view)
    end = min(size, start + length)
    first = min(start, size)
    first += -first % mmap.PAGESIZE
    end -= end % mmap.PAGESIZE
    advised = end - first if end > first else 0
    if advised:
        map_.madvise(MADV_POPULATE_WRITE, first, advised)
    return advised


def sync_range_py(*args) -> int:
    """The twin of the compiled `sync_range(map, start, end, drop)` (see c/prefault.c): the same
    checks and answer, with the GIL held (mmap.madvise, mmap.flush). `drop`: a shared map only."""
    if len(args) != 4:
        raise TypeError("sync_range(map, start, end, drop)")
    map_, start, end, drop = args
    if not isinstance(map_, _mmap_type()):
        raise TypeError("sync_range: the map must be an mmap.mmap")
    start = _ssize(start)
    end = _ssize(end)
    drop = bool(drop)
    with memoryview(map_) as view:      # a closed map: ValueError, as the C's buffer request
        if view.readonly:
            raise BufferError("Object is not writable.")
        size = len(view)
    if start < 0 or end < start or end > size:
        raise ValueError("sync_range: need 0 <= start <= end <= the map's size")
    first, full = start - start % mmap.PAGESIZE, end - end % mmap.PAGESIZE
    if end <= first:
        return 0
    if drop and full > first:
        map_.madvise(mmap.MADV_DONTNEED, first, full - first)
    map_.flush(first, end - first)
    return end - first


prefault = _native.prefault if COMPILED else prefault_py
sync_range = _native.sync_range if COMPILED else sync_range_py
