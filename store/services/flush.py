"""Flush and commit services (spec §8.3, §8.4).

- `AsyncFlushService` (ASYNC_FLUSH): every `flush_interval_ms`, msync the commit log if at least
  `flush_least_pages` pages are dirty; every `flush_thorough_interval_ms` flush everything and record the
  checkpoint's physicMsgTimestamp.
- `GroupCommitService` (SYNC_FLUSH): producers wait for `next_offset` to be flushed; the service syncs
  back to back, each sync taking everything appended so far (group commit), and releases them. A put
  not flushed within `sync_flush_timeout_ms` gets FLUSH_DISK_TIMEOUT.
- `CommitService` (transient store pool): copies the write buffer into the mapped file every
  `commit_interval_ms`; only then can readers (dispatch, pull) see the records.
- `ConsumeQueueFlushService`: flushes consume queues and index, and writes the checkpoint.
- `TransientStorePool`: the write buffers.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from typing import Callable

from store.kernel import group_commit
from store.kernel.group_commit import GroupCommit
from store.mappedfile.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)


class TransientStorePool:
    """`pool_size` write buffers of one segment each; a segment borrows one and returns it when
    fully committed. An empty pool means the segment is written through its map directly."""

    def __init__(self, pool_size: int, segment_size_bytes: int):
        self.pool_size = pool_size
        self.segment_size_bytes = segment_size_bytes
        self._available = pool_size
        self._lock = threading.Lock()

    def borrow(self) -> bytearray | None:
        with self._lock:
            if self._available <= 0:
                return None
            self._available -= 1
        return bytearray(self.segment_size_bytes)

    def give_back(self) -> None:
        with self._lock:
            self._available = min(self.pool_size, self._available + 1)

    @property
    def available(self) -> int:
        return self._available


class _ServiceThread(abc.ABC):
    name = "service"

    def __init__(self):
        self._stop = threading.Event()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: BaseException | None = None

    def start(self) -> None:
        assert self._thread is None
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        if not self._wakeup.is_set():   # Event.set takes a lock: skip it when already set
            self._wakeup.set()

    def _wait(self, seconds: float) -> None:
        self._wakeup.wait(seconds)
        self._wakeup.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as error:  # a service thread must survive; the error is reported
                log.exception("%s failed", self.name)
                self.last_error = error
                self._wait(0.1)

    @abc.abstractmethod
    def run_once(self) -> None:
        """One iteration of the service loop (it waits inside)."""

    def stop_quietly(self) -> None:
        """Stop the thread without the final flush or commit (a simulated crash)."""
        _ServiceThread.shutdown(self)

    def shutdown(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._wakeup.set()
        self._thread.join(timeout=30)
        self._thread = None


class CommitService(_ServiceThread):
    name = "CommitRealTimeService"

    def __init__(self, queue: MappedFileQueue, pool: TransientStorePool, *, commit_interval_ms: int,
                 commit_least_pages: int, commit_thorough_interval_ms: int,
                 on_committed: Callable[[], None]):
        super().__init__()
        self.queue = queue
        self.pool = pool
        self.commit_interval_ms = commit_interval_ms
        self.commit_least_pages = commit_least_pages
        self.commit_thorough_interval_ms = commit_thorough_interval_ms
        self.on_committed = on_committed
        self._last_thorough = time.monotonic()

    def commit(self, least_pages: int) -> bool:
        moved = False
        for _ in range(len(self.queue.files) + 1):  # bounded: at most every file once
            if not self.queue.commit(least_pages):
                break
            moved = True
        return moved

    def run_once(self) -> None:
        self._wait(self.commit_interval_ms / 1000.0)
        least = self.commit_least_pages
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.commit_thorough_interval_ms:
            least = 0
            self._last_thorough = now
        if self.commit(least):
            self.on_committed()

    def shutdown(self) -> None:
        super().shutdown()
        self.commit(0)


class AsyncFlushService(_ServiceThread):
    name = "FlushRealTimeService"

    def __init__(self, queue: MappedFileQueue, *, flush_interval_ms: int, flush_least_pages: int,
                 flush_thorough_interval_ms: int, last_store_timestamp: Callable[[], int],
                 on_thorough_flush: Callable[[int], None]):
        super().__init__()
        self.queue = queue
        self.flush_interval_ms = flush_interval_ms
        self.flush_least_pages = flush_least_pages
        self.flush_thorough_interval_ms = flush_thorough_interval_ms
        self.last_store_timestamp = last_store_timestamp
        self.on_thorough_flush = on_thorough_flush
        self._last_thorough = time.monotonic()

    def flush_all(self) -> None:
        store_timestamp = self.last_store_timestamp()
        for _ in range(len(self.queue.files) + 1):
            if not self.queue.flush(0):
                break
        self.on_thorough_flush(store_timestamp)

    def run_once(self) -> None:
        self._wait(self.flush_interval_ms / 1000.0)
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.flush_thorough_interval_ms:
            self._last_thorough = now
            self.flush_all()
            return
        for _ in range(len(self.queue.files) + 1):
            if not self.queue.flush(self.flush_least_pages):
                break

    def shutdown(self) -> None:
        super().shutdown()
        self.flush_all()


class GroupCommitService(_ServiceThread):
    """SYNC_FLUSH: every put waits until its bytes are flushed; one flush serves many puts.

    As RocketMQ's GroupCommitService, one thread does the syncs and producers only wait: while a
    sync runs, producers keep appending, and the next sync, started as soon as this one returns,
    takes everything awaited meanwhile. The loop, the syncs and the wake-ups are the kernel's
    `GroupCommit` (store/kernel/group_commit.py), which runs them with the GIL released: the
    producers a sync released append (under the GIL) while the next sync runs. Each producer sleeps
    on a semaphore of its own, posted only by a sync that covers its bytes.

    This thread takes the GIL back only to do what the loop leaves to Python: every `TICK_MS` while
    producers wait (the queue's flushed offset, the checkpoint's physicMsgTimestamp), when the commit
    log rolls to a new segment (both flushed here, then the waiters they cover released), and after
    `IDLE_MS` with nobody waiting (or a put with WAIT=false), when it flushes what no producer waits
    for, as RocketMQ's service does every 10 ms.
    """

    name = "GroupCommitService"
    IDLE_MS = 10
    TICK_MS = 20

    def __init__(self, queue: MappedFileQueue, *, last_store_timestamp: Callable[[], int],
                 on_flushed: Callable[[int], None]):
        super().__init__()
        self.queue = queue
        self.last_store_timestamp = last_store_timestamp
        self.on_flushed = on_flushed
        self._group = GroupCommit()
        self._group.release(queue.flushed_where)
        queue.flush_floor = self._group
        self._python_flushes = 0

    @property
    def group(self) -> GroupCommit:
        """The group commit loop: its syncs, waiting producers and history (`keep_history`)."""
        return self._group

    @property
    def flush_count(self) -> int:
        """Syncs of the commit log so far (the group loop's and this thread's own)."""
        return self._group.syncs + self._python_flushes

    def wakeup(self) -> None:
        self._group.poke()

    def _flush_group(self) -> None:
        """Flush everything appended so far (one sync per segment it spans) and release the
        producers it covers."""
        queue = self.queue
        store_timestamp = self.last_store_timestamp()
        group_end = queue.max_offset()
        if queue.flushed_where < group_end:
            for _ in range(len(queue.files) + 1):
                if queue.flushed_where >= group_end or not queue.flush(0):
                    break
            self._python_flushes += 1
        self._group.release(queue.flushed_where)
        self.on_flushed(store_timestamp)

    def _note_flushed(self, flushed: int, store_timestamp: int, group_end: int) -> None:
        """Move the queue's and the segment's flushed offsets to what the group loop synced."""
        self.queue.note_flushed(flushed)
        if flushed >= group_end:    # every record up to the timestamp's is on disk
            self.on_flushed(store_timestamp)

    def wait_flushed(self, next_offset: int, timeout_ms: int) -> bool:
        """Block until the commit log is flushed up to `next_offset`; False on timeout."""
        return self._group.wait(next_offset, max(0, timeout_ms))

    def run_once(self) -> None:
        queue = self.queue
        last = queue.last_file()
        if last is None or last.read_only:
            self._wait(self.IDLE_MS / 1000.0)
            self._flush_group()
            return
        if queue.flushed_where < last.file_from_offset:
            # The loop syncs only `last`: the segments before it (the tail of the one a put just
            # rolled from, its end-of-file blank) are flushed here first, else a sync of `last`
            # would release producers whose records follow bytes not on disk (the power-loss
            # tests caught it).
            self._flush_group()
            if queue.flushed_where < last.file_from_offset:   # no progress: do not spin
                self._wait(self.IDLE_MS / 1000.0)
            return
        store_timestamp = self.last_store_timestamp()
        group_end = queue.max_offset()
        reason, flushed, _ = self._group.run(last.sync_fd(), last.file_end_offset,
                                             self.IDLE_MS, self.TICK_MS)
        self._note_flushed(flushed, store_timestamp, group_end)
        if reason == group_commit.IDLE or reason == group_commit.LIMIT:
            self._flush_group()

    def stop_quietly(self) -> None:
        """A simulated crash: no more syncs; waiting producers give up (FLUSH_DISK_TIMEOUT)."""
        self._group.stop()
        super().stop_quietly()

    def shutdown(self) -> None:
        self._group.halt()
        super().shutdown()
        self._flush_group()


class ConsumeQueueFlushService(_ServiceThread):
    """FlushConsumeQueueService: consume queues + index every interval; all + checkpoint sometimes."""

    name = "FlushConsumeQueueService"

    def __init__(self, *, flush_interval_ms: int, flush_thorough_interval_ms: int,
                 flush_consume_queues: Callable[[int], None], flush_thorough: Callable[[], None],
                 least_pages: int):
        super().__init__()
        self.flush_interval_ms = flush_interval_ms
        self.flush_thorough_interval_ms = flush_thorough_interval_ms
        self.flush_consume_queues = flush_consume_queues
        self.flush_thorough = flush_thorough
        self.least_pages = least_pages
        self._last_thorough = time.monotonic()

    def run_once(self) -> None:
        self._wait(self.flush_interval_ms / 1000.0)
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.flush_thorough_interval_ms:
            self._last_thorough = now
            self.flush_thorough()
        else:
            self.flush_consume_queues(self.least_pages)
