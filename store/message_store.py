"""`MessageStore`: the one object the CLI, the dashboard, the pipeline and the tests talk to.

It wires the parts (commit log, consume queues, index, checkpoint, config files) to the services
(dispatch, flush/commit, long polling, cleanup) and offers RocketMQ's store API. It holds no format
logic of its own.
"""

from __future__ import annotations

import dataclasses
import threading

from store.api import GetMessageResult, Message, PutMessageResult, PutMessageStatus
from store.commitlog.commit_log import CommitLog, RecordTooLargeForSegment
from store.commitlog.put_path import (PutRefused, PutSettings, encode_for_put, parse_delay_levels,
                                      validated_now)
from store.commitlog.read_path import (
    TagFilter, TransferLimits, get_message, pull_unfiltered_fast, total_physical_memory_bytes,
)
from store.config import StoreConfig
from store.consumequeue.batch.pull import pull_batch
from store.consumequeue.batch.put import put_batch_topic, refuse_inner_batch
from store.consumequeue.lmq import PROPERTY_INNER_MULTI_QUEUE_OFFSET, LmqOffsets
from store.dledger.commit_log import DLedgerCommitLog
from store.errors import ReadOnlyStoreError, StoreClosedError
from store.inspect.live import StoreInspector
from store.kernel.put_batch import encode_batch
from store.kernel.put_fast import put_fast, put_fast_state, system_clock_ms
from store.lookups import LookupsMixin
from store.recovery.loader import open_parts
from store.services.lifecycle import StoreServices
from store.services.long_polling import pull_with_hold
from store.timer.hook import TimerHookSettings, TimerRefused, rewrite_timer_message


_NO_FILTER = (None, "", "*")    # tag expressions TagFilter.parse reads as "everything"
MAX_NOTED_RANGE = 1024          # _note_topic notes at most this many of a topic's queues at once


