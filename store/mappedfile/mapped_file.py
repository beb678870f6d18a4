"""One fixed-size, memory-mapped segment file (RocketMQ's `MappedFile`).

A segment is named by the 20-digit decimal offset of its first byte in its file set
(`file_from_offset`). It is created at its full size (a sparse, all-zero file) and never grows.

Positions inside the file (spec §8.1), all byte positions relative to the file start:

| position            | meaning                                                                    |
|---------------------|----------------------------------------------------------------------------|
| wrote_position      | end of data appended (into the map, or into the write buffer with a pool) |
| committed_position  | end of data copied from the write buffer into the map (= wrote without)   |
| flushed_position    | end of data forced to disk (msync)                                         |
| read_position       | what readers may see: committed with a write buffer, else wrote           |

Readers never see bytes beyond `read_position`.
"""

from __future__ import annotations

import errno
import mmap
import operator
import os
import threading

from store.errors import CorruptDataError, ReadOnlyStoreError
from store.kernel.prefault import sync_range

OS_PAGE_SIZE = 4096
FILE_NAME_DIGITS = 20


def offset_to_file_name(file_from_offset: int) -> str:
    """`UtilAll.offset2FileName`: 20 digits, zero padded."""
    assert file_from_offset >= 0
    return f"{file_from_offset:0{FILE_NAME_DIGITS}d}"


def parse_file_name(name: str) -> int | None:
    """The start offset encoded in a segment file name, or None if the name is not 20 digits."""
    if len(name) != FILE_NAME_DIGITS or not name.isdigit():
        return None
    return int(name)


def create_sparse_file(path: str, size_bytes: int, *, sync_directory: bool = True) -> None:
    """Create `path` at its full size, atomically: a crash never leaves a short file behind.

    The new length is fsynced before the rename (once per new file): a length set by ftruncate is
    metadata no later fdatasync of an untouched file forces, so without it a power cut after the
    directory fsync could leave the name with a 0-byte file (which no longer loads).
    `sync_directory=False` leaves the directory fsync to the caller (consume queues batch them).
    """
    tmp_path = path + ".creating"
    fd = os.open(tmp_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size_bytes)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    if sync_directory:
        fsync_directory(os.path.dirname(path))


