"""The rebuild job: consume queues and index files from the commit log alone (an offline, parallel reput).

    rebuild(store_dir, out_dir)                      # Spark, master from $SPARK_MASTER or local[2]
    rebuild(store_dir, out_dir, master="none")       # the same in this process, no Spark

Two halves, split where the work is parallel and where it is not:

* **Decode (parallel).** Every commit-log split (one per segment, large segments cut at record
  boundaries by `plan_splits`) is decoded by `SegmentReader` into the DispatchRequest columns only
  (`DISPATCH_COLUMNS`: no body, no property map). With Spark each split is one partition; a feeder
  thread runs `sc.runJob` over a few partitions at a time, so executors decode ahead while the driver
  writes, and at most `PREFETCH_GROUPS` groups of decoded columns wait in memory.
* **Write (sequential, in log order).** The driver turns the columns back into `DispatchRequest`s and
  hands them, `DISPATCH_BATCH_MAX_RECORDS` at a time, to the engine's own dispatchers
  (`ConsumeQueueDispatcher` -> `open_consume_queue_store(...).put_units`, `IndexDispatcher` ->
  `IndexService.build_index`). Writing through the engine's writers is what makes the output
  byte-identical to what the engine's reput builds for the same log; a parallel writer per queue would
  have to re-implement file rolling, pre-fill and the index's slot chains.

Where the log ends follows recovery (spec §2.7, §11): records are read segment by segment up to each
one's recovered end; the first segment that does not end in a BLANK or exactly at its file end (a torn
or garbage record, a zero-filled tail) ends the log, and later segments are not dispatched (they are
listed in `RebuildResult.ignored_segments`). Records of `SCHEDULE_TOPIC_XXXX` that carry DELAY are
re-checked with the engine's `check_message` (its tagsCode is the delivery time, and a DELAY Java
cannot parse makes the record invalid, which also ends the log).

The output directory gets `consumequeue/` (files, or one RocksDB database for
`store_type="defaultRocksDB"`) and `index/`; index files are named by a clock that follows the store
timestamps being indexed (RocketMQ names them by wall-clock creation time, so names never match).
"""

from __future__ import annotations

import functools
import os
import queue as queue_module
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from store.codec import message as msgcodec
from store.codec import record_check
from store.codec.message import DispatchRequest
from store.consumequeue.base import STORE_TYPE_FILE, STORE_TYPE_ROCKSDB, ConsumeQueueSettings
from store.consumequeue.factory import open_consume_queue_store
from store.errors import ConfigError
from store.index.index_service import IndexService
from store.pipeline.commitlog_scan import END_BLANK, END_FILE, END_STOP
from store.pipeline.layout import (DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, config_int, list_commit_log,
                                   read_store_properties)
from store.pipeline.segment_reader import (DEFAULT_SPLIT_BYTES, SegmentEnd, SegmentReader, SegmentSplit, map_file,
                                           plan_splits)
from store.services.dispatch import DISPATCH_BATCH_MAX_RECORDS, ConsumeQueueDispatcher, IndexDispatcher

DISPATCH_COLUMNS = ["phy_offset", "commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags_code",
                    "store_timestamp", "sys_flag", "prepared_transaction_offset", "keys", "uniq_key"]
DEFAULT_CQ_FILE_SIZE_BYTES = 300_000 * 20
PARTITIONS_PER_GROUP = 2      # splits decoded by one Spark job (one per core of local[2])
PREFETCH_GROUPS = 2           # decoded groups waiting for the writer: bounds driver memory
SEGMENT_CONTINUES = (END_BLANK, END_FILE, END_STOP)   # ends after which the log goes on
NO_MASTER = "none"

Progress = Callable[[int, int], None]   # (log bytes dispatched, log bytes in total)


