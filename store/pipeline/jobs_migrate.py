"""The migrate job: file-based consume queues <-> the [5.x] RocksDB layout, then a unit-by-unit check.

    migrate(store_dir, to="rocksdb")                    # in place (the old queues kept as a backup)
    migrate(store_dir, to="file", out_dir=OTHER_ROOT)   # RocksDB -> files under OTHER_ROOT/consumequeue

The copy is the engine's offline conversion, `store.consumequeue.copy.copy_queues` (what
`rmqstore`'s non-Spark conversion uses): every unit from each queue's min to its max offset, pre-fill
units skipped, written through the target backend's own `put_units`, so the target has exactly the
bytes the engine's dispatch would have written. RocksDB values also keep the record's store time: it is
read from the commit log (decoded once with the pipeline's vectorised reader).

Verification reads both sides unit by unit and compares, queue by queue: the set of queues, each
queue's min and max offset, and every unit (phy_offset, size, tagsCode), plus, where one side is RocksDB,
the stored store time against the commit log. With Spark the queues are spread over partitions and
every task opens both stores read-only (RocksDB through a shadow copy, see `store.consumequeue.rocksdb.db`), so the
units are read in parallel and only counts and the first examples reach the driver; with
`master="none"` the same function runs here.

Both backends live in `<root>/consumequeue`, so an in-place migration builds the new layout in
`<root>/.migrate-<to>/consumequeue`, checks it, then renames the old directory to
`consumequeue.<old store type>-backup` and moves the new one in. The broker must be stopped, and its
`storeType` changed to match, before it is started on the migrated store.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field

import numpy as np

from store.codec.cq_unit import PREFILL_SIZE
from store.consumequeue.base import STORE_TYPE_FILE, STORE_TYPE_ROCKSDB, ConsumeQueueSettings
from store.consumequeue.copy import copy_queues
from store.consumequeue.factory import open_consume_queue_store
from store.errors import ConfigError
from store.pipeline.jobs_rebuild import DEFAULT_CQ_FILE_SIZE_BYTES, NO_MASTER
from store.pipeline.layout import config_int, read_store_properties

TARGETS = {"rocksdb": STORE_TYPE_ROCKSDB, "file": STORE_TYPE_FILE}
MAX_EXAMPLES = 20
READ_UNITS = 4096   # units read per get_units call while verifying


@dataclass(frozen=True)
class QueueStoreSpec:
    """How to open one side read-only (picklable: Spark tasks open their own)."""

    root_dir: str
    store_type: str
    file_size_bytes: int

    def open(self):
        store = open_consume_queue_store(ConsumeQueueSettings(
            root_dir=self.root_dir, file_size_bytes=self.file_size_bytes, store_type=self.store_type, read_only=True))
        store.load()
        store.recover()  # the file backend finds each queue's end; RocksDB reads its checkpoint
        return store


@dataclass
class VerifyCounts:
    queues: int = 0
    units: int = 0
    mismatches: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, other: "VerifyCounts") -> None:
        self.queues += other.queues
        self.units += other.units
        self.mismatches += other.mismatches
        self.examples = (self.examples + other.examples)[:MAX_EXAMPLES]

    def note(self, text: str) -> None:
        self.mismatches += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(text)


@dataclass
class MigrateResult:
    source: QueueStoreSpec
    target: QueueStoreSpec
    units_copied: int
    verify: VerifyCounts
    backup_dir: str | None
    seconds: float

    @property
    def clean(self) -> bool:
        return self.verify.mismatches == 0

    def summary(self) -> str:
        text = (f"copied {self.units_copied} units ({self.source.store_type} -> {self.target.store_type}) into "
                f"{self.target.root_dir}/consumequeue in {self.seconds:.1f} s; verified {self.verify.queues} queues, "
                f"{self.verify.units} units: {self.verify.mismatches} mismatches")
        if self.backup_dir:
            text += f"; previous queues kept in {self.backup_dir}"
        return text + "".join(f"\n  {e}" for e in self.verify.examples)


# -- verification (runs in Spark tasks or here) ---------------------------------------------------------

def _all_values(store, topic: str, queue_id: int) -> np.ndarray:
    """(phy_offset, size, tags_code[, store_timestamp]) of every unit from min to max, pre-fill dropped."""
    parts, queue_offset, end = [], store.get_min_offset(topic, queue_id), store.get_max_offset(topic, queue_id)
    offsets = []
    reader = getattr(store, "get_values", None) or store.get_units
    while queue_offset < end:  # every step advances by at least one unit
        units = reader(topic, queue_id, queue_offset, min(READ_UNITS, end - queue_offset))
        if units is None or len(units) == 0:
            queue_offset += 1
            continue
        parts.append(units)
        offsets.append(np.arange(queue_offset, queue_offset + len(units), dtype=np.int64))
        queue_offset += len(units)
    if not parts:
        return np.zeros(0, dtype=[("queue_offset", "i8"), ("phy_offset", "i8"), ("size", "i4"), ("tags_code", "i8")])
    units = np.concatenate(parts)
    queue_offsets = np.concatenate(offsets)
    real = ~((units["phy_offset"] == 0) & (units["size"] == PREFILL_SIZE))
    names = units.dtype.names
    out = np.zeros(int(real.sum()), dtype=[("queue_offset", "i8")] + [(n, "i8") for n in names])
    out["queue_offset"] = queue_offsets[real]
    for name in names:
        out[name] = units[name][real]
    return out


def compare_queues(source: QueueStoreSpec, target: QueueStoreSpec, queues: list[tuple[str, int]],
                   store_times: dict[int, int] | None = None) -> VerifyCounts:
    """Compare `queues` unit by unit between the two stores (both opened read-only here)."""
    counts = VerifyCounts()
    left, right = source.open(), target.open()
    try:
        for topic, queue_id in queues:
            counts.queues += 1
            name = f"{topic}/{queue_id}"
            for what in ("get_min_offset", "get_max_offset"):
                a, b = getattr(left, what)(topic, queue_id), getattr(right, what)(topic, queue_id)
                if a != b:
                    counts.note(f"{name}: {what} {a} != {b}")
            a, b = _all_values(left, topic, queue_id), _all_values(right, topic, queue_id)
            counts.units += len(a)
            if len(a) != len(b):
                counts.note(f"{name}: {len(a)} units != {len(b)} units")
            n = min(len(a), len(b))
            differs = np.zeros(n, dtype=bool)
            for field_name in ("queue_offset", "phy_offset", "size", "tags_code"):
                differs |= a[field_name][:n] != b[field_name][:n]
            for row in np.flatnonzero(differs)[:MAX_EXAMPLES]:
                counts.note(f"{name}@{int(a['queue_offset'][row])}: {a[row].tolist()} != {b[row].tolist()}")
            counts.mismatches += max(0, int(differs.sum()) - min(int(differs.sum()), MAX_EXAMPLES))
            if store_times is not None:
                for side in (a, b):
                    if "store_timestamp" not in side.dtype.names:
                        continue
                    for row in range(len(side)):
                        want = store_times.get(int(side["phy_offset"][row]))
                        if want is not None and want != int(side["store_timestamp"][row]):
                            counts.note(f"{name}@{int(side['queue_offset'][row])}: store time "
                                        f"{int(side['store_timestamp'][row])} != log {want}")
    finally:
        left.close()
        right.close()
    return counts


def _compare_partition(source, target, store_times_broadcast):
    def run(rows):
        store_times = None if store_times_broadcast is None else store_times_broadcast.value
        yield compare_queues(source, target, [tuple(r) for r in rows], store_times)
    return run


def verify_stores(source: QueueStoreSpec, target: QueueStoreSpec, *, master: str | None = None, spark=None,
                  store_times: dict[int, int] | None = None) -> VerifyCounts:
    """Unit-by-unit comparison of two consume-queue stores (queues spread over Spark tasks)."""
    counts = VerifyCounts()
    left, right = source.open(), target.open()
    try:
        left_queues, right_queues = set(left.queues()), set(right.queues())
    finally:
        left.close()
        right.close()
    for queue in sorted(left_queues ^ right_queues):
        counts.note(f"{queue[0]}/{queue[1]}: only in {'source' if queue in left_queues else 'target'}")
    queues = sorted(left_queues & right_queues)
    if not queues:
        return counts
    if master == NO_MASTER:
        counts.add(compare_queues(source, target, queues, store_times))
        return counts
    if spark is None:
        from store.pipeline.session import build_session
        spark = build_session(master, "rmqstore-migrate")
    context = spark.sparkContext
    context.setJobDescription(f"migrate: verify {len(queues)} queues")
    partitions = max(1, min(len(queues), 2 * context.defaultParallelism))
    # One copy of the store-time table per executor, not one per task closure.
    shared_times = None if store_times is None else context.broadcast(store_times)
    try:
        for part in context.parallelize(queues, partitions).mapPartitions(
                _compare_partition(source, target, shared_times)).collect():
            counts.add(part)
    finally:
        if shared_times is not None:
            shared_times.unpersist()
    return counts


# -- the job -------------------------------------------------------------------------------------------

def _store_times(store_dir: str) -> dict[int, int]:
    from store.pipeline.frames import commitlog_table

    table = commitlog_table(store_dir, columns=["phy_offset", "store_timestamp"])
    return dict(zip(table.column("phy_offset").to_pylist(), table.column("store_timestamp").to_pylist()))


def migrate(store_dir: str | os.PathLike, to: str = "rocksdb", out_dir: str | os.PathLike | None = None, *,
            master: str | None = None, spark=None, verify: bool = True) -> MigrateResult:
    """Convert `store_dir`'s consume queues to `to` ("rocksdb" or "file") and verify (see module doc).

    `out_dir` None migrates in place; otherwise the new queues go to `out_dir/consumequeue` and the
    store is not changed. `master="none"` verifies without Spark.
    """
    started = time.monotonic()
    if to not in TARGETS:
        raise ConfigError(f"to must be one of {sorted(TARGETS)}, not {to!r}")
    store_dir = os.fspath(store_dir)
    target_type = TARGETS[to]
    source_type = STORE_TYPE_FILE if target_type == STORE_TYPE_ROCKSDB else STORE_TYPE_ROCKSDB
    queue_dir = os.path.join(store_dir, "consumequeue")
    if not os.path.isdir(queue_dir):
        raise ConfigError(f"{queue_dir} does not exist")
    is_rocksdb = os.path.exists(os.path.join(queue_dir, "CURRENT"))
    if is_rocksdb != (source_type == STORE_TYPE_ROCKSDB):
        raise ConfigError(f"{queue_dir} already holds {'RocksDB' if is_rocksdb else 'file'} consume queues")
    file_size = config_int(read_store_properties(store_dir), "mappedFileSizeConsumeQueue", DEFAULT_CQ_FILE_SIZE_BYTES)
    in_place = out_dir is None
    target_root = os.path.join(store_dir, f".migrate-{to}") if in_place else os.fspath(out_dir)
    if os.path.exists(os.path.join(target_root, "consumequeue")):
        raise ConfigError(f"{target_root}/consumequeue exists: migrate needs a fresh target")
    source = QueueStoreSpec(store_dir, source_type, file_size)
    target = QueueStoreSpec(target_root, target_type, file_size)
    store_times = _store_times(store_dir)

    reader = source.open()
    writer = open_consume_queue_store(ConsumeQueueSettings(root_dir=target_root, file_size_bytes=file_size,
                                                           store_type=target_type))
    writer.load()
    try:
        copied = copy_queues(reader, writer, lambda phy_offset, size: store_times.get(phy_offset, 0))
        writer.flush()
    finally:
        writer.close()
        reader.close()

    counts = verify_stores(source, target, master=master, spark=spark, store_times=store_times) if verify \
        else VerifyCounts()
    backup = None
    if in_place:
        if counts.mismatches:
            raise ConfigError(f"the migrated queues differ from the originals; left in {target_root}, store unchanged")
        backup = f"{queue_dir}.{source_type}-backup"
        if os.path.exists(backup):
            raise ConfigError(f"{backup} exists; move it away first (the new queues are in {target_root})")
        os.replace(queue_dir, backup)
        os.replace(os.path.join(target_root, "consumequeue"), queue_dir)
        shutil.rmtree(target_root)
        target = QueueStoreSpec(store_dir, target_type, file_size)
    return MigrateResult(source, target, copied, counts, backup, time.monotonic() - started)
