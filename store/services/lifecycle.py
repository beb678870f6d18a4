"""The store's background services, started and stopped in RocketMQ's order.

Start (spec §11.1 step 8): dispatch catches up with the commit log before the store accepts work, the
queue-offset table is rebuilt, the services start, the `abort` file is created. Shutdown: stop taking
work, commit (transient pool), drain dispatch, flush the commit log, consume queues and index, write the
checkpoint and the consumer offsets, and delete `abort` only when dispatch had caught up.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from store.api import PutMessageStatus
from store.commitlog.put_path import parse_delay_levels
from store.consumequeue.batch.dispatch import BatchRouter
from store.consumequeue.lmq import MultiDispatcher
from store.meta.lockfile import create_abort, delete_abort
from store.recovery.commitlog_recovery import WALK_BLANK, WALK_RECORD, WALK_ROWS, rows_end, walk_log
from store.recovery.loader import rebuild_queue_offset_table
from store.mappedfile.mapped_file_queue import MappedFileQueue
from store.services.allocate import AllocateMappedFileService
from store.recovery.segment_reader import PageReleaser
from store.services.cleanup import CleanupService
from store.services.dispatch import ConsumeQueueDispatcher, IndexDispatcher, ReputService
from store.services.flush import (AsyncFlushService, CommitService, ConsumeQueueFlushService,
                                  GroupCommitService, TransientStorePool)
from store.services.long_polling import PullRequestHoldService
from store.services.prefault import PrefaultService, prefault_supported
from store.services.schedule import build_schedule_service
from store.services.timer import build_timer_service

log = logging.getLogger(__name__)


class StoreServices:
    """The background services of one store, started and stopped in RocketMQ's order.

    Built from the store's parts (`store.recovery.loader.StoreParts`), never from the facade: what it
    needs of the facade comes in as a callable (`confirm_offset_of`, RocketMQ's confirm offset, which
    depends on the format and the flush mode).
    """

    def __init__(self, parts, *, confirm_offset_of):
        self.parts = parts
        self._confirm_offset_of = confirm_offset_of
        cfg = parts.config
        self.sync_flush = cfg.flush_disk_type == "SYNC_FLUSH"
        self.hold = PullRequestHoldService()
        multi = MultiDispatcher(parts.commit_log.read, enable_lmq=cfg.enable_lmq) \
            if cfg.enable_multi_dispatch else None          # [5.x] LMQ units (enableMultiDispatch)
        batch = BatchRouter(parts.batch_queues, parts.topics.is_batch_topic, parts.commit_log.read) \
            if parts.batch_queues is not None and not parts.read_only else None
        dispatchers = [ConsumeQueueDispatcher(parts.consume_queues, on_written=self._on_cq_written,
                                              multi_dispatch=multi, batch=batch)]
        if cfg.message_index_enable and parts.index_service is not None:
            dispatchers.append(IndexDispatcher(parts.index_service))
        # SYNC_FLUSH producers wait for each group commit with the GIL released: a lower switch
        # interval there only makes 32 of them trade it more often (gil_handoff's docstring).
        self.reput = ReputService(parts.commit_log, dispatchers,
                                  delay_levels_ms=parse_delay_levels(cfg.message_delay_level),
                                  handoff_gil=not self.sync_flush)
        self.reput.add_listener(self.hold.on_arrival, wants=self.hold.holds)
        self.pool = None
        self.commit_service = None
        self.flush_service = None
        self.cq_flush_service = None
        self.allocator = None
        self.prefault = None
        self.cleanup = CleanupService(parts, reput_offset_of=lambda: self.reput.reput_offset)
        # Delay levels (4.9 format, writable): ScheduleMessageService, store/services/schedule.py.
        self.schedule = build_schedule_service(parts, after_append=self.after_append, may_put=lambda: (
            cfg.broker_role != "SLAVE" and not self.cleanup.disk_full))
        # [5.x] timer messages (timerWheelEnable, writable): TimerService, store/services/timer.py.
        self.timer = build_timer_service(parts, after_append=self.after_append, may_put=lambda: (
            cfg.broker_role != "SLAVE" and not self.cleanup.disk_full))
        self.started = False
        self._offsets_timer: threading.Timer | None = None
        self._stop = threading.Event()
        if parts.read_only:
            return
        queue = parts.commit_log.mapped_files
        if cfg.transient_store_pool_enable and not self.sync_flush:
            self.pool = TransientStorePool(cfg.transient_store_pool_size,
                                           cfg.mapped_file_size_commit_log)
            queue.write_buffer_pool = self.pool
            self.commit_service = CommitService(
                queue, self.pool, commit_interval_ms=cfg.commit_interval_commit_log,
                commit_least_pages=cfg.commit_commit_log_least_pages,
                commit_thorough_interval_ms=cfg.commit_commit_log_thorough_interval,
                on_committed=self._on_committed)
        # The commit log's segments (not DLedger's). Not with the transient store pool (yet): the
        # crash test that once pointed at the service there (a batch partly visible) failed
        # without it too; the cause was MappedFile.commit's copy order, fixed since, but the
        # service has not been through the pool's crash tests on its own.
        if type(queue) is MappedFileQueue and self.pool is None:
            self.allocator = AllocateMappedFileService(
                queue, warm=cfg.warm_maped_file_enable,
                warm_sync_pages=cfg.flush_least_pages_when_warm_maped_file if self.sync_flush else 0)
        # Page faults of the segment being written, taken on a thread of their own (prefault.py);
        # not under SYNC_FLUSH, whose group commits would write the zero pages ahead to disk.
        self.prefault = PrefaultService(queue) if self.allocator is not None and \
            not self.sync_flush and prefault_supported() else None
        last_ts = lambda: parts.commit_log.last_store_timestamp  # noqa: E731
        if self.sync_flush:
            self.flush_service = GroupCommitService(queue, last_store_timestamp=last_ts,
                                                    on_flushed=self._on_flushed)
            if type(queue) is MappedFileQueue and self.pool is None:
                queue.use_pwrite_records()  # no map page a sync write-protects (MappedFile)
            if isinstance(queue, MappedFileQueue):   # one way to sync: the group commit's
                queue.set_ranged_sync(False)
        else:
            self.flush_service = AsyncFlushService(
                queue, flush_interval_ms=cfg.flush_interval_commit_log,
                flush_least_pages=cfg.flush_commit_log_least_pages,
                flush_thorough_interval_ms=cfg.flush_commit_log_thorough_interval,
                last_store_timestamp=last_ts, on_thorough_flush=self._on_flushed)
        self.cq_flush_service = ConsumeQueueFlushService(
            flush_interval_ms=cfg.flush_interval_consume_queue,
            flush_thorough_interval_ms=cfg.flush_consume_queue_thorough_interval,
            flush_consume_queues=self._flush_consume_queues, flush_thorough=self.flush_thorough,
            least_pages=cfg.flush_consume_queue_least_pages)

    # -- callbacks -------------------------------------------------------------------------------

    def _on_cq_written(self, store_timestamp: int) -> None:
        self.parts.checkpoint.logics_msg_timestamp = store_timestamp

    def _on_flushed(self, store_timestamp: int) -> None:
        if store_timestamp > 0:
            self.parts.checkpoint.physic_msg_timestamp = store_timestamp

    def _on_committed(self) -> None:
        if self.flush_service is not None:
            self.flush_service.wakeup()

    def _flush_consume_queues(self, least_pages: int) -> None:
        self.parts.consume_queues.flush(least_pages)
        if self.parts.batch_queues is not None:
            self.parts.batch_queues.flush(least_pages)

    def flush_thorough(self) -> None:
        """Flush consume queues and index, then write the checkpoint (logics time captured first,
        so the checkpoint never claims more than is durable)."""
        parts = self.parts
        logics = parts.checkpoint.logics_msg_timestamp
        parts.consume_queues.flush(0)
        if parts.batch_queues is not None:
            parts.batch_queues.flush(0)
        if parts.index_service is not None:
            parts.index_service.flush()
        parts.checkpoint.logics_msg_timestamp = logics
        if parts.style == "5.x":
            parts.checkpoint.confirm_phy_offset = max(0, self._confirm_offset_of())
        parts.checkpoint.flush()

    # -- lifecycle -------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Catch dispatch up with the recovered commit log (synchronously), as RocketMQ's start."""
        parts = self.parts
        if parts.read_only:
            self.reput.reput_offset = parts.commit_log.max_offset()
            return
        self.reput.reput_offset = parts.recovery.dispatch_from
        before = self.reput.dispatched_records
        self._catch_up()
        report = parts.recovery
        report.redispatched_records = self.reput.dispatched_records - before
        report.redispatched_bytes = self.reput.reput_offset - report.dispatch_from
        if parts.style == "4.9" and report.redispatched_records:
            # 4.9.7's start() runs recoverTopicQueueTable again after the reput caught up, and with
            # it ConsumeQueue.correctMinOffset: a queue re-dispatched from its n-th record (pre-fill
            # units first, phy offset 0) may get its min offset moved back over them.
            parts.consume_queues.correct_min_offset(parts.commit_log.min_offset())
        if report.redispatched_records:
            report.step("dispatch", f"re-dispatched {report.redispatched_records} records "
                                    f"({report.redispatched_bytes} bytes) from {report.dispatch_from}")
        rebuild_queue_offset_table(parts.commit_log, parts.consume_queues, parts.batch_queues)
        if self.schedule is not None:
            self.schedule.load()    # after dispatch caught up: offsets are clamped to the queues
        if self.timer is not None:
            self.timer.load()       # after dispatch caught up: recovery reads its consume queue

    def _catch_up(self) -> None:
        """Dispatch everything readable (`do_reput`) a few MiB at a time, dropping the mapped pages
        of the log it has passed (`PageReleaser`): after a crash that is the whole verified log, and
        the process's resident memory must not grow with it."""
        reput = self.reput
        releaser = PageReleaser(self.parts.commit_log)
        releaser.below(reput.reput_offset)
        while True:
            before, bound = reput.reput_offset, releaser.next_bound()
            reput.do_reput(until=bound)
            releaser.below(reput.reput_offset)
            if reput.reput_offset == before:
                if bound is not None:
                    reput.do_reput()     # stopped short of the bound: as far as dispatch can go
                return

    def start(self) -> None:
        parts = self.parts
        if parts.read_only or self.started:
            return
        self.reput.start()
        for service in (self.commit_service, self.flush_service, self.cq_flush_service,
                        self.prefault):
            if service is not None:
                service.start()
        if self.allocator is not None:
            self.allocator.start()
            parts.commit_log.mapped_files.allocator = self.allocator
        self.cleanup.start()
        if self.schedule is not None and parts.config.broker_role != "SLAVE":
            self.schedule.start()
        if self.timer is not None and parts.config.broker_role != "SLAVE":
            self.timer.start()
        self._schedule_offsets_persist()
        create_abort(parts.config.store_path_root_dir, parts.style)
        self.started = True

    def _schedule_offsets_persist(self) -> None:
        interval_s = self.parts.config.flush_consumer_offset_interval / 1000.0

        def persist() -> None:
            if self._stop.is_set():
                return
            try:
                self.parts.consumer_offsets.persist()
            except OSError:
                log.exception("persisting consumer offsets failed")
            self._schedule_offsets_persist()

        self._offsets_timer = threading.Timer(interval_s, persist)
        self._offsets_timer.daemon = True
        self._offsets_timer.start()

    def after_append(self, appended, messages) -> PutMessageStatus:
        """Acknowledge a put: SYNC_FLUSH waits for the group commit; ASYNC returns at once."""
        if self.commit_service is not None:
            self.commit_service.wakeup()
        if not self.sync_flush or not self.started:
            return PutMessageStatus.PUT_OK
        if any((m.properties or {}).get("WAIT") == "false" for m in messages):
            self.flush_service.wakeup()
            return PutMessageStatus.PUT_OK
        flushed = self.flush_service.wait_flushed(appended.wrote_offset + appended.wrote_bytes,
                                                  self.parts.config.sync_flush_timeout)
        return PutMessageStatus.PUT_OK if flushed else PutMessageStatus.FLUSH_DISK_TIMEOUT

    def await_flush(self, result, message):
        """SYNC_FLUSH after `put_fast`'s append: `result` once the group commit covers it, else
        the same with FLUSH_DISK_TIMEOUT (as `after_append` says for the Python path)."""
        status = self.after_append(result, (message,))
        if status is PutMessageStatus.PUT_OK:
            return result
        return dataclasses.replace(result, status=status, error="flush did not complete in time")

    def shutdown(self) -> None:
        parts = self.parts
        self._stop.set()
        if self._offsets_timer is not None:
            self._offsets_timer.cancel()
        self.hold.shutdown()
        if parts.read_only:
            return
        self.cleanup.shutdown()
        if self.timer is not None:
            self.timer.shutdown()   # the broker stops the timer store first
        if self.schedule is not None:
            self.schedule.shutdown()
        if self.commit_service is not None:
            self.commit_service.shutdown()
        if self.prefault is not None:
            self.prefault.shutdown()
        self.reput.shutdown(drain=True)
        if self.flush_service is not None:
            self.flush_service.shutdown()
        if self.cq_flush_service is not None:
            self.cq_flush_service.shutdown()
        if self.allocator is not None:
            parts.commit_log.mapped_files.allocator = None
            self.allocator.shutdown()
        self.flush_thorough()
        parts.consumer_offsets.persist()
        if parts.topics.dirty:
            parts.topics.persist()
        # A clean shutdown: recovered, dispatched to the end, flushed, checkpoint written. That
        # holds for an open without services (recover, clean) too, whose recovery consumed a
        # crash's `abort`: leaving it would make the next open recover abnormally again.
        if self.reput.behind_bytes() == 0:
            delete_abort(parts.config.store_path_root_dir, parts.style)

    def stop_without_flush(self) -> None:
        """Stop every thread without the shutdown work (a simulated crash)."""
        self._stop.set()
        if self._offsets_timer is not None:
            self._offsets_timer.cancel()
        self.hold.shutdown()
        self.cleanup.shutdown()
        if self.schedule is not None:
            self.schedule.stop_quietly()
        if self.timer is not None:
            self.timer.stop_quietly()
        self.reput.shutdown(drain=False)
        for service in (self.commit_service, self.flush_service, self.cq_flush_service,
                        self.allocator, self.prefault):
            if service is not None:
                service.stop_quietly()
        if self.allocator is not None:
            self.parts.commit_log.mapped_files.allocator = None

    # -- read-only following ---------------------------------------------------------------------

    def follow_tail(self) -> int:
        """Extend a read-only view to records a live writer appended since the last look."""
        parts = self.parts
        commit_log = parts.commit_log
        before = commit_log.max_offset()
        # The consume queues and the index first: the writer dispatches a record only once it is in
        # the log, so every unit seen now names a record the walk below reaches. Refreshed after
        # the walk, a unit of a record appended meanwhile named one past this view's end, and a
        # pull skipped it as deleted (a soak's observer did, once the writer's dispatch got faster).
        parts.consume_queues.refresh()
        if parts.index_service is not None:
            parts.index_service.refresh()
        commit_log.mapped_files.refresh()
        end = before
        # The check recovery makes, at least BODYCRC: under forceVerifyPropCRC a record failing its
        # `__CRC32#` ends the view here as it ends the log on recovery (not past it).
        check_crc = parts.config.recovery_crc_mode(parts.style) or True
        for step, where, what in walk_log(commit_log, end, check_crc=check_crc, whole_segments=True):
            if step == WALK_ROWS:
                end = rows_end(where, what)
            elif step == WALK_RECORD:
                end = where + what.size
            elif step == WALK_BLANK:
                what.set_positions(what.file_size_bytes)
                end = what.file_end_offset
            else:
                break
        last = commit_log.mapped_files.find_file(end) or commit_log.mapped_files.find_file(end - 1)
        if last is not None:
            last.set_positions(end - last.file_from_offset)
        commit_log.mapped_files.set_positions(end)
        parts.consume_queues.correct_min_offset(commit_log.min_offset())
        rebuild_queue_offset_table(commit_log, parts.consume_queues, parts.batch_queues)
        self.reput.reput_offset = end
        return end - before