@dataclass(frozen=True)
class RebuildSettings:
    """The store config the rebuilt structures depend on (from `store.properties` / `broker.conf`)."""

    cq_file_size_bytes: int = DEFAULT_CQ_FILE_SIZE_BYTES
    max_hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM
    max_index_num: int = DEFAULT_MAX_INDEX_NUM
    message_index_enable: bool = True

    @classmethod
    def of_store(cls, store_dir: str | os.PathLike) -> "RebuildSettings":
        config = read_store_properties(store_dir)
        return cls(config_int(config, "mappedFileSizeConsumeQueue", DEFAULT_CQ_FILE_SIZE_BYTES),
                   config_int(config, "maxHashSlotNum", DEFAULT_MAX_HASH_SLOT_NUM),
                   config_int(config, "maxIndexNum", DEFAULT_MAX_INDEX_NUM),
                   config.get("messageIndexEnable", "true").strip().lower() == "true")


@dataclass
class RebuildResult:
    out_dir: str
    master: str
    records: int = 0                 # records dispatched (every type; the index sees them all)
    log_end_offset: int = 0          # phy_offset where dispatch stopped (the recovered log end)
    end_kind: str = ""               # why it stopped (commitlog_scan.END_*)
    splits: int = 0
    queues: int = 0
    index_files: int = 0
    ignored_segments: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        text = (f"rebuilt {self.queues} consume queues and {self.index_files} index files from "
                f"{self.records} records ({self.splits} splits, {self.master}) into {self.out_dir} "
                f"in {self.seconds:.1f} s; log end {self.log_end_offset} ({self.end_kind})")
        if self.ignored_segments:
            text += f"; segments after the log end not dispatched: {', '.join(self.ignored_segments)}"
        return text


# -- decode (runs in Spark tasks or in this process) ---------------------------------------------------

def decode_split(split: SegmentSplit) -> tuple[SegmentEnd, pa.Table]:
    """The dispatch columns of every record of one split, and where the split ended."""
    reader = SegmentReader(split, columns=DISPATCH_COLUMNS)
    batches = list(reader.batches())
    schema = batches[0].schema if batches else None
    table = pa.Table.from_batches(batches, schema=schema) if batches else None
    return reader.end, table


def _to_ipc(table: pa.Table | None) -> bytes | None:
    if table is None:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(payload: bytes | None) -> pa.Table | None:
    return None if payload is None else pa.ipc.open_stream(payload).read_all()


def _decode_partition(rows) -> Iterator[tuple]:
    for number, split in rows:
        end, table = decode_split(split)
        yield number, (end.phy_offset, end.kind, end.records), _to_ipc(table)


def _decoded_locally(splits: list[SegmentSplit]) -> Iterator[tuple[SegmentEnd, pa.Table | None]]:
    for split in splits:
        yield decode_split(split)


def _decoded_by_spark(spark, splits: list[SegmentSplit]) -> Iterator[tuple[SegmentEnd, pa.Table | None]]:
    """Decode every split as its own partition; yield in log order while later groups decode."""
    context = spark.sparkContext
    rdd = context.parallelize(list(enumerate(splits)), max(len(splits), 1))
    groups = [list(range(i, min(i + PARTITIONS_PER_GROUP, len(splits))))
              for i in range(0, len(splits), PARTITIONS_PER_GROUP)]
    ready: queue_module.Queue = queue_module.Queue(maxsize=PREFETCH_GROUPS)
    stop = threading.Event()

    def feed() -> None:
        try:
            for group in groups:
                if stop.is_set():
                    break
                context.setJobDescription(f"rebuild: decode splits {group[0]}-{group[-1]} of {len(splits)}")
                ready.put(("ok", context.runJob(rdd, _decode_partition, group)))
        except BaseException as error:  # handed to the consumer, which re-raises it
            ready.put(("error", error))
        finally:
            ready.put(("done", None))

    feeder = threading.Thread(target=feed, name="rebuild-decode-feeder", daemon=True)
    feeder.start()
    try:
        while True:
            kind, value = ready.get()
            if kind == "done":
                break
            if kind == "error":
                raise value
            for _number, (phy_offset, end_kind, records), payload in sorted(value, key=lambda row: row[0]):
                yield SegmentEnd(phy_offset, end_kind, records), _from_ipc(payload)
    finally:
        stop.set()
        while feeder.is_alive():   # unblock a feeder waiting on a full queue, then let it finish
            try:
                ready.get(timeout=0.1)
            except queue_module.Empty:
                pass


