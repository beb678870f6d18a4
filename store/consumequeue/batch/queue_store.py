"""Every batch consume queue of a store: `<root>/batchconsumequeue/<topic>/<queueId>/`
(`ConsumeQueueStore.loadConsumeQueues(getStorePathBatchConsumeQueue(...), CQType.BatchCQ)`, 5.3.3).

Which topics are batch topics is the topic config's business (`QueueTypeUtils.isBatchCq`,
`topic_type`); this store holds the queues that exist and creates one on the first unit.
"""

from __future__ import annotations

import os
import threading

from store.codec.batch_cq_unit import BatchCqUnit
from store.consumequeue.batch.batch_queue import BatchConsumeQueue
from store.errors import ReadOnlyStoreError


class BatchQueueStore:
    def __init__(self, directory: str, file_size_bytes: int, *, read_only: bool):
        self.directory = directory
        self.file_size_bytes = file_size_bytes
        self.read_only = read_only
        self._queues: dict[tuple[str, int], BatchConsumeQueue] = {}
        self._lock = threading.RLock()

    def load(self) -> None:
        if not os.path.isdir(self.directory):
            return
        for topic in sorted(os.listdir(self.directory)):
            topic_dir = os.path.join(self.directory, topic)
            for name in sorted(os.listdir(topic_dir)) if os.path.isdir(topic_dir) else []:
                if not name.lstrip("-").isdigit() or not os.path.isdir(os.path.join(topic_dir, name)):
                    continue          # Integer.parseInt fails: RocketMQ skips it too
                queue = self._new(topic, int(name))
                queue.load()
                self._queues[(topic, int(name))] = queue

    def _new(self, topic: str, queue_id: int) -> BatchConsumeQueue:
        return BatchConsumeQueue(os.path.join(self.directory, topic, str(queue_id)), topic,
                                 queue_id, self.file_size_bytes, read_only=self.read_only)

    def recover(self) -> int:
        """Recover every queue; the largest `getMaxPhysicOffset` (a last unit's record start)."""
        with self._lock:
            return max((queue.recover() for queue in self._queues.values()), default=-1)

    def truncate_dirty(self, phy_offset: int) -> None:
        with self._lock:
            for queue in self._queues.values():
                queue.truncate_dirty(phy_offset)

    def delete_expired(self, commit_log_min_offset: int) -> int:
        """`CleanConsumeQueueService`: every queue's `deleteExpiredFile` (batch queues are in the
        same consume-queue table as the others); the files deleted."""
        with self._lock:
            return sum(queue.delete_expired(commit_log_min_offset)
                       for queue in self._queues.values())

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """`ConsumeQueueStore.recoverOffsetTable`: `correctMinOffset` on every queue at open."""
        with self._lock:
            for queue in self._queues.values():
                queue.correct_min_offset(commit_log_min_offset)

    def queues(self) -> list[tuple[str, int]]:
        return list(self._queues)

    def queue(self, topic: str, queue_id: int) -> BatchConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def put(self, topic: str, queue_id: int, unit: BatchCqUnit) -> bool:
        if self.read_only:
            raise ReadOnlyStoreError("batch consume queues are read-only")
        with self._lock:
            queue = self._queues.get((topic, queue_id))
            if queue is None:
                queue = self._queues[(topic, queue_id)] = self._new(topic, queue_id)
            return queue.put(unit)

    def flush(self, least_pages: int = 0) -> None:
        if self.read_only:
            return
        with self._lock:
            for queue in self._queues.values():
                for _ in range(len(queue.mapped_files.files) + 1):
                    if not queue.mapped_files.flush(least_pages):
                        break

    def close(self) -> None:
        with self._lock:
            for queue in self._queues.values():
                queue.close()
