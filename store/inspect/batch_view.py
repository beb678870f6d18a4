"""`BatchViewsMixin` of `StoreInspector` [5.x]: batch consume queues (`BatchConsumeQueue`,
rocketmq-all-5.3.3) as an operator reads them: the queues, a page of units with the record each
points to, and what the store check says about one queue.

A batch queue (`batchconsumequeue/<topic>/<queueId>/`, unit layout in `store.codec.batch_cq_unit`)
counts queue offsets in messages: a unit covers msgBaseOffset .. msgBaseOffset + batchSize - 1.

| method                                   | answers (RocketMQ behind it)                            |
|------------------------------------------|---------------------------------------------------------|
| `batch_queues()`                         | `BatchQueueView` per queue: files, units, min / max in messages (`getMinOffsetInQueue`, `getMaxOffsetInQueue`), store times of the first and last record |
| `is_batch_queue(topic, queue_id)`        | whether the store serves that queue from a batch queue (topics.json `queue.type=BatchCQ`, `QueueTypeUtils.isBatchCq`) |
| `batch_units(topic, queue_id, offset, n)`| `BatchUnitsPage`: from the unit holding message `offset` (`getBatchMsgIndexBuffer`, `iterateFrom`) up to n units, crossing files; every field, the unit's bytes, and the record it points to judged |
| `batch_findings(topic, queue_id)`        | the store check's findings on that queue's files (`store.check.batch`) |

The record judgement follows `store.check.batch`: a record must start at phyOffset
(`checkMessageAndReturnSize` with CRC), be `size` bytes, belong to the queue's topic and queue id, and
carry INNER_BASE = msgBaseOffset and INNER_NUM = batchSize when it has them
(`CommitLog.setBatchSizeIfNeeded`). Needs `attach_batch` (and `attach_admin` for topics.json).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from store.check.batch import check_batch_queues
from store.check.commitlog import LogScan
from store.check.log_view import CommitLogView
from store.check.findings import Finding, Sink, utc_text
from store.codec import record_check
from store.codec.batch_cq_unit import BATCH_CQ_UNIT_DTYPE, BATCH_CQ_UNIT_SIZE, search_msg_offset
from store.errors import StoreError

__all__ = ["AllQueues", "BatchQueueView", "BatchUnitView", "BatchUnitsPage", "BatchViewsMixin",
           "MAX_UNITS_PER_PAGE", "record_problems"]

MAX_UNITS_PER_PAGE = 1000          # `batch_units` returns at most this many units
MAX_CHECK_UNITS = 200_000          # `batch_findings` checks at most this many units of the store
MAX_FINDINGS = 200
PROPERTY_INNER_NUM = "INNER_NUM"   # MessageConst
PROPERTY_INNER_BASE = "INNER_BASE"  # MessageConst


@dataclass(frozen=True)
class BatchQueueView:
    """One batch queue as of the call; offsets in messages, times in ms (-1: unknown)."""

    topic: str
    queue_id: int
    directory: str
    files: tuple[str, ...]          # segment file names, oldest first
    file_size_bytes: int            # mapperFileSizeBatchConsumeQueue
    units: int                      # units recovery kept (records the queue points to)
    min_offset: int                 # getMinOffsetInQueue (-1 for an empty queue, as RocketMQ says)
    max_offset: int                 # getMaxOffsetInQueue: last unit's base + batch size
    batch_topic: bool               # topics.json makes the topic a batch topic (else not served)
    first_store_ms: int
    last_store_ms: int

    @property
    def messages(self) -> int:
        return max(0, self.max_offset - max(self.min_offset, 0))

    def as_row(self) -> dict:
        return {"topic": self.topic, "queue_id": self.queue_id, "files": len(self.files),
                "units": self.units, "min_offset": self.min_offset, "max_offset": self.max_offset,
                "messages": self.messages, "batch_topic": self.batch_topic,
                "first_store_ms": self.first_store_ms, "last_store_ms": self.last_store_ms,
                "directory": self.directory}


@dataclass(frozen=True)
class BatchUnitView:
    """One 46-byte unit with every field, and the record it points to."""

    file_name: str
    position: int                   # byte position of the unit in its file
    raw: bytes                      # the unit's 46 bytes as stored
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    msg_base_offset: int
    batch_size: int
    compacted_offset: int
    reserved: int
    record_file: str | None         # commit-log file holding phyOffset (None: no such file)
    record_position: int | None     # phyOffset's byte position in that file
    record_topic: str | None
    record_queue_id: int | None
    record_queue_offset: int | None  # the record's QUEUEOFFSET field
    record_store_timestamp: int | None
    record_inner_base: str | None   # INNER_BASE / INNER_NUM as stored (None: absent)
    record_inner_num: str | None
    problems: tuple[str, ...] = field(default=())

    @property
    def last_queue_offset(self) -> int:
        return self.msg_base_offset + self.batch_size - 1

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def store_time_text(self) -> str:
        """The unit's storeTime readable, with its zone (UTC)."""
        return utc_text(self.store_timestamp)

    def as_row(self) -> dict:
        """Raw values (times in ms, the unit's bytes as hex)."""
        return {"file": self.file_name, "position": self.position, "phy_offset": self.phy_offset,
                "size": self.size, "tags_code": self.tags_code,
                "store_timestamp": self.store_timestamp, "msg_base_offset": self.msg_base_offset,
                "batch_size": self.batch_size, "compacted_offset": self.compacted_offset,
                "reserved": self.reserved, "first_queue_offset": self.msg_base_offset,
                "last_queue_offset": self.last_queue_offset, "record_file": self.record_file,
                "record_position": self.record_position, "record_topic": self.record_topic,
                "record_queue_id": self.record_queue_id,
                "record_queue_offset": self.record_queue_offset,
                "record_store_timestamp": self.record_store_timestamp,
                "record_inner_base": self.record_inner_base,
                "record_inner_num": self.record_inner_num, "valid": self.valid,
                "problems": list(self.problems), "unit_hex": self.raw.hex()}


