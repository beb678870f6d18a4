"""Preallocation of commit-log segments (RocketMQ's `AllocateMappedFileService`).

When the writer needs segment N it takes it from here, and segment N+1 is created in the background
meanwhile, so that a segment roll under the put lock costs a hand-over instead of a file creation
(ftruncate, fsync, rename, directory fsync). With `warmMapedFileEnable` the background thread also
writes zeros over the whole new segment (`MappedFile.warmMappedFile`; under SYNC_FLUSH it syncs them
every `flushLeastPagesWhenWarmMapedFile` pages and at the end): the disk blocks are then allocated
before any record lands there, and a group commit's fdatasync only writes data, with no journal
commit, which the consume-queue and index writes of the same filesystem would join.

As in RocketMQ, the service always runs for the commit log of a writable store, and a crash may leave
the next segment behind all zero (recovery deletes a segment past the end of the log; `check()`
reports an all-zero trailing segment as info). A clean shutdown deletes segments never handed out.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time

from store.mappedfile.mapped_file import MappedFile, offset_to_file_name
from store.mappedfile.mapped_file_queue import MappedFileQueue
from store.services.flush import _ServiceThread

log = logging.getLogger(__name__)

WAIT_TIMEOUT_S = 5.0    # AllocateMappedFileService.waitTimeOut (here: a warning, see take)


class _Request:
    __slots__ = ("file_from_offset", "mapped", "failed")

    def __init__(self, file_from_offset: int):
        self.file_from_offset = file_from_offset
        self.mapped: MappedFile | None = None
        self.failed = False


class AllocateMappedFileService(_ServiceThread):
    """Creates (and with `warm`, warms) the segment after the one the writer takes.

    Installed as `queue.allocator`: `MappedFileQueue.create_file` calls `take`, which returns the
    preallocated segment (waiting for it if its creation is under way) and asks for the next one,
    or None, and the queue then creates the segment itself as without the service.
    """

    name = "AllocateMappedFileService"

    def __init__(self, queue: MappedFileQueue, *, warm: bool = False, warm_sync_pages: int = 0):
        super().__init__()
        self.queue = queue
        self.warm = warm
        self.warm_sync_pages = warm_sync_pages      # > 0 under SYNC_FLUSH (see MappedFile.warm)
        self._cond = threading.Condition(threading.Lock())
        self._requests: dict[int, _Request] = {}
        self._pending: collections.deque[_Request] = collections.deque()
        self.created = 0

    def request(self, file_from_offset: int) -> None:
        """Ask for the segment starting at `file_from_offset` (once; no-op if already asked)."""
        with self._cond:
            if file_from_offset in self._requests or self._stop.is_set():
                return
            request = _Request(file_from_offset)
            self._requests[file_from_offset] = request
            self._pending.append(request)
        self.wakeup()

    def take(self, file_from_offset: int) -> MappedFile | None:
        """The segment at `file_from_offset`, created here, and the next one asked for; None if
        the service could not make it in time (the caller creates it)."""
        if self._thread is None:
            return None
        self.request(file_from_offset)
        self.request(file_from_offset + self.queue.file_size_bytes)
        waited_since = time.monotonic()
        with self._cond:
            request = self._requests.get(file_from_offset)
            # No timeout: the creation is bounded work (a warm of a large segment may take
            # seconds, and giving up would leave the writer to race the thread for the same file).
            while request is not None and request.mapped is None and not request.failed:
                if self._thread is None:    # stopped: what it did not finish, the caller does
                    break
                if time.monotonic() - waited_since > WAIT_TIMEOUT_S:
                    log.warning("still waiting for segment %d to be preallocated", file_from_offset)
                    waited_since = time.monotonic()
                self._cond.wait(0.1)
            if request is None or request.mapped is None:
                self._requests.pop(file_from_offset, None)
                return None
            del self._requests[file_from_offset]
            return request.mapped

    def run_once(self) -> None:
        with self._cond:
            request = self._pending.popleft() if self._pending else None
        if request is None:
            self._wait(1.0)
            return
        queue = self.queue
        path = os.path.join(queue.directory, offset_to_file_name(request.file_from_offset))
        mapped = None
        try:
            if os.path.exists(path):
                raise FileExistsError(f"{path} exists: not preallocating over it")
            mapped = MappedFile(path, queue.file_size_bytes, create=True,
                                sync_directory=queue.sync_directories)
            if self.warm:
                mapped.warm(sync_every_pages=self.warm_sync_pages, stop=self._stop)
        except Exception:
            if mapped is not None:
                mapped.destroy()
                mapped = None
            with self._cond:
                request.failed = True
                self._cond.notify_all()
            raise   # logged by the service loop; take() answers None and the writer creates it
        with self._cond:
            request.mapped = mapped
            self.created += 1
            self._cond.notify_all()

    def _wake_takers(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def stop_quietly(self) -> None:
        """A simulated crash: the thread stops, what it made stays on disk."""
        super().stop_quietly()
        self._wake_takers()

    def shutdown(self) -> None:
        """Stop, and delete the segments made but never handed out (RocketMQ does too)."""
        super().shutdown()
        with self._cond:
            leftovers = [r.mapped for r in self._requests.values() if r.mapped is not None]
            self._requests.clear()
            self._pending.clear()
            self._cond.notify_all()
        for mapped in leftovers:
            mapped.destroy()
