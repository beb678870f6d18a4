"""File-based consume queues (`storeType=default`): every queue under `<root>/consumequeue`.

Layout (spec §1, §4.2): `consumequeue/<topic>/<queueId>/<20-digit first CQ byte offset>`, files of
`mappedFileSizeConsumeQueue` bytes (rounded up to whole 20-byte units). Directory names that are not
integers are skipped (`Integer.parseInt`). One queue is a `store.consumequeue.file.consume_queue.FileConsumeQueue`.
Files are mapped and their descriptors closed at once, so 16k queues do not use 16k descriptors.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np

from store.codec.cq_unit import CqUnit
from store.consumequeue.base import ConsumeQueueSettings, StoreTimeOf, check_boundary
from store.consumequeue.file.consume_queue import FileConsumeQueue
from store.consumequeue.file.time_search import nearest_offset_by_time
from store.errors import ReadOnlyStoreError
from store.kernel.lookup import cq_nearest_in
from store.kernel.pull_window import pull_window as _pull_window
from store.mappedfile.mapped_file import fsync_directory
from store.mappedfile.mapped_file import OS_PAGE_SIZE

__all__ = ["FileConsumeQueue", "FileConsumeQueueStore", "parse_queue_id", "default_max_mapped_queues"]


def default_max_mapped_queues() -> int:
    """How many queues may be mapped at once: half of the descriptors left after a reserve of 2048
    (each mapping holds a descriptor in Python 3.11; a queue being written has one or two files;
    the commit log, index files and sockets use the reserve)."""
    soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft_limit == resource.RLIM_INFINITY:
        return 16384
    return max(64, (soft_limit - 2048) // 2)


_QUEUE_ID_PATTERN = re.compile(r"[+-]?\d{1,10}")


def parse_queue_id(name: str) -> int | None:
    """`Integer.parseInt` of a queue directory name; None for names RocketMQ skips."""
    if not _QUEUE_ID_PATTERN.fullmatch(name):
        return None
    value = int(name)
    return value if -(1 << 31) <= value < (1 << 31) else None


class FileConsumeQueueStore:
    """Every file-based consume queue under `<root>/consumequeue` (ConsumeQueueStore protocol)."""

    def __init__(self, settings: ConsumeQueueSettings):
        self.settings = settings
        self.directory = settings.consume_queue_dir
        self.file_size_bytes = settings.cq_file_size_bytes
        self.read_only = settings.read_only
        self.style = settings.style
        self._queues: dict[tuple[str, int], FileConsumeQueue] = {}
        # Every operation that maps or unmaps takes it: a read must not see its queue unmapped.
        self._lock = threading.RLock()
        self.commit_log_min_offset = 0
        self.max_mapped_queues = default_max_mapped_queues()
        self._mapped: OrderedDict[tuple[str, int], FileConsumeQueue] = OrderedDict()
        # The last queue `_touch` put at the LRU's end: touching it again changes nothing.
        self._most_recent: FileConsumeQueue | None = None
        self._directories_to_sync: set[str] = set()
        self._directories_lock = threading.Lock()
        # get_offset_in_queue_by_time(topic, queue_id, timestamp_ms, "nearest", store_time_of) in
        # one call (store.kernel.lookup's cq_nearest_in; the store's time lookups call it directly).
        self.nearest_by_time = functools.partial(cq_nearest_in, self._queues, self._lock,
                                                 nearest_offset_by_time)

    def _touch(self, queue: FileConsumeQueue) -> None:
        """LRU of mapped queues: the least recently used ones are unmapped past the cap."""
        key = (queue.topic, queue.queue_id)
        if key in self._mapped:
            self._mapped.move_to_end(key)
            self._most_recent = queue
            return
        self._mapped[key] = queue
        while len(self._mapped) > self.max_mapped_queues:  # bounded by the table size
            _, oldest = self._mapped.popitem(last=False)
            oldest.hibernate()
        self._most_recent = queue if queue.is_mapped else None

    # -- table -----------------------------------------------------------------------------------

    def _scan_directories(self) -> list[tuple[str, int, str]]:
        found = []
        if not os.path.isdir(self.directory):
            return found
        for topic in sorted(os.listdir(self.directory)):
            topic_dir = os.path.join(self.directory, topic)
            if not os.path.isdir(topic_dir):
                continue
            for name in sorted(os.listdir(topic_dir)):
                queue_id = parse_queue_id(name)
                if queue_id is not None and os.path.isdir(os.path.join(topic_dir, name)):
                    found.append((topic, queue_id, os.path.join(topic_dir, name)))
        return found

    def _new_queue(self, topic: str, queue_id: int, directory: str) -> FileConsumeQueue:
        queue = FileConsumeQueue(directory, topic, queue_id, self.file_size_bytes,
                                 read_only=self.read_only, style=self.style)
        queue.commit_log_min_offset = self.commit_log_min_offset
        queue.on_touch = self._touch
        queue.on_new_directory_entry = self._note_directory
        return queue

    def _note_directory(self, directory: str) -> None:
        with self._directories_lock:
            self._directories_to_sync.add(directory)

    def _sync_directories(self) -> None:
        """fsync the directories that got new files since the last flush (each once), so that a
        flushed unit's file can never vanish in a power cut while a later file survives."""
        with self._directories_lock:
            pending, self._directories_to_sync = self._directories_to_sync, set()
        # Deepest first: a new queue directory's entry lives in its topic directory.
        for directory in sorted(pending, key=lambda d: d.count(os.sep), reverse=True):
            try:
                fsync_directory(directory)
            except FileNotFoundError:
                pass   # deleted since (expiry)

    def load(self) -> None:
        """Map every queue's files (sizes checked: CorruptDataError names the bad file)."""
        with self._lock:
            for topic, queue_id, directory in self._scan_directories():
                queue = self._new_queue(topic, queue_id, directory)
                queue.load()
                self._queues[(topic, queue_id)] = queue

    def recover(self) -> int:
        with self._lock:
            max_phy_end = -1
            for queue in self._queues.values():
                max_phy_end = max(max_phy_end, queue.recover())
            return max_phy_end

    def queues(self) -> list[tuple[str, int]]:
        return list(self._queues)

    def queue(self, topic: str, queue_id: int) -> FileConsumeQueue | None:
        """The per-queue object (for inspection pages); None if the queue does not exist."""
        return self._queues.get((topic, queue_id))

    def _queue_for_write(self, topic: str, queue_id: int) -> FileConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            directory = os.path.join(self.directory, topic, str(queue_id))
            queue = self._new_queue(topic, queue_id, directory)
            self._queues[(topic, queue_id)] = queue
        return queue

    # -- writes ----------------------------------------------------------------------------------

    def put_units(self, requests: Sequence) -> None:
        if self.read_only:
            raise ReadOnlyStoreError("consume queues are read-only")
        by_queue: dict[tuple[str, int], list] = {}
        for request in requests:
            key = (request.topic, request.queue_id)
            group = by_queue.get(key)
            if group is None:
                by_queue[key] = group = []
            group.append(request)
        with self._lock:
            for (topic, queue_id), group in by_queue.items():
                self._queue_for_write(topic, queue_id).put(group)

    def put_unit_columns(self, groups: Sequence) -> None:
        """`put_units` for units given per queue as columns: (topic, queue id, phy offsets, sizes,
        tagsCodes, queue offsets), the arrays int64 in dispatch order (`FileConsumeQueue.put_columns`)."""
        if self.read_only:
            raise ReadOnlyStoreError("consume queues are read-only")
        with self._lock:
            for topic, queue_id, phy_offsets, sizes, tags_codes, queue_offsets in groups:
                self._queue_for_write(topic, queue_id).put_columns(phy_offsets, sizes, tags_codes,
                                                                   queue_offsets)

    def put_unit_runs(self, runs: Sequence) -> None:
        """`put_units` for units already encoded per queue: (topic, queue id, unit bytes, queue
        offsets, consecutive, first record's phy end, last record's phy end), `FileConsumeQueue.put_run`."""
        if self.read_only:
            raise ReadOnlyStoreError("consume queues are read-only")
        with self._lock:
            for topic, queue_id, units, queue_offsets, consecutive, first_end, last_end in runs:
                self._queue_for_write(topic, queue_id).put_run(units, queue_offsets, consecutive,
                                                               first_end, last_end)

    def truncate_dirty(self, phy_offset: int) -> None:
        with self._lock:
            for queue in self._queues.values():
                queue.truncate_dirty(phy_offset)

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        with self._lock:
            self.commit_log_min_offset = commit_log_min_offset
            for queue in self._queues.values():
                queue.correct_min_offset(commit_log_min_offset)

    def delete_expired(self, commit_log_min_offset: int) -> int:
        """Delete expired files of every queue (read-only: forgotten in memory); returns the count."""
        with self._lock:
            self.commit_log_min_offset = commit_log_min_offset
            return sum(queue.delete_expired(commit_log_min_offset)
                       for queue in self._queues.values())

    def flush(self, least_pages: int = 0) -> None:
        if not self.read_only:
            self._sync_directories()
        with self._lock:
            for queue in list(self._queues.values()):
                if queue.is_mapped:
                    queue.flush(least_pages)
                elif queue.unflushed_bytes() >= max(least_pages * OS_PAGE_SIZE, 1):
                    queue.flush_unmapped()

    def refresh(self) -> None:
        with self._lock:
            for topic, queue_id, directory in self._scan_directories():
                if (topic, queue_id) not in self._queues:
                    self._queues[(topic, queue_id)] = self._new_queue(topic, queue_id, directory)
            for queue in self._queues.values():
                queue.refresh()

    def close(self) -> None:
        with self._lock:
            for queue in self._queues.values():
                queue.close()

    # -- reads -----------------------------------------------------------------------------------

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.min_offset() if queue else 0

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return 0
        with self._lock:  # the queue may be unmapped or mapped again meanwhile
            return queue.max_offset()

    def get_max_phy_end(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.max_phy_end if queue else -1

    def get_unit(self, topic: str, queue_id: int, queue_offset: int) -> CqUnit | None:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return None
        with self._lock:
            return queue.get_unit(queue_offset)

    def get_units(self, topic: str, queue_id: int, queue_offset: int,
                  max_units: int) -> np.ndarray | None:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return None
        with self._lock:
            return queue.get_units(queue_offset, max_units)

    def pull_window(self, topic: str, queue_id: int, queue_offset: int,
                    max_units: int) -> tuple[int, int, bytes | None] | None:
        """`FileConsumeQueue.pull_window` under the lock (one call per pull); None: no such queue."""
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return None
        with self._lock:
            if queue is self._most_recent:
                return queue.pull_window_untouched(queue_offset, max_units)
            return queue.pull_window(queue_offset, max_units)

    def pull_direct(self, topic: str, queue_id: int, queue_offset: int, topic_bytes, cl_files,
                    cl_file_size, max_msg_nums, mem_bytes, mem_count, disk_bytes, disk_count,
                    in_memory_bytes, form, decoders):
        """An unfiltered pull in one native call (`store.kernel.pull_window`, the arguments from
        `topic_bytes` on are its own, passed as they come: no tuple) under the lock, on a mapped
        queue; None for any other queue or whenever the call says None. A queue not touched last
        is touched (moved to the LRU's end) when the call answers: it answers only for an offset
        inside the window, where the full path touches it too."""
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return None
        with self._lock:
            files = queue._mapped_files
            if files is None:
                return None
            if queue is self._most_recent:
                return _pull_window(files.files, files.file_size_bytes, queue.min_logic_offset,
                                    queue.trusted_from, queue_offset, queue_id, topic_bytes,
                                    cl_files, cl_file_size, max_msg_nums, mem_bytes, mem_count,
                                    disk_bytes, disk_count, in_memory_bytes, form, decoders)
            key = (topic, queue_id)
            if key not in self._mapped:     # not in the LRU: the full path adds it (and evicts)
                return None
            got = _pull_window(files.files, files.file_size_bytes, queue.min_logic_offset,
                               queue.trusted_from, queue_offset, queue_id, topic_bytes, cl_files,
                               cl_file_size, max_msg_nums, mem_bytes, mem_count, disk_bytes,
                               disk_count, in_memory_bytes, form, decoders)
            if got is not None:             # as `_touch` of a queue in the LRU
                self._mapped.move_to_end(key)
                self._most_recent = queue
            return got

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int,
                                    boundary: str, store_time_of: StoreTimeOf) -> int:
        if boundary == "nearest":     # the 4.9 default
            return self.nearest_by_time(topic, queue_id, timestamp_ms, store_time_of)
        check_boundary(boundary)
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return 0
        with self._lock:
            return queue.offset_by_time(timestamp_ms, boundary, store_time_of)