# -- write (driver, log order) -------------------------------------------------------------------------

class _DispatchWriter:
    """The engine's dispatchers over fresh output structures, fed with decoded columns in log order."""

    def __init__(self, out_dir: str, settings: RebuildSettings, store_type: str):
        self.cq_store = open_consume_queue_store(ConsumeQueueSettings(
            root_dir=out_dir, file_size_bytes=settings.cq_file_size_bytes, store_type=store_type))
        self.cq_store.load()
        self.latest_store_timestamp_ms = 0
        self.index_service = None
        self.dispatchers = [ConsumeQueueDispatcher(self.cq_store)]
        if settings.message_index_enable:
            # Index files are named by creation time; the store time being indexed is the closest
            # deterministic stand-in for the broker's wall clock at that moment.
            self.index_service = IndexService(os.path.join(out_dir, "index"), settings.max_hash_slot_num,
                                              settings.max_index_num, clock_ms=lambda: self.latest_store_timestamp_ms)
            self.index_service.load()
            self.dispatchers.append(IndexDispatcher(self.index_service))

    def write(self, table: pa.Table, segment_path: str, file_from_offset: int) -> tuple[int, int | None]:
        """Dispatch the records of `table` in order: (records dispatched, phy_offset of a record the
        engine finds invalid and where the log therefore ends, or None)."""
        columns = {name: table.column(name).to_pylist() for name in DISPATCH_COLUMNS}
        requests: list[DispatchRequest] = []
        dispatched = 0
        for where, topic, queue_id, phy_offset, size, tags_code, store_ts, queue_offset, keys, uniq_key, sys_flag, \
                prepared in zip(columns["phy_offset"], columns["topic"], columns["queue_id"],
                                columns["commit_log_offset"], columns["store_size"], columns["tags_code"],
                                columns["store_timestamp"], columns["queue_offset"], columns["keys"],
                                columns["uniq_key"], columns["sys_flag"], columns["prepared_transaction_offset"]):
            if topic == msgcodec.SCHEDULE_TOPIC:
                request = _engine_request(segment_path, where - file_from_offset)
                if request is None:
                    self._dispatch(requests)
                    return dispatched + len(requests), where
            else:
                request = DispatchRequest(topic, queue_id, phy_offset, size, tags_code, store_ts, queue_offset,
                                          keys or "", uniq_key, sys_flag, prepared, {})
            requests.append(request)
            if len(requests) >= DISPATCH_BATCH_MAX_RECORDS:
                self._dispatch(requests)
                dispatched += len(requests)
                requests = []
        self._dispatch(requests)
        return dispatched + len(requests), None

    def _dispatch(self, requests: list[DispatchRequest]) -> None:
        if not requests:
            return
        self.latest_store_timestamp_ms = max(self.latest_store_timestamp_ms, requests[0].store_timestamp)
        for dispatcher in self.dispatchers:
            dispatcher.dispatch(requests)

    def close(self) -> tuple[int, int]:
        """Flush and close; returns (queues, index files)."""
        queues = len(self.cq_store.queues())
        self.cq_store.flush()
        self.cq_store.close()
        index_files = 0
        if self.index_service is not None:
            index_files = len(self.index_service.files)
            self.index_service.flush()
            self.index_service.close()
        return queues, index_files


@functools.lru_cache(maxsize=2)
def _mapped(segment_path: str):
    return map_file(segment_path)


