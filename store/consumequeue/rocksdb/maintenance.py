"""Min offsets, truncation and expiry of the RocksDB consume queue (spec §13.3, §13.6, §12.3).

A mixin of `RocksDBConsumeQueueStore` (it uses its `db`, `_max`, `_min`, `_min_unwritten`,
`_units_cf`, `_offsets_cf` and `commit_log_min_offset`), split off along the seam "keeping the
queues' bounds right" versus "reading and writing units".

* `min` entries are corrected lazily: when asked for, an absent entry or one pointing below the commit
  log's min offset is recomputed (no unit at/after it -> the queue is empty, min = last + 1; otherwise a
  binary search for the first unit at/after it) and written back (not in read-only mode).
* Truncation rewrites `max` to the last unit below the cut and deletes the units past it (RocketMQ
  leaves them to be overwritten; deleting keeps "a key exists" equal to "a unit exists"). A queue left
  with no unit stays known in memory as empty with its end = the cut, like a file queue whose files
  were all deleted.
* Expiry deletes, with one delete_range per queue, the units below the corrected min offset, never
  the queue's last unit (a file queue never deletes its last file either).
"""

from __future__ import annotations

from rocksdict import ReadOptions, WriteBatch

from store.codec import rocksdb_cq as codec

EMPTY_QUEUE_OFFSET = -1  # _max state of a queue truncated to nothing (in memory only)


class RocksDBQueueMaintenance:

    def first_existing_offset(self, topic: str, queue_id: int) -> int | None:
        """Queue offset of the queue's first stored unit (one seek), None if it has none."""
        if self.db is None:
            return None
        begin, end = codec.queue_range_bounds(topic, queue_id)
        options = ReadOptions()
        options.set_iterate_upper_bound(end)
        iterator = self.db.iter(options)
        iterator.seek(begin)
        found = codec.decode_cq_key(iterator.key())[2] if iterator.valid() else None
        del iterator
        return found

    def _phy_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        value = self._value(topic, queue_id, queue_offset)
        return None if value is None else value.phy_offset

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        queue = (topic, queue_id)
        state = self._max.get(queue)
        cached = self._min.get(queue)
        if state is None:
            return 0
        if state[0] == EMPTY_QUEUE_OFFSET:
            return cached[0] if cached else 0
        commit_log_min = self.commit_log_min_offset
        if cached is None:
            unwritten = self._min_unwritten.get(queue)   # a new queue's unit 0 (entry not written)
            if unwritten is not None:
                if unwritten >= commit_log_min:
                    return 0
                del self._min_unwritten[queue]           # expired: corrected and written below
        if cached is not None and cached[1] >= commit_log_min:
            return cached[0]
        if state[1] < commit_log_min:
            new_min = (state[0] + 1, commit_log_min)  # every unit expired: the queue is empty
        else:
            first = self.first_existing_offset(topic, queue_id)
            low = max(cached[0] if cached else 0, first if first is not None else 0)
            high = state[0]
            low = min(low, high)
            while low < high:  # first unit with phy_offset >= commit_log_min; log2(units) steps
                mid = (low + high) // 2
                phy_offset = self._phy_at(topic, queue_id, mid)
                if phy_offset is None or phy_offset < commit_log_min:
                    low = mid + 1
                else:
                    high = mid
            new_min = (low, self._phy_at(topic, queue_id, low))
        self._put_min(queue, *new_min)
        return new_min[0]

    def _put_min(self, queue: tuple[str, int], queue_offset: int, phy_offset: int) -> None:
        self._min[queue] = (queue_offset, phy_offset)
        if not self.read_only and self.db is not None:
            self._offsets[codec.offset_key(*queue, codec.MIN_KIND)] = \
                codec.offset_value(phy_offset, queue_offset)

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Remember the commit log's min offset; `min` entries follow lazily."""
        self.commit_log_min_offset = commit_log_min_offset

    def truncate_dirty(self, phy_offset: int) -> None:
        """Spec §13.6: units at or past `phy_offset` go; `max` and CHECKPOINT move back."""
        with self._lock:
            batch = WriteBatch(raw_mode=True) if not self.read_only else None
            for (topic, queue_id), state in list(self._max.items()):
                if state[0] == EMPTY_QUEUE_OFFSET or state[1] < phy_offset:
                    continue
                first = self.first_existing_offset(topic, queue_id)
                last = self._last_below(topic, queue_id, first, state[0], phy_offset)
                begin, end = codec.queue_range_bounds(topic, queue_id)
                if last is None:
                    self._max[(topic, queue_id)] = (EMPTY_QUEUE_OFFSET, -1, phy_offset)
                    if batch is not None:
                        batch.delete_range(begin, end, self._units_cf)
                        batch.delete(codec.offset_key(topic, queue_id, codec.MAX_KIND),
                                     self._offsets_cf)
                    continue
                value = self._value(topic, queue_id, last)
                self._max[(topic, queue_id)] = (last, value.phy_offset, value.phy_offset + value.size)
                if batch is not None:
                    batch.delete_range(codec.cq_key(topic, queue_id, last + 1), end, self._units_cf)
                    batch.put(codec.offset_key(topic, queue_id, codec.MAX_KIND),
                              codec.offset_value(value.phy_offset, last), self._offsets_cf)
            if phy_offset < self.checkpoint_phy_end:
                self.checkpoint_phy_end = phy_offset
                if batch is not None:
                    batch.put(codec.checkpoint_key(), codec.checkpoint_value(phy_offset),
                              self._offsets_cf)
            if batch is not None and self.db is not None:
                self.db.write(batch)

    def _last_below(self, topic: str, queue_id: int, low: int | None, high: int,
                    phy_offset: int) -> int | None:
        """Last queue offset in [low, high] whose unit starts before `phy_offset` (binary search)."""
        if low is None:
            return None
        found = None
        while low <= high:  # log2(units) steps
            mid = (low + high) // 2
            mid_phy = self._phy_at(topic, queue_id, mid)
            if mid_phy is not None and mid_phy < phy_offset:
                found = mid
                low = mid + 1
            else:
                high = mid - 1
        return found

    def delete_expired(self, commit_log_min_offset: int) -> int:
        """Delete units below each queue's corrected min offset; returns how many were deleted."""
        with self._lock:
            self.commit_log_min_offset = commit_log_min_offset
            batch = WriteBatch(raw_mode=True)
            deleted = 0
            for (topic, queue_id), state in list(self._max.items()):
                if state[0] == EMPTY_QUEUE_OFFSET:
                    continue
                min_offset = self.get_min_offset(topic, queue_id)
                first = self.first_existing_offset(topic, queue_id)
                upto = min(min_offset, state[0])  # never the last unit
                if first is not None and first < upto:
                    batch.delete_range(codec.cq_key(topic, queue_id, first),
                                       codec.cq_key(topic, queue_id, upto), self._units_cf)
                    deleted += upto - first
            if deleted and not self.read_only and self.db is not None:
                self.db.write(batch)
            return deleted if not self.read_only else 0