class MessageStore(LookupsMixin):
    """A RocketMQ-format message store. Use `MessageStore.open(config)`; close it (or use `with`)."""

    def __init__(self, parts, clock_ms):
        self._parts = parts
        self.config: StoreConfig = parts.config
        self.style = parts.style
        self.read_only = parts.read_only
        self.commit_log = parts.commit_log
        self.consume_queues = parts.consume_queues
        self.index_service = parts.index_service
        self.checkpoint = parts.checkpoint
        self.consumer_offsets = parts.consumer_offsets
        self.topics = parts.topics
        self.recovery_report = parts.recovery
        self.clock_ms = clock_ms
        self.closed = False
        cfg = self.config
        self._put_settings = PutSettings(
            store_host=cfg.store_host, max_message_size=cfg.max_message_size,
            properties_style=self.style,
            allow_v2_records=self.style == "5.x" and cfg.auto_message_version_on_topic_len,
            delay_levels_ms=tuple(parse_delay_levels(cfg.message_delay_level)),
            segment_size_bytes=cfg.mapped_file_size_commit_log,
            # 5.3.3's DLedgerCommitLog encodes records itself and writes no __CRC32# trailer.
            append_prop_crc=self.style == "5.x" and cfg.enabled_append_prop_crc
            and not isinstance(self.commit_log, DLedgerCommitLog))
        # [5.x] the broker's put hook for timer messages (HookUtils.handleScheduleMessage).
        self._timer_hook = TimerHookSettings.from_config(cfg) if self.style == "5.x" else None
        # enableLmq: INNER_MULTI_DISPATCH puts get their %LMQ% queue offsets (consumequeue/lmq.py).
        self._lmq = LmqOffsets(parts.consume_queues.get_max_offset) if cfg.enable_lmq else None
        self._batch_lock = threading.Lock()     # [5.x] batch topics: base offsets in log order
        self._limits = TransferLimits(
            cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory,
            cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk,
            cfg.access_message_in_memory_max_ratio, total_physical_memory_bytes())
        self._units_per_cq_file = cfg.mapped_file_size_consume_queue // 20 \
            if cfg.store_type == "default" else 0       # RocksDB: no files (rollNextFile 0)
        # One native call encodes a put (or a batch), one places it (see CommitLog.append_encoded);
        # not for DLedger's log, which frames records itself.
        self._encode_batch = encode_batch if type(self.commit_log) is CommitLog else None
        # 4.9 style without LMQ: no timer hook, batch topic or LMQ offsets to apply to a put.
        self._plain_puts = self.style != "5.x" and self._lmq is None and parts.batch_queues is None
        self._close_lock = threading.Lock()
        # topic -> its queue ids in topics.json (a set per topic: 16,384 tuples busied the GC)
        self._noted_queues: dict[str, set[int]] = {}
        self.services = StoreServices(parts, confirm_offset_of=self.confirm_offset)
        self._sync_flush = self.services.sync_flush
        self._put_fast = put_fast_state(self, PutMessageResult, PutMessageStatus.PUT_OK) if \
            put_fast is not None and self._plain_puts and self._encode_batch is not None else None
        # The dashboard, the tour and the CLI read internals only through this (store/inspect/).
        self.inspect = StoreInspector(
            config=self.config, commit_log=self.commit_log, consume_queues=self.consume_queues,
            index_service=self.index_service, recovery_report=self.recovery_report,
            reput=self.services.reput)
        self.inspect.attach_admin(consumer_offsets=parts.consumer_offsets, topic_configs=parts.topics,
                                  checkpoint=parts.checkpoint, cleanup=self.services.cleanup)
        self.inspect.attach_scheduled(service=self.services.schedule)
        self.inspect.attach_batch(parts.batch_queues)     # [5.x] batchconsumequeue/ views

    # -- lifecycle -------------------------------------------------------------------------------

    @classmethod
    def open(cls, config: StoreConfig, read_only: bool = False, *, clock_ms=None,
             start_services: bool = True, rebuild_queues=()) -> "MessageStore":
        """Open (and recover, unless read-only) the store at `config.store_path_root_dir`.
        `rebuild_queues`: (topic, queue_id) pairs to rebuild from the whole log (a repair)."""
        clock = clock_ms or system_clock_ms     # put_fast reads this one's clock itself
        parts = open_parts(config, read_only=read_only, clock_ms=clock,
                           rebuild_queues=rebuild_queues)
        store = cls(parts, clock)
        try:
            store.services.prepare()
            if start_services:
                store.services.start()
        except BaseException:
            store._close_parts()
            raise
        return store

    def close(self) -> None:
        """Clean shutdown: drain dispatch, flush everything, write the checkpoint, drop `abort`."""
        with self._close_lock:
            if self.closed:
                return
            self.closed = True
            try:
                self.services.shutdown()
            finally:
                self._close_parts()

    def crash(self) -> None:
        """Stop as a killed process would: no flush, no checkpoint, `abort` left in place.

        For the dashboard's recovery lab and tests. What was written through the maps stays in the
        page cache (a process crash, not a power cut); the next open runs abnormal recovery.
        """
        with self._close_lock:
            if self.closed:
                return
            self.closed = True
            self.services.stop_without_flush()
            self._close_parts()

    def dispatch_pending(self) -> int:
        """Run dispatch now, in the caller's thread; returns the records dispatched. For tools that
        open the store with start_services=False and want each step to be deterministic."""
        self._check_open()
        if self.read_only:
            return 0
        return self.services.reput.do_reput()

    def deliver_delayed(self) -> int:
        """One pass of delay-level delivery now, in the caller's thread (4.9 format; 0 elsewhere);
        returns the messages delivered. Dispatch the delayed puts first (`dispatch_pending`)."""
        self._check_open()
        schedule = self.services.schedule
        return 0 if schedule is None else schedule.deliver_due()

    def deliver_timers(self) -> int:
        """[5.x] One round of the timer service now, in the caller's thread: enqueue what
        `rmq_sys_wheel_timer` holds, deliver what is due by the store's clock, flush when its interval
        has passed; returns the messages delivered (0 without a timer service). Dispatch first."""
        self._check_open()
        timer = self.services.timer
        return 0 if timer is None else timer.run_once()

    def _timer_slot_num(self, time_ms: int) -> int:
        timer = self.services.timer
        return 0 if timer is None else timer.slot_num(time_ms)

    def _close_parts(self) -> None:
        for part in (self.index_service, self.consume_queues, self._parts.batch_queues):
            if part is not None:
                part.close()
        with self.commit_log.put_lock:  # no put between reading a descriptor and writing it
            self.commit_log.mapped_files.close()
        if self._parts.lock is not None:
            self._parts.lock.release()

    def __enter__(self) -> "MessageStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self.closed:
            raise StoreClosedError("the store is closed")

    # -- write path ------------------------------------------------------------------------------

    def _refuse_writes(self) -> PutMessageResult | None:
        why = ("store is closed" if self.closed else "store is open read-only" if self.read_only
               else "brokerRole is SLAVE: a slave store does not accept puts"
               if self.config.broker_role == "SLAVE"
               else "disk usage is above the warning level; puts are refused"
               if self.services.cleanup.disk_full else None)
        return None if why is None else \
            PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error=why)

    def put_message(self, message: Message) -> PutMessageResult:
        """Append one message; returns where it landed, or RocketMQ's status for a refusal."""
        fast = self._put_fast   # the common case in one native call; else None or its born time
        if fast is not None and (done := put_fast(self, message, fast)) is not None:
            if type(done) is int and validated_now(message.topic, self._put_settings):
                # A topic's first message: validated here once, then taken by the one call too,
                # with the born time it read (not the whole Python path per new topic).
                done = put_fast(self, message, fast, done) or done
            if type(done) is PutMessageResult:     # SYNC_FLUSH: it waits for its group commit
                return done if not self._sync_flush else self.services.await_flush(done, message)
            return self._put_one(message, done)
        refused = self._refuse_writes()
        if refused is not None:
            return refused
        if self._plain_puts:
            return self._put_one(message)
        if self._timer_hook is not None and message.properties:
            sent = message
            try:
                message = rewrite_timer_message(message, self._timer_hook, self.clock_ms(),
                                                slot_num=self._timer_slot_num)
            except TimerRefused as refusal:
                return PutMessageResult(refusal.status, error=refusal.reason)
            if message.topic != sent.topic and \
                    sent.queue_id not in self._noted_queues.get(sent.topic, ()):
                # The broker creates the topic it was sent to before the hook moves the message.
                self._note_topic(sent.topic, sent.queue_id)
        refused = refuse_inner_batch(message, self.topics.is_batch_topic) \
            if self.style == "5.x" else None
        if refused is not None:
            return refused
        batch = self._batch_queue(message.topic, message.queue_id)
        if batch is not False or (self.config.store_type != "default" and self.style == "5.x"
                                  and self.topics.is_batch_topic(message.topic)):   # RocksDB
            return put_batch_topic(message, self.commit_log.queue_offsets, self._batch_lock,
                                   self._put_one, batch_queue=batch is not False)
        lmq_names = self._lmq.names_of(message.topic, message.properties) \
            if self._lmq is not None else None
        if lmq_names is None:
            return self._put_one(message)
        with self._lmq.lock:      # the offsets, in the record, in log order (wrapLmqDispatch)
            offsets = self._lmq.assign(lmq_names)
            result = self._put_one(dataclasses.replace(message, properties={
                **message.properties, PROPERTY_INNER_MULTI_QUEUE_OFFSET: offsets}))
            if result.ok:
                self._lmq.advance(lmq_names)
            return result

    def _batch_queue(self, topic: str, queue_id: int):
        """False: not a batch topic; else its BatchConsumeQueue (None before its first unit)."""
        batch_queues = self._parts.batch_queues
        if batch_queues is None or not self._parts.topics.is_batch_topic(topic):
            return False
        return batch_queues.queue(topic, queue_id)

    def _put_one(self, message: Message, now_ms: int | None = None) -> PutMessageResult:
        now_ms = self.clock_ms() if now_ms is None else now_ms
        encode_batch = self._encode_batch
        commit_log = self.commit_log
        if encode_batch is not None and not commit_log.make_dispatch_requests:
            fast = encode_batch([message], self._put_settings.kernel_context, now_ms)
            if fast is not None:
                return self._acknowledge(commit_log.append_encoded(*fast), fast[2], fast[3],
                                         (message,))
        try:
            record, draft = encode_for_put(message, self._put_settings, now_ms)
        except PutRefused as refusal:
            return PutMessageResult(refusal.status, error=refusal.reason)
        try:
            appended = self.commit_log.append_one(record, draft)
        except RecordTooLargeForSegment as error:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error=str(error))
        return self._acknowledge(appended, draft.topic, draft.queue_id, (message,))

    def put_messages(self, messages: list[Message]) -> PutMessageResult:
        """Append a batch: one topic and queue, all records in one segment, all or nothing."""
        refused = self._refuse_writes()
        if refused is not None:
            return refused
        now_ms = self.clock_ms()
        if self._encode_batch is not None and not self.commit_log.make_dispatch_requests \
                and type(messages) is list:
            fast = self._encode_batch(messages, self._put_settings.kernel_context, now_ms)
            if fast is not None:      # else the code below decides, with its status and sentence
                return self._acknowledge(self.commit_log.append_encoded(*fast), fast[2], fast[3],
                                         messages)
        if not messages:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="empty batch")
        first = messages[0]
        topic, queue_id = first.topic, first.queue_id
        for message in messages:
            if message.topic != topic or message.queue_id != queue_id:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        error="a batch must have one topic and one queue")
        settings = self._put_settings
        records = []
        drafts = []
        total = 0
        special = False     # delayed or transactional
        try:
            for message in messages:
                record, draft = encode_for_put(message, settings, now_ms)
                records.append(record)
                drafts.append(draft)
                total += len(record)
                special = special or draft.delivery_delay_ms >= 0 or bool(draft.sys_flag & 0x0C)
        except PutRefused as refusal:
            return PutMessageResult(refusal.status, error=refusal.reason)
        if total > self.config.max_message_size and len(messages) > 1:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    error=f"batch of {total} bytes exceeds maxMessageSize")
        if len(records) > 1 and special:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    error="batches cannot be delayed or transactional")
        return self._append(records, drafts, messages)

    def _append(self, records, drafts, messages) -> PutMessageResult:
        try:
            appended = self.commit_log.append(records, drafts)
        except RecordTooLargeForSegment as error:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error=str(error))
        return self._acknowledge(appended, drafts[0].topic, drafts[0].queue_id, messages)

    def _acknowledge(self, appended, topic: str, queue_id: int, messages) -> PutMessageResult:
        if queue_id not in self._noted_queues.get(topic, ()):
            self._note_topic(topic, queue_id)
        services = self.services
        if services.commit_service is None and not services.sync_flush:
            status = PutMessageStatus.PUT_OK    # after_append's answer for ASYNC_FLUSH, one call less
        else:
            status = services.after_append(appended, messages)
        msg_ids = appended.msg_ids
        return PutMessageResult(
            status, appended.wrote_offset, appended.wrote_bytes,
            msg_ids[0] if len(msg_ids) == 1 else ",".join(msg_ids),
            appended.queue_offset, appended.store_timestamp, appended.message_count,
            appended.msg_ids,
            error=None if status is PutMessageStatus.PUT_OK else "flush did not complete in time")

    # -- read path -------------------------------------------------------------------------------

    def get_message(self, group: str, topic: str, queue_id: int, queue_offset: int,
                    max_msg_nums: int = 32, *, tag_expression: str | None = None,
                    max_total_msg_size: int | None = None, long_poll_ms: int = 0,
                    decode: bool | str = True) -> GetMessageResult:
        """Pull messages of one queue (spec §10.1). With `long_poll_ms` > 0, a pull that finds
        nothing new waits until a matching message is dispatched or the time is up.

        `decode`: True gives MessageRecords, False the raw record bytes, "view" zero-copy
        memoryviews over the mapped commit log (for bulk readers; valid until the segment expires).
        """
        if self.closed:
            raise StoreClosedError("the store is closed")
        if long_poll_ms <= 0 and max_total_msg_size is None and tag_expression in _NO_FILTER \
                and (self._parts.batch_queues is None or self._batch_queue(topic, queue_id) is False):
            # The commonest pull, in the fewest steps; None: the general path below decides.
            found = pull_unfiltered_fast(self.commit_log, self.consume_queues, topic, queue_id,
                                         queue_offset, max_msg_nums, decode, self._limits)
            if found is not None:
                return found
        tag_filter = TagFilter.parse(tag_expression)

        def pull(offset: int) -> GetMessageResult:
            batch = self._batch_queue(topic, queue_id)
            if batch is not False:          # [5.x] a batch topic
                return pull_batch(batch, self.commit_log, offset, max_msg_nums,
                                  accepts=tag_filter.accepts, limits=self._limits,
                                  max_total_msg_size=max_total_msg_size, decode=decode)
            return get_message(
                self.commit_log, self.consume_queues, topic, queue_id, offset, max_msg_nums,
                tag_filter=tag_filter, limits=self._limits, known_queue=self.is_known_queue,
                units_per_cq_file=self._units_per_cq_file,
                max_total_msg_size=max_total_msg_size, decode=decode)
        return pull_with_hold(pull, self.services.hold, topic, queue_id, queue_offset,
                              long_poll_ms, lambda: self.closed)

    def _note_topic(self, topic: str, queue_id: int) -> None:
        """Record a topic (and enough queues) in topics.json, as a broker's auto-create does, and
        note every queue its config then covers: their first puts would change nothing there."""
        covered = self.topics.note_queue(topic, queue_id, self.config.default_topic_queue_nums)
        noted = self._noted_queues.setdefault(topic, set())
        noted.update(range(min(covered, MAX_NOTED_RANGE)))
        noted.add(queue_id)

    def is_known_queue(self, topic: str, queue_id: int) -> bool:
        """A queue with a consume queue, or of a topic listed in topics.json."""
        if (topic, queue_id) in self.commit_log.queue_offsets or \
                self.consume_queues.get_max_offset(topic, queue_id) > 0:
            return True
        config = self.topics.get(topic)
        return config is not None and 0 <= queue_id < max(config.read_queue_nums,
                                                          config.write_queue_nums)

    # -- consumer offsets ------------------------------------------------------------------------

    def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        if self.read_only:
            raise ReadOnlyStoreError("cannot commit consumer offsets on a read-only store")
        self.consumer_offsets.commit_offset(group, topic, queue_id, offset)

    def query_consumer_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.consumer_offsets.query_offset(group, topic, queue_id)

    # -- introspection ---------------------------------------------------------------------------

    def pointers(self) -> dict[str, int]:
        """wrote, committed, flushed, reput and confirm offsets, and the commit log's min and max."""
        queue = self.commit_log.mapped_files
        return {
            "wrote": queue.max_wrote_offset(),
            "committed": queue.max_offset(),
            "flushed": queue.flushed_where,
            "reput": self.services.reput.reput_offset,
            "confirm": self.confirm_offset(),
            "min_phy_offset": self.commit_log.min_offset(),
            "max_phy_offset": self.commit_log.max_offset(),
        }

    @property
    def disk_full(self) -> bool:
        """The last cleanup pass found the disk above diskSpaceWarningLevelRatio: puts are refused."""
        return self.services.cleanup.disk_full

    def confirm_offset(self) -> int:
        """4.9.7: -1 (set only by replication). 5.x: flushed offset (SYNC) or max offset (ASYNC)."""
        if self.style != "5.x":
            return self.commit_log.confirm_offset
        if self.config.flush_disk_type == "SYNC_FLUSH":
            return self.commit_log.mapped_files.flushed_where
        return self.commit_log.max_offset()

    def check(self):
        """Cross-check the commit log, consume queues, index and checkpoint; a list of findings."""
        from store.check.run import check_store
        return check_store(self)

    def clean_expired_files(self, *, force: bool = False):
        """Run one cleanup pass now (spec §12): expired segments, then the CQ and index files behind
        them. `force` deletes the oldest segments whatever their age (never the last, never what is
        not dispatched yet). Returns a CleanupResult."""
        self._check_open()
        if self.read_only:
            raise ReadOnlyStoreError("cannot clean a read-only store")
        if not force:
            self.services.cleanup.request_manual_clean()
        return self.services.cleanup.run_once(force=force)

    def refresh(self) -> int:
        """Read-only stores: pick up what a live writer appended since open; returns new bytes."""
        return self.services.follow_tail()