@dataclass(frozen=True)
class BatchUnitsPage:
    """Units from the one holding `start_offset`; `more` when units follow the last one shown."""

    queue: BatchQueueView
    start_offset: int
    units: tuple[BatchUnitView, ...]
    more: bool


class BatchViewsMixin:
    """Needs `self._commit_log`, `self.config`, `attach_batch` and `self._topic_configs`."""

    _batch_queues = None
    _topic_configs = None

    def attach_batch(self, batch_queues) -> None:
        """Hand in the store's `BatchQueueStore` (None: the store hosts no batch queues)."""
        self._batch_queues = batch_queues

    def _is_batch_topic(self, topic: str) -> bool:
        configs = self._topic_configs
        return configs is not None and configs.is_batch_topic(topic)

    def batch_queue_keys(self) -> list[tuple[str, int]]:
        """(topic, queue_id) of every batch queue the store holds, sorted."""
        return [] if self._batch_queues is None else sorted(self._batch_queues.queues())

    def is_batch_queue(self, topic: str, queue_id: int) -> bool:
        """True when reads of (topic, queue_id) go to a batch queue: the store hosts batch queues
        and topics.json makes the topic a batch topic (as `MessageStore` decides)."""
        return self._batch_queues is not None and self._is_batch_topic(topic)

    def _all_queues(self) -> "AllQueues":
        """Ordinary and batch queues behind one reader (the admin views' numbers)."""
        return AllQueues(self._consume_queues, self._batch_queues, self._is_batch_topic)

    def served_queue_keys(self) -> list[tuple[str, int]]:
        """(topic, queue_id) of every queue the store serves, sorted: its consume queues and
        [5.x] the batch queues of batch topics (the facade's `queues()` lists the former only)."""
        keys = set(self._consume_queues.queues())
        keys.update(key for key in self.batch_queue_keys() if self._is_batch_topic(key[0]))
        return sorted(keys)

    def served_unit(self, topic: str, queue_id: int, queue_offset: int):
        """The unit a read of `queue_offset` uses: a `CqUnit`, or on a batch topic the `BatchCqUnit`
        holding that message; None when there is none. Both have `phy_offset` and `size`."""
        return self._all_queues().get_unit(topic, queue_id, queue_offset)

    def _batch_queue(self, topic: str, queue_id: int):
        return None if self._batch_queues is None else self._batch_queues.queue(topic, queue_id)

    # -- queues ----------------------------------------------------------------------------------

    def batch_queues(self) -> list[BatchQueueView]:
        """Every batch queue, sorted by topic and queue id."""
        views = []
        for topic, queue_id in self.batch_queue_keys():
            view = self.batch_queue(topic, queue_id)
            if view is not None:
                views.append(view)
        return views

    def batch_queue(self, topic: str, queue_id: int) -> BatchQueueView | None:
        """One batch queue, or None when the store holds no batch queue (topic, queue_id)."""
        queue = self._batch_queue(topic, queue_id)
        if queue is None:
            return None
        files = list(queue.mapped_files.files)
        units = sum(mapped.read_position // BATCH_CQ_UNIT_SIZE for mapped in files)
        first = queue.get_unit(queue.min_offset()) if queue.min_offset() >= 0 else None
        last = queue.get_unit(queue.max_offset() - 1) if queue.max_offset() > 0 else None
        return BatchQueueView(
            topic, queue_id, queue.mapped_files.directory,
            tuple(os.path.basename(mapped.path) for mapped in files),
            queue.mapped_files.file_size_bytes, units, queue.min_offset(), queue.max_offset(),
            self._is_batch_topic(topic), self._record_time(first), self._record_time(last))

    def _record_time(self, unit) -> int:
        if unit is None:
            return -1
        return self._commit_log.store_timestamp_at(unit.phy_offset, unit.size)

    # -- units -----------------------------------------------------------------------------------

    def batch_units(self, topic: str, queue_id: int, queue_offset: int,
                    max_units: int = 20) -> BatchUnitsPage:
        """Up to `max_units` (at most MAX_UNITS_PER_PAGE) units from the one holding message
        `queue_offset`, following the files. Raises StoreError naming the queue's directory when
        there is no such batch queue or no unit holds that offset (RocketMQ: "Index %d of %d@%s is
        not exist!")."""
        view = self.batch_queue(topic, queue_id)
        directory = os.path.join(self.config.batch_consume_queue_dir, topic, str(queue_id))
        if view is None:
            raise StoreError(f"{directory}: no batch consume queue {topic}/{queue_id} in this store")
        if not 1 <= max_units <= MAX_UNITS_PER_PAGE:
            raise StoreError(f"units per page must be 1..{MAX_UNITS_PER_PAGE}, got {max_units}")
        if view.min_offset < 0 or view.units == 0:
            raise StoreError(f"{directory}: no unit holds message offset {queue_offset}; the queue "
                             f"has no units")
        if not view.min_offset <= queue_offset < view.max_offset:
            raise StoreError(f"{directory}: no unit holds message offset {queue_offset}; the queue "
                             f"holds messages [{view.min_offset}, {view.max_offset})")
        queue = self._batch_queue(topic, queue_id)
        files = list(queue.mapped_files.files)
        start = _locate(files, queue_offset)
        if start is None:
            raise StoreError(f"{directory}: no unit holds message offset {queue_offset}")
        out: list[BatchUnitView] = []
        more = False
        file_index, unit_index = start
        for mapped in files[file_index:]:           # bounded by the file count and max_units
            count = mapped.read_position // BATCH_CQ_UNIT_SIZE
            for index in range(unit_index, count):
                if len(out) == max_units:
                    more = True
                    break
                position = index * BATCH_CQ_UNIT_SIZE
                raw = bytes(mapped.buffer[position:position + BATCH_CQ_UNIT_SIZE])
                out.append(self._unit_view(topic, queue_id, os.path.basename(mapped.path),
                                           position, raw))
            if more:
                break
            unit_index = 0
        return BatchUnitsPage(view, queue_offset, tuple(out), more)

    def _unit_view(self, topic: str, queue_id: int, file_name: str, position: int,
                   raw: bytes) -> BatchUnitView:
        unit = np.frombuffer(raw, dtype=BATCH_CQ_UNIT_DTYPE, count=1)[0]
        phy, size = int(unit["phy_offset"]), int(unit["size"])
        base, batch = int(unit["msg_base_offset"]), int(unit["batch_size"])
        segment = self.segment_holding(phy) if phy >= 0 else None
        record = self._record_check(topic, queue_id, phy, size, base, batch)
        return BatchUnitView(file_name, position, raw, phy, size, int(unit["tags_code"]),
                             int(unit["store_timestamp"]), base, batch,
                             int(unit["compacted_offset"]), int(unit["reserved"]),
                             None if segment is None else segment.name,
                             None if segment is None else phy - segment.file_from_offset, **record)

    def _record_check(self, topic, queue_id, phy, size, base, batch) -> dict:
        """The record at `phy` judged as `store.check.batch` judges it."""
        out = {"record_topic": None, "record_queue_id": None, "record_queue_offset": None,
               "record_store_timestamp": None, "record_inner_base": None,
               "record_inner_num": None, "problems": ()}
        log_min = self._commit_log.min_offset()
        if phy < log_min:
            out["problems"] = (f"phy {phy} is below the log's min offset {log_min} (expired)",)
            return out
        record_size = self._commit_log.record_size_at(phy)
        raw = None if record_size is None else self._commit_log.read(phy, record_size)
        result = None if raw is None else record_check.check_message(
            raw, 0, check_crc=True, limit=len(raw))
        if result is None or result.kind != record_check.CHECK_RECORD:
            out["problems"] = (f"phy {phy} is not the start of a record that passes RocketMQ's "
                               f"check (checkMessageAndReturnSize, with CRC)",)
            return out
        request = result.request
        properties = request.properties or {}
        out.update(record_topic=request.topic, record_queue_id=request.queue_id,
                   record_queue_offset=request.consume_queue_offset,
                   record_store_timestamp=request.store_timestamp,
                   record_inner_base=properties.get(PROPERTY_INNER_BASE),
                   record_inner_num=properties.get(PROPERTY_INNER_NUM),
                   problems=tuple(record_problems(result, topic, queue_id, size, base, batch)))
        return out

    # -- check -----------------------------------------------------------------------------------

    def batch_findings(self, topic: str, queue_id: int, *,
                       max_units: int = MAX_CHECK_UNITS) -> list[Finding]:
        """The store check's findings (`store.check.batch`) on the files of one batch queue. The
        check reads the files as stored (units recovery hid included) against the commit log; it
        walks batch queues in name order and stops after `max_units` units of the store."""
        directory = os.path.join(self.config.batch_consume_queue_dir, topic, str(queue_id))
        sink = Sink(MAX_FINDINGS, self.config.store_path_root_dir)
        directories = [self.log_dir()] if self.is_dledger else list(self.config.commit_log_dirs)
        with CommitLogView(directories, self.config.mapped_file_size_commit_log) as view:
            scan = LogScan(min_offset=self._commit_log.min_offset())
            check_batch_queues(self.config.store_path_root_dir,
                               self.config.mapper_file_size_batch_consume_queue, view, scan, sink,
                               max_units=max_units)
        prefix = directory + os.sep
        found = [finding for finding in sink.result()
                 if finding.path is not None and (finding.path == directory or
                                                  finding.path.startswith(prefix))]
        total = sum(view.units for view in self.batch_queues())
        if total > max_units or sink.full:
            found.append(Finding("info", "consumequeue", directory, None,
                                 f"the check stopped early (at most {max_units} units of the "
                                 f"store's {total} batch units, {MAX_FINDINGS} findings): units "
                                 f"past that were not checked"))
        return found


def record_problems(result, topic: str, queue_id: int, size: int, base: int, batch: int) -> list[str]:
    """What is wrong with a unit (`size`, msgBaseOffset `base`, batchSize `batch`) of queue
    (topic, queue_id) given RocketMQ's check of the record at its phyOffset (`CheckResult`), by
    `store.check.batch`'s rules; [] when nothing is."""
    if result is None or result.kind != record_check.CHECK_RECORD:
        return ["phyOffset is not the start of a record that passes RocketMQ's check "
                "(checkMessageAndReturnSize, with CRC)"]
    request = result.request
    properties = request.properties or {}
    inner_base, inner_num = properties.get(PROPERTY_INNER_BASE), properties.get(PROPERTY_INNER_NUM)
    problems = []
    if result.size != size:
        problems.append(f"size {size} but the record is {result.size} bytes")
    if (request.topic, request.queue_id) != (topic, queue_id):
        problems.append(f"the record belongs to {request.topic}/{request.queue_id}")
    if inner_base is not None and inner_base != str(base):
        problems.append(f"msgBaseOffset {base} but the record's INNER_BASE is {inner_base}")
    if inner_num is not None and inner_num != str(batch):
        problems.append(f"batchSize {batch} but the record's INNER_NUM is {inner_num}")
    return problems


def _locate(files, queue_offset: int) -> tuple[int, int] | None:
    """(file index, unit index) of the unit holding message `queue_offset`: the last file whose
    first base is <= it, then the last unit there with base <= it (`getBatchMsgIndexBuffer`)."""
    for file_index in range(len(files) - 1, -1, -1):     # bounded by the file count
        mapped = files[file_index]
        count = mapped.read_position // BATCH_CQ_UNIT_SIZE
        if count == 0:
            continue
        units = np.frombuffer(mapped.buffer, dtype=BATCH_CQ_UNIT_DTYPE, count=count)
        if int(units[0]["msg_base_offset"]) <= queue_offset:
            return file_index, search_msg_offset(units["msg_base_offset"], queue_offset)
    return None


class AllQueues:
    """The consume queues an admin view reads: a batch topic's queues from its batch queues (offsets
    in messages), every other topic's from the consume-queue store, as the facade serves them.
    Offers the consume-queue store's reading methods the admin views use."""

    def __init__(self, consume_queues, batch_queues, is_batch_topic):
        self._cq = consume_queues
        self._batch = batch_queues
        self._is_batch_topic = is_batch_topic

    def _batch_of(self, topic: str, queue_id: int):
        """False: not a batch queue; else its BatchConsumeQueue (None before its first unit)."""
        if self._batch is None or not self._is_batch_topic(topic):
            return False
        return self._batch.queue(topic, queue_id)

    def queues(self) -> list[tuple[str, int]]:
        keys = set(self._cq.queues())
        if self._batch is not None:
            keys.update(self._batch.queues())
        return sorted(keys)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        batch = self._batch_of(topic, queue_id)
        if batch is False:
            return self._cq.get_min_offset(topic, queue_id)
        if batch is None:
            return 0
        low = batch.min_offset()            # -1 for a queue without units: shown as empty
        return low if low >= 0 else batch.max_offset()

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        batch = self._batch_of(topic, queue_id)
        if batch is False:
            return self._cq.get_max_offset(topic, queue_id)
        return 0 if batch is None else batch.max_offset()

    def get_unit(self, topic: str, queue_id: int, queue_offset: int):
        """A unit with `phy_offset` and `size`: for a batch queue the one holding the message."""
        batch = self._batch_of(topic, queue_id)
        if batch is False:
            return self._cq.get_unit(topic, queue_id, queue_offset)
        return None if batch is None else batch.get_unit(queue_offset)

    def batch_bytes(self, topic: str, queue_id: int) -> int | None:
        """Sum of the record sizes of a batch queue's units (None: not a batch queue)."""
        batch = self._batch_of(topic, queue_id)
        if batch is False:
            return None
        if batch is None:
            return 0
        return sum(int(np.frombuffer(mapped.buffer, dtype=BATCH_CQ_UNIT_DTYPE,
                                     count=mapped.read_position // BATCH_CQ_UNIT_SIZE)["size"]
                       .astype("int64").sum()) for mapped in list(batch.mapped_files.files))