def fsync_directory(directory: str | os.PathLike) -> None:
    """Make a file's creation, rename or deletion in `directory` durable (a power cut otherwise may
    lose the directory entry of a segment whose data was flushed)."""
    fd = os.open(os.fspath(directory) or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories_durable(directory: str | os.PathLike) -> None:
    """`os.makedirs(directory, exist_ok=True)`, then fsync the parent of every directory it
    created (top down), so that a new directory's entry survives a power cut like a new file's.
    Nothing is fsynced when the directory exists (call it once per new file, not per write)."""
    missing = []
    path = os.path.abspath(os.fspath(directory))
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if not missing:
        return
    os.makedirs(directory, exist_ok=True)
    for created in reversed(missing):
        fsync_directory(os.path.dirname(created))


class MappedFile:
    """A segment file mapped into memory. Callers serialize appends (the put lock does)."""

    def __init__(self, path: str, file_size_bytes: int, *, read_only: bool = False,
                 create: bool = False, write_buffer: bytearray | None = None,
                 release_write_buffer=None, sync_directory: bool = True):
        self.path = path
        self.file_size_bytes = file_size_bytes
        self.read_only = read_only
        name = os.path.basename(path)
        file_from_offset = parse_file_name(name)
        if file_from_offset is None:
            raise CorruptDataError(path, 0, f"segment file name {name!r} is not 20 decimal digits")
        self.file_from_offset = file_from_offset
        if create:
            if read_only:
                raise ReadOnlyStoreError(f"cannot create {path} in a read-only store")
            create_sparse_file(path, file_size_bytes, sync_directory=sync_directory)
        actual_size = os.path.getsize(path)
        if actual_size != file_size_bytes:
            raise CorruptDataError(
                path, actual_size,
                f"file is {actual_size} bytes, expected {file_size_bytes} (mappedFileSize)")
        self._map = self._open_map()
        self.write_buffer = write_buffer
        self.release_write_buffer = release_write_buffer
        # Appends with pwrite(2) instead of through the map (RocketMQ 5.x writes consume-queue units
        # with FileChannel.write). On this kernel the first write fault into a new sparse file's map
        # costs milliseconds, a pwrite a fraction of one: with thousands of queues that decides
        # whether dispatch keeps up. Reads still go through the map (the page cache is shared).
        self.pwrite_appends = False
        # Keep the descriptor `flush` syncs through open until close (the commit log's, synced
        # hundreds of times a second under SYNC_FLUSH: an open and a close per sync would each
        # release and retake the interpreter lock, which 32 producers make slow to get back).
        self.hold_sync_fd = False
        self._sync_fd = -1
        # A flush syncs only [flushed, read position) and drops the map's pages below it first
        # (store.kernel.prefault.sync_range): the commit log's, with the compiled kernel.
        self.ranged_sync = False
        # [SYNC_FLUSH] put_fast writes records with pwrite(2) through the held descriptor instead
        # of through the map (`write_records_by_pwrite`). Readers still read the map.
        self.pwrite_records = False
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self._flush_lock = threading.Lock()
        self.destroyed = False

    def _open_map(self) -> mmap.mmap:
        flags = os.O_RDONLY if self.read_only else os.O_RDWR
        fd = os.open(self.path, flags)
        try:
            access = mmap.ACCESS_READ if self.read_only else mmap.ACCESS_WRITE
            # Python's mmap keeps its own duplicate of the descriptor until close(); the consume
            # queues bound how many files they keep mapped (LRU) for that reason.
            return mmap.mmap(fd, self.file_size_bytes, access=access)
        finally:
            os.close(fd)

    # -- positions -------------------------------------------------------------------------------

    @property
    def read_position(self) -> int:
        return self.committed_position if self.write_buffer is not None else self.wrote_position

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size_bytes

    def set_positions(self, position: int) -> None:
        """Set wrote, committed and flushed positions at once (load and recovery)."""
        assert 0 <= position <= self.file_size_bytes
        self.wrote_position = self.committed_position = self.flushed_position = position

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size_bytes

    def free_bytes(self) -> int:
        return self.file_size_bytes - self.wrote_position

    # -- writing ---------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"{self.path} is mapped read-only")

    def append(self, data) -> int:
        """Copy `data` at the wrote position; return the position it was written at."""
        self._check_writable()
        position = self.wrote_position
        end = position + len(data)
        assert end <= self.file_size_bytes, "append past the end of the segment"
        if self.write_buffer is not None:
            self.write_buffer[position:end] = data
        elif self.pwrite_appends:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                written = os.pwrite(fd, data, position)
            finally:
                os.close(fd)
            if written != len(data):
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        else:
            self._map[position:end] = data
        self.wrote_position = end
        return position

    def write_at(self, position: int, data) -> None:
        """Overwrite bytes in place (not moving any position)."""
        self._check_writable()
        end = position + len(data)
        assert 0 <= position and end <= self.file_size_bytes
        self._map[position:end] = data
        if self.write_buffer is not None:
            self.write_buffer[position:end] = data

    def commit(self, least_pages: int = 0) -> int:
        """Copy [committed, wrote) from the write buffer into the map (transient store pool)."""
        if self.write_buffer is None:
            self.committed_position = self.wrote_position
            return self.committed_position
        wrote = self.wrote_position
        start = self.committed_position
        if wrote <= start:
            return start
        if least_pages > 0 and wrote < self.file_size_bytes and \
                (wrote // OS_PAGE_SIZE - start // OS_PAGE_SIZE) < least_pages:
            return start
        # The range's first 8 bytes (the TOTALSIZE and MAGIC of its first record) go in last, as
        # appends do (CommitLog): [start, wrote) holds whole records only (wrote moves once a whole
        # append is in the buffer), and the map holds zeros at `start`, so a process killed in the
        # middle of this copy leaves zeros where recovery ends the log: the records this commit
        # carries (a batch among them) appear whole or not at all. One forward copy would leave a
        # prefix of them readable, cutting a batch (test_crash, ASYNC_FLUSH-pool-*-batch4).
        with memoryview(self.write_buffer) as source:
            self._map[start + 8:wrote] = source[start + 8:wrote]
            self._map[start:start + 8] = source[start:start + 8]
        self.committed_position = wrote
        if wrote == self.file_size_bytes:
            # The whole file is committed: the buffer goes back to the pool.
            self.write_buffer = None
            if self.release_write_buffer is not None:
                self.release_write_buffer()
        return wrote

    def flush(self, least_pages: int = 0) -> int:
        """msync [flushed, read position) if at least `least_pages` dirty pages (or the file is full)."""
        with self._flush_lock:
            target = self.read_position
            start = self.flushed_position
            if target <= start:
                return start
            if least_pages > 0 and target < self.file_size_bytes and \
                    (target // OS_PAGE_SIZE - start // OS_PAGE_SIZE) < least_pages:
                return start
            if not self.read_only and not self.destroyed:
                self._sync(start, target)
            self.flushed_position = target
            return target

    def _sync(self, start: int, target: int) -> None:
        """Make [start, target) durable: `sync_range` on the (shared) map when `ranged_sync`, else,
        or when the map was closed under the flush (cleanup closes it before it marks the segment
        destroyed), fdatasync of the file."""
        if self.ranged_sync and not self._map.closed:
            try:
                sync_range(self._map, start, target, True)
                return
            except ValueError:
                if not self._map.closed:
                    raise
        self._sync_to_disk()

    def _sync_to_disk(self) -> None:
        """Force the file's dirty pages (those written through the map too) to disk.

        fdatasync on Linux writes back the page cache pages a shared mapping dirtied, as msync does,
        and unlike `mmap.flush` it releases the GIL: producers keep encoding while a group commit
        waits for the disk.
        """
        if self.hold_sync_fd:   # called with _flush_lock held, as close() takes it
            if self._sync_fd < 0:
                self._sync_fd = os.open(self.path, os.O_RDWR)
            os.fdatasync(self._sync_fd)
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def write_records_by_pwrite(self) -> None:
        """Have `store.kernel.put_fast` write this segment's records with pwrite(2) through the
        held sync descriptor (opened now), not through the map.

        Under SYNC_FLUSH each group commit's fdatasync write-protects every page of the map a put
        dirtied: one TLB shootdown (an interrupt to the other core) per page, and the next put into
        the page faults it back. A page written by pwrite is never writable in the map, so a sync
        cleans it without either: 18-20 k -> 22-26 k msg/s with 32 producers, 46-50 -> 32-38
        us of system time a message (docs/performance.md, sixteenth session). Not under
        ASYNC_FLUSH: there a put's two system calls cost more than the faults they save (77-87 k
        against 152-206 k msg/s). The Python put paths still write through the map: the page cache
        is one, so the bytes are the same either way.
        """
        self.hold_sync_fd = True
        self.sync_fd()
        self.pwrite_records = True

    def sync_fd(self) -> int:
        """The descriptor `flush` syncs through, opened now if need be and held until close (the
        group commit's loop syncs a duplicate of it, store/kernel/group_commit.py)."""
        self._check_writable()
        with self._flush_lock:
            if self.destroyed:
                raise ValueError(f"{self.path} is closed")
            if self._sync_fd < 0:
                self._sync_fd = os.open(self.path, os.O_RDWR)
            return self._sync_fd

    def note_flushed(self, position: int) -> None:
        """Someone else synced the file up to `position` (the group commit's loop): move
        `flushed_position` there (never back)."""
        with self._flush_lock:
            if position > self.flushed_position:
                self.flushed_position = min(position, self.file_size_bytes)

    def zero_from(self, position: int) -> None:
        """Zero every non-zero byte from `position` to the end of the file (cut data stays cut).

        Only the file's data extents are read (SEEK_DATA/SEEK_HOLE): the never-written rest of a
        sparse segment costs nothing, so this is cheap after a clean shutdown.
        """
        self._check_writable()
        chunk = 1 << 20
        for start, end in self._data_extents(position):
            cursor = start
            while cursor < end:
                stop = min(cursor + chunk, end)
                view = self._map[cursor:stop]
                if view.count(0) != len(view):
                    self._map[cursor:stop] = bytes(stop - cursor)
                cursor = stop
        self._map.flush()

    def _data_extents(self, position: int):
        """(start, end) ranges at or after `position` that may hold data (holes are zeros)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            extents = []
            cursor = position
            while cursor < self.file_size_bytes:
                try:
                    data = os.lseek(fd, cursor, os.SEEK_DATA)
                except OSError as error:
                    if error.errno == errno.ENXIO:   # no data after cursor
                        break
                    raise                            # no SEEK_DATA here: scan everything
                hole = os.lseek(fd, data, os.SEEK_HOLE)
                extents.append((max(data, position), min(hole, self.file_size_bytes)))
                cursor = hole
            return extents
        except (AttributeError, OSError):
            return [(position, self.file_size_bytes)]
        finally:
            os.close(fd)

    def warm(self, *, sync_every_pages: int = 0, stop: threading.Event | None = None) -> None:
        """Write zeros over every page past the wrote position, as RocketMQ's warmMappedFile does,
        so that the file's disk blocks exist before records land there (a later fdatasync then
        writes data only, with no block allocation for the journal to commit).

        `sync_every_pages` > 0 (SYNC_FLUSH: flushLeastPagesWhenWarmMapedFile) syncs the zeros
        every that many pages and at the end. The zeros go in with pwrite, which releases the
        interpreter lock, through the same page cache as the map. `stop` set ends it early.
        """
        self._check_writable()
        start = self.wrote_position - self.wrote_position % OS_PAGE_SIZE
        if start < self.wrote_position:
            start += OS_PAGE_SIZE       # the partly written page is already allocated
        chunk = 1 << 20
        zeros = bytes(chunk)
        fd = os.open(self.path, os.O_WRONLY)
        try:
            unsynced = 0
            for position in range(start, self.file_size_bytes, chunk):
                if stop is not None and stop.is_set():
                    return
                size = min(chunk, self.file_size_bytes - position)
                if os.pwrite(fd, zeros[:size] if size < chunk else zeros, position) != size:
                    raise OSError(f"short write warming {self.path} at {position}")
                unsynced += size // OS_PAGE_SIZE
                if sync_every_pages > 0 and unsynced >= sync_every_pages:
                    os.fdatasync(fd)
                    unsynced = 0
            if sync_every_pages > 0 and unsynced:
                os.fdatasync(fd)
        finally:
            os.close(fd)

    # -- reading ---------------------------------------------------------------------------------

    def view(self, position: int, size: int, *, unchecked: bool = False) -> memoryview | None:
        """A zero-copy view of [position, position+size), or None if it is not readable yet."""
        limit = self.file_size_bytes if unchecked else self.read_position
        if position < 0 or size < 0 or position + size > limit or self.destroyed:
            return None
        return memoryview(self._map)[position:position + size]

    def read(self, position: int, size: int, *, unchecked: bool = False) -> bytes | None:
        """A copy of [position, position+size), or None if it is not readable."""
        limit = self.file_size_bytes if unchecked else self.read_position
        if position < 0 or size < 0 or position + size > limit or self.destroyed:
            return None
        try:
            return self._map[position:position + size]
        except ValueError:
            # Closed by another thread since the check (cleanup deleting the segment): as destroyed.
            return None

    # The raw mapping (for codecs that read at positions they have checked themselves). A property
    # over attrgetter, not a def: the lookups' C reads it once per segment they probe, and a
    # Python getter was a frame each time.
    buffer = property(operator.attrgetter("_map"), doc="The raw mapping (mmap.mmap).")

    def mtime_ms(self) -> int:
        return int(os.stat(self.path).st_mtime * 1000)

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        if self.destroyed:
            return
        with self._flush_lock:  # not while a sync runs on the held descriptor
            fd, self._sync_fd = self._sync_fd, -1
            if fd >= 0:
                os.close(fd)
        try:
            self._map.close()
        except BufferError:
            # A reader still holds a zero-copy view; the mapping is released when it is dropped.
            pass
        self.destroyed = True

    def destroy(self) -> None:
        """Unmap and delete the file."""
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return (f"MappedFile({os.path.basename(self.path)}, wrote={self.wrote_position}, "
                f"committed={self.committed_position}, flushed={self.flushed_position})")
