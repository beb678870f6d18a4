"""Opening a store directory: which format wrote it, and assembling and recovering its parts.

`open_parts` does spec §11.1's load sequence: commit log segments, consume queues, checkpoint, index
files (after an abnormal shutdown, those newer than the checkpoint are dropped), consume-queue recovery,
commit-log recovery, the queue-offset table. A read-only open does the same in memory and writes
nothing: no lock, no abort file, no truncation, no dispatch.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from store.commitlog.commit_log import CommitLog
from store.config import StoreConfig
from store.consumequeue.base import ConsumeQueueSettings
from store.consumequeue.batch.queue_store import BatchQueueStore
from store.consumequeue.factory import open_consume_queue_store
from store.dledger.commit_log import DLedgerCommitLog
from store.dledger.layout import find_data_dir, find_dledger
from store.errors import ConfigError
from store.index.index_service import IndexService
from store.meta.checkpoint import CheckpointFile
from store.meta.config_files import ConsumerOffsetManager
from store.meta.lockfile import StoreLock, abort_exists
from store.meta.topic_config import TopicConfigManager
from store.recovery.commitlog_recovery import RecoveryReport, recover_commit_log
from store.timer.timer_store import TimerReader
from store.timer.timer_writer import refuse_unusable_files as refuse_unusable_timer_files

FORMAT_49 = "4.9"
FORMAT_5X = "5.x"


def resolve_store_format(config: StoreConfig) -> str:
    """The format a store is read and written in: `storeFormat` as configured, or when it is "auto"
    the one that wrote the directory (`detect_store_format`)."""
    if config.store_format != "auto":
        return config.store_format
    return detect_store_format(config.store_path_root_dir, config.commit_log_dir)


def detect_store_format(root: str, commit_log_dir: str) -> str:
    """Which RocketMQ line wrote `root`: "5.x" if any 5.x-only trace is present, else "4.9".

    Traces (fixtures README): abort.bak, compaction/, dataVersion in consumerOffset.json, a pid in the
    abort file, and a properties string ending with the separator in the first record.
    """
    if os.path.exists(os.path.join(root, "abort.bak")) or \
            os.path.isdir(os.path.join(root, "compaction")):
        return FORMAT_5X
    offsets_path = os.path.join(root, "config", "consumerOffset.json")
    try:
        with open(offsets_path, "rb") as handle:
            if b'"dataVersion"' in handle.read(1 << 20):
                return FORMAT_5X
    except OSError:
        pass
    try:
        with open(os.path.join(root, "abort"), "rb") as handle:
            if handle.read(64).strip().isdigit():
                return FORMAT_5X
    except OSError:
        pass
    if _first_record_has_trailing_separator(commit_log_dir):
        return FORMAT_5X
    dledger_data = find_data_dir(root)      # a DLedger log: the record follows a 48-byte header
    if dledger_data and _first_record_has_trailing_separator(dledger_data, 48):
        return FORMAT_5X
    return FORMAT_49


def _first_record_has_trailing_separator(commit_log_dir: str, skip: int = 0) -> bool:
    from store.codec.record_check import CHECK_RECORD, check_message
    try:
        names = sorted(n for n in os.listdir(commit_log_dir) if n.isdigit() and len(n) == 20)
    except OSError:
        return False
    for name in names[:1]:
        with open(os.path.join(commit_log_dir, name), "rb") as handle:
            head = handle.read(1 << 16)[skip:]
        result = check_message(head, 0, check_crc=False, limit=len(head))
        if result.kind == CHECK_RECORD:
            # The properties are a record's last bytes; a 5.x writer ends them with \x02 (a record
            # without properties ends with its 2-byte zero length instead).
            return head[:result.size].endswith(b"\x02")
    return False


@dataclass
class StoreParts:
    config: StoreConfig
    style: str
    read_only: bool
    commit_log: CommitLog
    consume_queues: object
    index_service: IndexService | None
    checkpoint: CheckpointFile
    consumer_offsets: ConsumerOffsetManager
    topics: TopicConfigManager
    lock: StoreLock | None
    last_exit_ok: bool
    recovery: RecoveryReport
    timer: TimerReader | None = None      # 5.x: the timer store's files, read-only, on first use
    batch_queues: BatchQueueStore | None = None   # 5.x: batchconsumequeue/ (BatchConsumeQueue)


def open_parts(config: StoreConfig, *, read_only: bool, clock_ms=None,
               rebuild_queues=()) -> StoreParts:
    """Load and recover every part of the store (nothing is started). `rebuild_queues`: (topic,
    queue_id) pairs whose consume queue a writable open rebuilds from the log's first record
    (`rmqstore recover --rebuild-cq`; RocketMQ itself never does, see `_plan_dispatch`)."""
    clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
    root = config.store_path_root_dir
    if read_only and not os.path.isdir(root):
        raise ConfigError(f"store directory {root!r} does not exist")
    if not read_only:
        os.makedirs(root, exist_ok=True)
    style = resolve_store_format(config)
    if not read_only and style == FORMAT_5X and config.timer_wheel_enable:
        refuse_unusable_timer_files(root)     # before anything is written, as the broker
    lock = None
    if not read_only:
        lock = StoreLock(root)
        lock.acquire()
    opened = []
    try:
        last_exit_ok = not abort_exists(root)
        dledger = find_dledger(config)      # enableDLegerCommitLog: store/dledger/
        commit_log = CommitLog(config.commit_log_dir, config.mapped_file_size_commit_log,
                               read_only=read_only, store_host=config.store_host,
                               clock_ms=clock_ms) if dledger is None else DLedgerCommitLog(
            dledger, read_only=read_only, store_host=config.store_host, clock_ms=clock_ms)
        commit_log.mapped_files.allow_empty_last_file = True
        commit_log.mapped_files.warm_new_files = config.warm_maped_file_enable
        commit_log.mapped_files.load()
        opened.append(commit_log.mapped_files)
        consume_queues = open_consume_queue_store(ConsumeQueueSettings(
            root_dir=root, file_size_bytes=config.mapped_file_size_consume_queue,
            store_type=config.store_type, read_only=read_only, style=style))
        consume_queues.load()
        opened.append(consume_queues)
        batch_queues = None
        if style == FORMAT_5X and config.store_type == "default":
            batch_queues = BatchQueueStore(config.batch_consume_queue_dir,
                                           config.mapper_file_size_batch_consume_queue,
                                           read_only=read_only)
            batch_queues.load()
            opened.append(batch_queues)
        checkpoint = CheckpointFile(config.checkpoint_path, read_only=read_only, style=style)
        checkpoint.load()
        index_service = IndexService(config.index_dir, config.max_hash_slot_num,
                                     config.max_index_num, read_only=read_only, clock_ms=clock_ms,
                                     on_file_full=_index_file_full_callback(checkpoint),
                                     max_msgs_num_batch=config.max_msgs_num_batch)
        index_service.load(last_exit_ok, checkpoint.index_msg_timestamp)
        opened.append(index_service)
        report = _recover(config, style, read_only, last_exit_ok, commit_log, consume_queues,
                          checkpoint, rebuild_queues, batch_queues)
        consumer_offsets = ConsumerOffsetManager(config.config_dir, read_only=read_only, style=style)
        consumer_offsets.load()
        topics = TopicConfigManager(config.config_dir, read_only=read_only, style=style,
                                    clock_ms=clock_ms)
        topics.load()
    except BaseException:
        for part in reversed(opened):
            part.close()
        if lock is not None:
            lock.release()
        raise
    timer = TimerReader.for_store(config, commit_log.read_record, consume_queues, clock_ms) \
        if style == FORMAT_5X and config.timer_wheel_enable else None
    return StoreParts(config, style, read_only, commit_log, consume_queues, index_service,
                      checkpoint, consumer_offsets, topics, lock, last_exit_ok, report, timer,
                      batch_queues)


def _recover(config: StoreConfig, style: str, read_only: bool, last_exit_ok: bool,
             commit_log: CommitLog, consume_queues, checkpoint: CheckpointFile,
             rebuild_queues=(), batch_queues=None) -> RecoveryReport:
    """Spec §11.1's recovery steps on the loaded parts: the consume queues, then the commit log
    (normal or abnormal) against them, cutting queues past the log's end, planning the rebuild of
    missing ones, the min offsets and the queue-offset table."""
    cq_max_phy_offset = consume_queues.recover()
    if batch_queues is not None:       # ConsumeQueueStore.getMaxPhyOffsetInConsumeQueue: every queue
        cq_max_phy_offset = max(cq_max_phy_offset, batch_queues.recover())
    min_timestamp = checkpoint.min_timestamp_index if (
        config.message_index_enable and config.message_index_safe) else checkpoint.min_timestamp
    if isinstance(commit_log, DLedgerCommitLog):
        report = RecoveryReport(mode="read-only" if read_only else (
            "normal" if last_exit_ok else "abnormal"), cq_max_phy_offset=cq_max_phy_offset)
        commit_log.recover_dledger(report, abnormal=not last_exit_ok, read_only=read_only,
                                   check_crc=config.recovery_crc_mode(style),
                                   cq_max_phy_offset=cq_max_phy_offset, min_timestamp=min_timestamp)
    else:
        report = recover_commit_log(
            commit_log, abnormal=not last_exit_ok, read_only=read_only, style=style,
            check_crc=config.recovery_crc_mode(style), cq_max_phy_offset=cq_max_phy_offset,
            min_timestamp=min_timestamp, rocksdb_mode=config.store_type == "defaultRocksDB")
    if batch_queues is not None and not read_only:   # units whose record starts past the end
        batch_queues.truncate_dirty(report.process_offset)
    if report.consume_queues_truncated and not read_only:
        consume_queues.truncate_dirty(report.process_offset)
        if cq_max_phy_offset > report.process_offset:
            report.step("consume queues", f"cut consume queues at {report.process_offset}: they "
                                          f"referenced the log up to {cq_max_phy_offset}")
    if not read_only:
        _plan_dispatch(report, style, last_exit_ok, commit_log, consume_queues, cq_max_phy_offset,
                       rebuild_queues)
    if style == FORMAT_5X and report.records_checked and not isinstance(commit_log,
                                                                        DLedgerCommitLog):
        # 5.x recovery records the start of the last valid record as the confirm offset
        # (DLedgerCommitLog.setConfirmOffset does nothing).
        checkpoint.confirm_phy_offset = report.last_record_offset
    consume_queues.correct_min_offset(commit_log.min_offset())
    if batch_queues is not None:       # recoverOffsetTable: correctMinOffset on batch queues too
        batch_queues.correct_min_offset(commit_log.min_offset())
    rebuild_queue_offset_table(commit_log, consume_queues, batch_queues)
    return report


def _plan_dispatch(report: RecoveryReport, style: str, last_exit_ok: bool, commit_log,
                   consume_queues, cq_max_phy_offset: int, rebuild_queues) -> None:
    """Where the writable open's dispatch starts, as RocketMQ's restart decides it, so that a
    consume queue that is missing or short comes back with only what RocketMQ re-dispatches.

    After a crash (both lines): `CommitLog.recoverAbnormally` dispatches every valid record from
    the segment `isMappedFileMatchedRecover` picks (`report.dispatch_from` is its start already).
    After a clean shutdown:
    - 4.9.7: `recoverNormally` dispatches nothing; `DefaultMessageStore.start` sets the reput
      offset to the largest `ConsumeQueue.getMaxPhysicOffset` (end of a queue's last unit) over all
      queues, at least `commitLog.getMinOffset()` (the recovery's own `dispatch_from`);
    - 5.3.3: `recoverNormally(maxPhyOffsetOfConsumeQueue)` dispatches the records whose
      `getCommitLogOffset() > maxPhyOffsetOfConsumeQueue` (so not one starting exactly there), and
      `start` reputs from `getConfirmOffset()`, which is the log's end (`getMaxOffset`, ASYNC_FLUSH;
      `getFlushedWhere` = the same after recovery, SYNC_FLUSH; `recheckReputOffsetFromCq` is off);
      `DLedgerCommitLog.dledgerRecoverNormally` dispatches nothing and its confirm offset is its
      max offset: a lost queue stays lost.
    A queue re-dispatched from its n-th record gets `ConsumeQueue.fillPreBlank` units before it
    (minLogicOffset there; 4.9.7's `correctMinOffset` at `start` may move min back over them).

    `rebuild_queues` (the `rmqstore recover --rebuild-cq` repair, never RocketMQ) are rebuilt from
    the log's first record: dispatch starts at the log's min offset (queues that already hold a
    record skip it, `putMessagePositionInfo`'s maxPhysicOffset rule)."""
    from store.recovery.commitlog_recovery import find_queues_to_rebuild
    if last_exit_ok and style == FORMAT_5X:
        if isinstance(commit_log, DLedgerCommitLog):
            report.dispatch_from = commit_log.max_offset()
        elif report.dispatch_from == cq_max_phy_offset:
            size = commit_log.record_size_at(cq_max_phy_offset)
            if size and cq_max_phy_offset + size <= report.process_offset:
                report.dispatch_from += size       # not > maxPhyOffsetOfConsumeQueue
    missing = find_queues_to_rebuild(report, consume_queues)
    asked = sorted(set(rebuild_queues))
    kept = [queue for queue in asked if consume_queues.get_max_offset(*queue) > 0]
    if kept:      # units already there would make dispatch skip every earlier record
        raise ConfigError(f"cannot rebuild {_names(kept)}: the consume queue still has units; move "
                          f"its files aside first (rmqstore recover --rebuild-cq does)")
    if asked:
        report.rebuilt_queues = asked
        report.dispatch_from = commit_log.min_offset()
        report.step("consume queues", f"rebuilding {_names(asked)} from the log's first record "
                                      f"({report.dispatch_from}), as asked")
    incomplete = [queue for queue in missing if queue not in asked]
    if incomplete:
        report.incomplete_queues = incomplete
        report.step("consume queues", f"missing or short: {_names(incomplete)}; like RocketMQ, "
                                      f"dispatch starts at {report.dispatch_from}: units of "
                                      f"earlier records stay missing (rmqstore recover "
                                      f"--rebuild-cq TOPIC/QUEUE rebuilds them)")


def _names(queues) -> str:
    names = ", ".join(f"{topic}/{queue_id}" for topic, queue_id in queues[:10])
    return names + (f" and {len(queues) - 10} more" if len(queues) > 10 else "")


def _index_file_full_callback(checkpoint: CheckpointFile):
    """Spec §5.7: once a full index file is flushed, the checkpoint learns its end time."""
    def on_file_full(end_timestamp: int) -> None:
        checkpoint.index_msg_timestamp = end_timestamp
    return on_file_full


def rebuild_queue_offset_table(commit_log: CommitLog, consume_queues, batch_queues=None) -> None:
    """Spec §11.5: the next queue offset of every queue is its consume queue's max offset (a batch
    queue's: its max message offset, `ConsumeQueueStore.recoverOffsetTable`'s bcqOffsetTable)."""
    table = {}
    for topic, queue_id in consume_queues.queues():
        table[(topic, queue_id)] = consume_queues.get_max_offset(topic, queue_id)
    for topic, queue_id in batch_queues.queues() if batch_queues is not None else ():
        table[(topic, queue_id)] = batch_queues.queue(topic, queue_id).max_offset()
    commit_log.queue_offsets = table
