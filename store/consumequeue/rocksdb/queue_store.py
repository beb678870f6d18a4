"""[5.x] RocksDB consume queue (`storeType=defaultRocksDB`, spec §13).

One database in `<root>/consumequeue` (opened by `store.consumequeue.rocksdb.db`): the `default` column family
holds one 28-byte value per unit, the `offset` column family per-queue `max`/`min` entries and the
global CHECKPOINT (byte layouts in `store.codec.rocksdb_cq`). There are no files, so a read is not cut
at a file boundary and "the file is gone" never happens: a missing unit reads as None.

Writes: one WriteBatch per `put_units` call: the units, then the `max` entry of every queue touched,
then CHECKPOINT (`put_value_runs` likewise, from the reput service's scan rows). The same duplicate rules as the file backend apply (a unit ending at or before the
queue's last end is a repeat; a queue offset below the next one is already built), so both backends
answer alike for one dispatch stream. `min` entries are corrected lazily when asked for (§13.3); a
new queue whose first unit is offset 0 gets none with its units (RocketMQ writes none on creation
either): memory knows it, and a full flush (shutdown) writes those of all new queues in one batch. The per-queue keys are made once per queue, not per pass. The per-queue tables hold
no tuple they need not (bytes and ints are not tracked by Python's garbage collector; 16,384 new
queues' tuples made it run full collections during puts).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Sequence

import numpy as np
from rocksdict import ReadOptions, WriteBatch

from store.codec import rocksdb_cq as codec
from store.codec.cq_unit import CQ_UNIT_DTYPE, CqUnit
from store.consumequeue.base import ConsumeQueueSettings, StoreTimeOf, check_boundary
from store.consumequeue.rocksdb.db import (flush_all, open_read_only_shadow, open_writable,
                                           remove_shadow)
from store.consumequeue.rocksdb.maintenance import EMPTY_QUEUE_OFFSET, RocksDBQueueMaintenance
from store.consumequeue.rocksdb.value_runs import put_value_runs
from store.consumequeue.time_search import NEAREST, search_boundary, search_nearest
from store.errors import CorruptDataError, ReadOnlyStoreError

log = logging.getLogger(__name__)

# Ranges up to this many units are read with one multi_get (RocketMQ's rangeQuery), longer ones with
# an iterator bounded by an upper key. bench/rocksdb_crossover.py (warm cache, best of 5 rounds, 2 CPUs):
# multi_get wins only at 1 unit (15 vs 20 us), they tie around 2, and from 4 units on the iterator is
# 1.4-2.5x faster (8: 19 vs 10 us; 128: 590 vs 315 us; 1024: 4.2 vs 2.8 ms): rocksdict's multi_get
# costs one Python key object and one lookup per unit, the iterator one seek and then cheap next()s.
MULTI_GET_MAX_UNITS = 2

# RocksDB integer properties reported by `stats()` (per column family).
STATS_PROPERTIES = (
    "rocksdb.estimate-num-keys", "rocksdb.total-sst-files-size", "rocksdb.live-sst-files-size",
    "rocksdb.estimate-live-data-size", "rocksdb.cur-size-all-mem-tables",
    "rocksdb.num-entries-active-mem-table", "rocksdb.num-immutable-mem-table",
    "rocksdb.compaction-pending", "rocksdb.num-running-compactions", "rocksdb.num-running-flushes",
    "rocksdb.estimate-pending-compaction-bytes",
    *(f"rocksdb.num-files-at-level{level}" for level in range(7)))


# "... in /tmp/rmq-cq-rocksdb-x/000009.sst offset 0 size 6646": the file and byte RocksDB names.
_ROCKSDB_FILE = re.compile(r" in (/\S+) offset (\d+)")


def rocksdb_error(error: Exception, path: str) -> Exception:
    """RocksDB's refusal of the database at `path` as a CorruptDataError naming the store's own file
    and byte (not the read-only shadow copy's), or `error` itself when it is not about the files."""
    text = str(error)
    if not text.startswith(("Corruption", "IO error", "Invalid argument")):
        return error
    found = _ROCKSDB_FILE.search(text)
    if found is None:
        return CorruptDataError(path, 0, f"RocksDB refuses the consume-queue database: {text}")
    name = os.path.basename(found.group(1))
    reason = text[:found.start()].strip()
    return CorruptDataError(os.path.join(path, name), int(found.group(2)),
                            f"RocksDB refuses the consume-queue database: {reason}")

_NEW_QUEUE = (-1, -1, -1)  # _max state of a queue never seen: no unit, no end


class RocksDBConsumeQueueStore(RocksDBQueueMaintenance):
    """ConsumeQueueStore over one RocksDB database."""

    nearest_by_time = None     # every boundary goes through get_offset_in_queue_by_time

    def __init__(self, settings: ConsumeQueueSettings):
        self.settings = settings
        self.path = settings.consume_queue_dir
        self.read_only = settings.read_only
        self.db = None
        self._shadow = None
        self._units_cf = self._offsets_cf = self._offsets = None
        self._lock = threading.RLock()
        self.commit_log_min_offset = 0
        self.checkpoint_phy_end = -1
        # (topic, queue_id) -> (last queue offset, its phy_offset, end = phy_offset + size)
        self._max: dict[tuple[str, int], tuple[int, int, int]] = {}
        self._min: dict[tuple[str, int], tuple[int, int]] = {}  # -> (queue offset, phy_offset)
        # A new queue's min when it is its unit 0 and the `min` entry is not written yet: its phy_offset
        self._min_unwritten: dict[tuple[str, int], int] = {}
        # (topic, queue_id) -> its unit key prefix, its `max` key: made once per queue, not per pass
        self._unit_prefixes: dict[tuple[str, int], bytes] = {}
        self._max_keys: dict[tuple[str, int], bytes] = {}
        self._topic_heads: dict[str, bytes] = {}     # topic -> codec.topic_head (value_runs' keys)

    # -- lifecycle -------------------------------------------------------------------------------

    def load(self) -> None:
        with self._lock:
            if self.read_only:
                if not os.path.exists(os.path.join(self.path, "CURRENT")):
                    return  # no database yet: an empty store
                self.db, self._shadow = open_read_only_shadow(self.path)
            else:
                self.db = open_writable(self.path)
            try:
                self._units_cf = self.db.get_column_family_handle(codec.DEFAULT_CF)
                self._offsets_cf = self.db.get_column_family_handle(codec.OFFSET_CF)
                self._offsets = self.db.get_column_family(codec.OFFSET_CF)
                self._load_offset_table()
            except Exception as error:      # rocksdict raises plain Exception("Corruption: ...")
                self.db.close()
                remove_shadow(self._shadow)
                self.db, self._shadow = None, None
                raise rocksdb_error(error, self.path) from error

    def _load_offset_table(self) -> None:
        self._max.clear()
        self._min.clear()
        self._min_unwritten.clear()
        maxima = []
        for key, value in self._offsets.items():
            if key == codec.checkpoint_key():
                self.checkpoint_phy_end = codec.decode_checkpoint_value(value)
                continue
            if len(value) != codec.OFFSET_VALUE_SIZE:
                continue  # spec §13.3: scans skip values that are not 16 bytes
            topic, kind, queue_id = codec.decode_offset_key(key)
            entry = codec.decode_offset_value(value)
            if kind == codec.MAX_KIND:
                maxima.append(((topic, queue_id), entry))
            elif kind == codec.MIN_KIND:
                self._min[(topic, queue_id)] = (entry.queue_offset, entry.phy_offset)
        keys = [codec.cq_key(t, q, e.queue_offset) for (t, q), e in maxima]
        values = self.db.get(keys) if keys else []
        for ((queue, entry), value) in zip(maxima, values):
            size = codec.decode_cq_value(value).size if value is not None else 0
            self._max[queue] = (entry.queue_offset, entry.phy_offset, entry.phy_offset + size)

    def recover(self) -> int:
        """Nothing to scan: the CHECKPOINT value (largest unit end dispatched), -1 if absent."""
        return self.checkpoint_phy_end

    def refresh(self) -> None:
        """Read-only: take a new snapshot of the live database."""
        if not self.read_only:
            return
        with self._lock:
            self._close_db()
            self.load()

    def flush(self, least_pages: int = 0) -> None:
        # The CQ flush service is a no-op in RocksDB mode; a full flush (shutdown, thorough) writes
        # the new queues' `min` entries and flushes the memtables (writes skip the WAL: `db`).
        if self.db is not None and not self.read_only and least_pages == 0:
            with self._lock:
                self._write_unwritten_mins()
                flush_all(self.db, [self._offsets])

    def _write_unwritten_mins(self) -> None:
        """The `min` entries of queues created at offset 0 since the last full flush, in one
        WriteBatch (not one write per queue when each is first asked for)."""
        with self._lock:
            if not self._min_unwritten:
                return
            batch = WriteBatch(raw_mode=True)
            for queue, phy_offset in self._min_unwritten.items():
                batch.put(codec.offset_key(*queue, codec.MIN_KIND),
                          codec.offset_value(phy_offset, 0), self._offsets_cf)
                self._min.setdefault(queue, (0, phy_offset))
            self.db.write(batch)
            self._min_unwritten.clear()

    def close(self) -> None:
        with self._lock:
            if self.db is not None and not self.read_only:
                self._write_unwritten_mins()
                flush_all(self.db, [self._offsets])   # RocketMQ's shutdown: flush, wait
            self._close_db()

    def _close_db(self) -> None:
        if self.db is not None:
            # Column-family handles keep the database alive (and locked): drop them first.
            if self._offsets is not None:
                self._offsets.close()
            self._offsets = self._units_cf = self._offsets_cf = None
            self.db.close()
            self.db = None
        remove_shadow(self._shadow)
        self._shadow = None

    def stats(self) -> dict:
        """Read-only figures of the database, as far as rocksdict exposes them (for the dashboard).

        {"open": bool, "path": str,
         "column_families": {name: {RocksDB integer property: int | None}},   # default, offset
         "sst_files": [{"name", "level", "size_bytes", "num_entries", "num_deletions"}]}
        A read-only store reports its latest snapshot (file names are the live directory's).
        """
        with self._lock:
            result = {"open": self.db is not None, "path": self.path, "column_families": {},
                      "sst_files": []}
            if self.db is None:
                return result
            for name, handle in ((codec.DEFAULT_CF, self.db), (codec.OFFSET_CF, self._offsets)):
                if handle is not None:
                    # property_int_value answers None for a property this RocksDB does not know.
                    result["column_families"][name] = {
                        prop: handle.property_int_value(prop) for prop in STATS_PROPERTIES}
            result["sst_files"] = [
                {"name": item.get("name", "").lstrip("/"), "level": item.get("level", -1),
                 "size_bytes": item.get("size", 0), "num_entries": item.get("num_entries"),
                 "num_deletions": item.get("num_deletions")}
                for item in self.db.live_files()]
            return result

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStoreError("the RocksDB consume queue is open read-only")

    # -- writes (spec §13.5) ---------------------------------------------------------------------

    def put_units(self, requests: Sequence) -> None:
        self._check_writable()
        with self._lock:
            batch = WriteBatch(raw_mode=True)
            put = batch.put
            units_cf = self._units_cf
            known = self._max
            prefixes = self._unit_prefixes
            unit_key, unit_value = codec.cq_key_from_prefix, codec.cq_value
            touched: dict[tuple[str, int], tuple[int, int, int]] = {}
            batch_end = -1
            for request in requests:
                queue = (request.topic, request.queue_id)
                state = touched.get(queue)
                first = False       # the queue's first unit since it was created or emptied
                if state is None:
                    state = known.get(queue)
                    if state is None:
                        state = _NEW_QUEUE
                        first = True
                    elif state[0] == EMPTY_QUEUE_OFFSET:
                        first = True
                phy_offset = request.commit_log_offset
                end = phy_offset + request.msg_size
                if end <= state[2]:
                    continue  # duplicate dispatch
                queue_offset = request.consume_queue_offset
                if queue_offset <= state[0]:
                    continue  # already built
                if queue_offset != state[0] + 1 and state[0] >= 0:
                    log.warning("logic queue order maybe wrong: %s-%d next %d, got %d",
                                queue[0], queue[1], state[0] + 1, queue_offset)
                prefix = prefixes.get(queue)
                if prefix is None:
                    prefixes[queue], self._max_keys[queue] = prefix, _ = codec.queue_keys(*queue)
                if first:
                    self._note_first_unit(batch, queue, queue_offset, phy_offset)
                put(unit_key(prefix, queue_offset),
                    unit_value(phy_offset, request.msg_size, request.tags_code,
                               request.store_timestamp), units_cf)
                touched[queue] = (queue_offset, phy_offset, end)
                if end > batch_end:
                    batch_end = end
            if touched:
                self._write_units(batch, touched, batch_end)

    def _write_units(self, batch: WriteBatch, touched: dict, batch_end: int) -> None:
        """Finish and write a batch of units (under the lock): one `max` entry per queue touched,
        then CHECKPOINT, in the same WriteBatch as the units (RocketMQ's putMaxPhyAndCqOffset).
        `touched`: queue -> (its last queue offset, that unit's phy offset, its end)."""
        put = batch.put
        offsets_cf = self._offsets_cf
        offset_value = codec.OFFSET_VALUE.pack
        max_keys = self._max_keys
        for queue, (queue_offset, phy_offset, _) in touched.items():
            put(max_keys[queue], offset_value(phy_offset, queue_offset), offsets_cf)
        checkpoint = max(self.checkpoint_phy_end, batch_end)
        put(codec.checkpoint_key(), codec.checkpoint_value(checkpoint), offsets_cf)
        self.db.write(batch)
        self._max.update(touched)
        self.checkpoint_phy_end = checkpoint

    def put_value_runs(self, runs: tuple[list, ...], values: bytes,
                       queue_offsets: list[int]) -> None:
        """`put_units` for units given per queue with their 28-byte values, as the reput service
        makes them from its scan rows (`store.consumequeue.rocksdb.value_runs`)."""
        self._check_writable()
        put_value_runs(self, runs, values, queue_offsets)

    def _note_first_unit(self, batch: WriteBatch, queue: tuple[str, int], queue_offset: int,
                         phy_offset: int) -> None:
        """The queue's min is its first unit (like a file queue created at that offset). A queue
        never seen whose first unit is offset 0 gets no `min` entry in this batch (RocketMQ writes
        none when a queue is created): `_min_unwritten` learns it, and `flush(0)` / `close` write
        the entries of all such queues in one batch.
        An emptied queue (truncated to nothing, in memory or on disk by an old `min` entry) or one
        starting past 0 gets its entry now, so that no reader finds an old min or searches from 0."""
        stale = self._min.get(queue)
        if queue_offset == 0 and stale is None and queue not in self._max:
            self._min_unwritten[queue] = phy_offset
            return
        self._min_unwritten.pop(queue, None)
        self._min[queue] = (queue_offset, phy_offset)
        batch.put(codec.offset_key(*queue, codec.MIN_KIND),
                  codec.offset_value(phy_offset, queue_offset), self._offsets_cf)

    # -- reads (spec §13.4) ----------------------------------------------------------------------

    def queues(self) -> list[tuple[str, int]]:
        return list(self._max)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        state = self._max.get((topic, queue_id))
        return state[0] + 1 if state else 0

    def get_max_phy_end(self, topic: str, queue_id: int) -> int:
        state = self._max.get((topic, queue_id))
        return state[2] if state else -1

    def _value(self, topic: str, queue_id: int, queue_offset: int) -> codec.CqValue | None:
        if self.db is None:
            return None
        value = self.db.get(codec.cq_key(topic, queue_id, queue_offset))
        return codec.decode_cq_value(value) if value is not None else None

    def get_unit(self, topic: str, queue_id: int, queue_offset: int) -> CqUnit | None:
        if queue_offset < self.get_min_offset(topic, queue_id):
            return None
        value = self._value(topic, queue_id, queue_offset)
        return CqUnit(value.phy_offset, value.size, value.tags_code) if value else None

    def get_units(self, topic: str, queue_id: int, queue_offset: int,
                  max_units: int) -> np.ndarray | None:
        values = self.get_values(topic, queue_id, queue_offset, max_units)
        return None if values is None else codec.values_to_units(values)

    def get_values(self, topic: str, queue_id: int, queue_offset: int,
                   max_units: int) -> np.ndarray | None:
        """Units with their store times (CQ_VALUE_DTYPE), cut at the first missing key."""
        max_offset = self.get_max_offset(topic, queue_id)
        if self.db is None or queue_offset < self.get_min_offset(topic, queue_id) or \
                queue_offset >= max_offset:
            return None
        count = max(0, min(max_units, max_offset - queue_offset))
        prefix = codec.cq_key_prefix(topic, queue_id)
        if count <= MULTI_GET_MAX_UNITS:
            raw = read_multi_get(self.db, prefix, queue_offset, count)
        else:
            raw = read_iterator(self.db, prefix, queue_offset, count)
        if count and not raw:
            return None
        return codec.decode_cq_values(raw)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int,
                                    boundary: str, store_time_of: StoreTimeOf) -> int:
        """§10.3 over [min, last] using the store times kept in the values (store_time_of unused)."""
        check_boundary(boundary)
        state = self._max.get((topic, queue_id))
        if state is None or self.db is None:
            return 0
        low, high = self.get_min_offset(topic, queue_id), state[0]
        cache: dict[int, codec.CqValue | None] = {}

        def value_at(offset: int):
            if offset not in cache:
                cache[offset] = self._value(topic, queue_id, offset)
            return cache[offset]

        def phy_at(offset: int):
            value = value_at(offset)
            return None if value is None else value.phy_offset

        def time_at(offset: int):
            value = value_at(offset)
            return None if value is None else value.store_timestamp

        if boundary == NEAREST:
            found = search_nearest(lambda i: phy_at(i) if phy_at(i) is not None else -1, time_at,
                                   low, high, timestamp_ms, self.commit_log_min_offset)
            return 0 if found is None or found < 0 else found
        result = search_boundary(phy_at, time_at, low, high, timestamp_ms,
                                 self.commit_log_min_offset, boundary, 0, all_later_lower=low)
        return min(max(result, low), state[0] + 1)


def read_multi_get(db, prefix: bytes, queue_offset: int, count: int) -> list[bytes]:
    keys = [codec.cq_key_from_prefix(prefix, queue_offset + i) for i in range(count)]
    raw = db.get(keys) if keys else []
    for index, value in enumerate(raw):
        if value is None:
            return raw[:index]
    return raw


def read_iterator(db, prefix: bytes, queue_offset: int, count: int) -> list[bytes]:
    options = ReadOptions()
    options.set_iterate_upper_bound(codec.cq_key_from_prefix(prefix, queue_offset + count))
    iterator = db.iter(options)
    expected = queue_offset
    iterator.seek(codec.cq_key_from_prefix(prefix, queue_offset))
    raw = []
    while iterator.valid() and len(raw) < count:  # bounded by count
        if iterator.key() != codec.cq_key_from_prefix(prefix, expected):
            break  # a hole: cut like the multi_get path
        raw.append(iterator.value())
        expected += 1
        iterator.next()
    del iterator
    return raw


__all__ = ["RocksDBConsumeQueueStore", "MULTI_GET_MAX_UNITS", "CQ_UNIT_DTYPE"]