def _engine_request(segment_path: str, position: int) -> DispatchRequest | None:
    """check_message's request for the record at `position` (None when the engine finds it invalid)."""
    buf = _mapped(segment_path)
    result = record_check.check_message(buf, position, check_crc=False)
    return result.request if result.kind == record_check.CHECK_RECORD else None


# -- the job -------------------------------------------------------------------------------------------

def _check_output(out_dir: str, store_dir: str) -> None:
    if os.path.realpath(out_dir) == os.path.realpath(store_dir):
        raise ConfigError("rebuild writes to a separate output directory, not into the store itself")
    for name in ("consumequeue", "index"):
        path = os.path.join(out_dir, name)
        if os.path.exists(path) and os.listdir(path):
            raise ConfigError(f"{path} is not empty: rebuild needs a fresh output directory")


def rebuild(store_dir: str | os.PathLike, out_dir: str | os.PathLike, *, master: str | None = None,
            store_type: str = STORE_TYPE_FILE, spark=None, split_bytes: int = DEFAULT_SPLIT_BYTES,
            settings: RebuildSettings | None = None, progress: Progress | None = None) -> RebuildResult:
    """Build `out_dir/consumequeue` and `out_dir/index` from `store_dir/commitlog` (see the module doc).

    `master="none"` decodes in this process; otherwise Spark does (`spark` if given, else a session
    from `build_session(master)`). `store_type` is "default" (files) or "defaultRocksDB".
    """
    started = time.monotonic()
    store_dir, out_dir = os.fspath(store_dir), os.fspath(out_dir)
    if store_type not in (STORE_TYPE_FILE, STORE_TYPE_ROCKSDB):
        raise ConfigError(f"store_type must be {STORE_TYPE_FILE!r} or {STORE_TYPE_ROCKSDB!r}")
    _check_output(out_dir, store_dir)
    os.makedirs(out_dir, exist_ok=True)
    settings = settings or RebuildSettings.of_store(store_dir)
    segments = list_commit_log(store_dir)
    splits = plan_splits(segments, split_bytes)
    total_bytes = sum(s.size_bytes for s in segments)
    if master == NO_MASTER:
        decoded, master_name = _decoded_locally(splits), NO_MASTER
    else:
        if spark is None:
            from store.pipeline.session import build_session
            spark = build_session(master, "rmqstore-rebuild")
        decoded, master_name = _decoded_by_spark(spark, splits), spark.sparkContext.master
    result = RebuildResult(out_dir, master_name, splits=len(splits))
    writer = _DispatchWriter(out_dir, settings, store_type)
    try:
        for split, (end, table) in zip(splits, decoded):
            early_end = None
            if table is not None:
                dispatched, early_end = writer.write(table, split.path, split.file_from_offset)
                result.records += dispatched
            result.log_end_offset, result.end_kind = end.phy_offset, end.kind
            if progress is not None:
                progress(min(end.phy_offset - segments[0].file_from_offset, total_bytes), total_bytes)
            if early_end is not None:
                result.log_end_offset, result.end_kind = early_end, "invalid"
            if early_end is not None or end.kind not in SEGMENT_CONTINUES:
                later = [s.name for s in segments if s.file_from_offset > split.file_from_offset]
                result.ignored_segments = [name for name in later if _has_bytes(store_dir, name)]
                break
    finally:
        close_decoded = getattr(decoded, "close", None)
        if close_decoded is not None:
            close_decoded()
        result.queues, result.index_files = writer.close()
    if progress is not None:
        progress(total_bytes, total_bytes)
    result.seconds = time.monotonic() - started
    return result


def _has_bytes(store_dir: str, segment_name: str) -> bool:
    """True if a segment holds anything but zeros in its first record header (an unused preallocated file
    is not worth reporting)."""
    path = os.path.join(store_dir, "commitlog", segment_name)
    with open(path, "rb") as handle:
        return any(handle.read(8))
