"""The reput service: reads the commit log from the reput offset and builds the indexes (spec §9).

Dispatchers are a one-method interface, `dispatch(requests)`, fed batches of `DispatchRequest`s in log
order. Arrival listeners (long polling) are told, per batch, the new max offset of every queue that got
messages (`store.services.arrivals`).

With only the built-in dispatchers registered (the usual case), records are dispatched straight from
the kernel scan's rows, with no request per record (`store.services.dispatch_rows`: the per-record work
runs in C outside the GIL), and the put path makes no requests. Otherwise records appended by this
process come with their dispatch request already made by the put path (`CommitLog.pending_dispatch`),
and anything else (recovery, a log written by another process) is parsed with the spec §2.7 check.
Dispatch never reads past the commit log's read position, so a record still being copied (or not yet
committed from the transient pool) is never seen.
After a crash, records the indexes already hold are dropped before any request is made
(`store.services.redispatch`).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Protocol, Sequence

from store import kernel
from store.codec import message as msgcodec
from store.codec import record_check
from store.codec.javahash import tags_code as compute_tags_code
from store.codec.message import DispatchRequest
from store.commitlog.commit_log import QUEUED_TRANSACTION_KINDS, CommitLog, is_queued_transaction_type
from store.services.arrivals import ArrivalListener, Arrivals
from store.services.gil_handoff import BusyHold, handoff
from store.services.dispatch_rows import _LEGAL_TOPICS, _legal_topic, _topic_is_legal, dispatch_rows
from store.services.redispatch import uncovered_rows

log = logging.getLogger(__name__)

DISPATCH_BATCH_MAX_RECORDS = 4096
_NAME_MEMO_MAX = 10_000      # distinct topics / tags remembered while parsing records
_C = kernel.COL
_SPANS = [(_C[name + "_pos"], _C[name + "_len"]) for name in ("topic", "tags", "keys", "uniq")]
# The scan-row columns a dispatch request is made of (span lengths turned into ends first).
_ROW_COLUMNS = [_C[name] for name in (
    "pos", "size", "queue_id", "queue_offset", "phy_offset", "sys_flag", "store_ts", "prepared",
    "topic_pos", "topic_len", "tags_pos", "tags_len", "keys_pos", "keys_len", "uniq_pos", "uniq_len",
    "delay_pos")]


class Dispatcher(Protocol):
    def dispatch(self, requests: Sequence[DispatchRequest]) -> None: ...


class ConsumeQueueDispatcher:
    """CommitLogDispatcherBuildConsumeQueue: NOT/COMMIT records get a consume-queue unit."""

    def __init__(self, consume_queues, on_written: Callable[[int], None] | None = None,
                 multi_dispatch=None, batch=None):
        self.consume_queues = consume_queues
        self.on_written = on_written
        # enableMultiDispatch: requests -> the LMQ units of those records (store.consumequeue.lmq)
        self.multi_dispatch = multi_dispatch
        self.lmq_arrivals: dict[tuple[str, int], int] = {}   # new max offsets, for Arrivals.notify
        self.batch = batch      # [5.x] batch topics' units (store.consumequeue.batch.dispatch)

    def dispatch(self, requests: Sequence[DispatchRequest]) -> None:
        legal = _LEGAL_TOPICS
        queued = [r for r in requests if r.sys_flag & 0x0C in QUEUED_TRANSACTION_KINDS
                  and (r.topic in legal or _legal_topic(r))]
        if self.batch is not None and queued:
            written = queued
            queued = self.batch.take(queued)
            if not queued:
                if self.on_written is not None:
                    self.on_written(written[-1].store_timestamp)
                return
        if not queued:
            return
        self.consume_queues.put_units(queued)
        if self.multi_dispatch is not None:      # after the records' own units, as RocketMQ
            extra = [r for r in self.multi_dispatch(queued) if r.topic in legal or _legal_topic(r)]
            if extra:
                self.consume_queues.put_units(extra)
                for request in extra:          # notifyMessageArrive4MultiQueue: offset + 1
                    self.lmq_arrivals[(request.topic, request.queue_id)] = \
                        request.consume_queue_offset + 1
        if self.on_written is not None:
            self.on_written(queued[-1].store_timestamp)


class IndexDispatcher:
    """CommitLogDispatcherBuildIndex (spec §5.6)."""

    def __init__(self, index_service):
        self.index_service = index_service

    def dispatch(self, requests: Sequence[DispatchRequest]) -> None:
        self.index_service.build_index(requests)


class ReputService:
    """Moves `reput_offset` forward through the commit log, feeding every dispatcher."""

    def __init__(self, commit_log: CommitLog, dispatchers: list[Dispatcher], *,
                 interval_ms: int = 1,
                 delay_levels_ms: tuple[int, ...] = record_check.DEFAULT_DELAY_LEVELS_MS,
                 handoff_gil: bool = True):
        self.commit_log = commit_log
        self.dispatchers = list(dispatchers)
        self.arrivals = Arrivals()      # the listeners (long polling), told after each pass
        self.reput_offset = 0
        self.interval_ms = interval_ms
        # messageDelayLevel: a SCHEDULE_TOPIC_XXXX record's tagsCode is its delivery time
        # (checkMessageAndReturnSize asks the schedule service, which has the configured levels).
        self.delay_levels_ms = tuple(delay_levels_ms)
        self.handoff_gil = handoff_gil  # lower the switch interval while busy (gil_handoff)
        self.dispatched_records = 0
        self.skipped_invalid = 0
        self.skipped_covered = 0        # re-dispatched records every index already had
        self.indexed_directly = 0       # re-dispatched records only the index lacked (no requests)
        self.dispatched_from_rows = 0   # records dispatched without requests (dispatch_rows)
        self._last_rows_unit: int | None = None   # phy offset of their last unit, this pass
        self._units_end_max: int | None = None    # no queue's max phy end is past it (_known_new)
        self._last_skipped_unit = None  # (phy offset, store time, dispatcher) of the last one
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()   # one dispatch pass at a time (thread vs catch-up callers)
        self.last_error: BaseException | None = None
        self._scan_rows = kernel.scan_buffer(DISPATCH_BATCH_MAX_RECORDS)
        self._topic_names: dict[bytes, str] = {}
        self._tags_codes: dict[bytes, int] = {}
        # The put path need not make requests the reput service would not use.
        commit_log.make_dispatch_requests = self._row_dispatchers() is None

    def add_listener(self, listener: ArrivalListener,
                     wants: Callable[[], bool] | None = None) -> None:
        """Tell `listener` every pass's new max offsets. `wants`, when given, is asked after the
        units are written; while it answers False, the listener is not called and the table is
        not made for it (store.services.arrivals)."""
        self.arrivals.add(listener, wants)

    def behind_bytes(self) -> int:
        return max(0, self.commit_log.max_offset() - self.reput_offset)

    # -- one pass --------------------------------------------------------------------------------

    def _next_batch(self, end: int) -> tuple[list[DispatchRequest], int]:
        commit_log = self.commit_log
        pending = commit_log.pending_dispatch
        batch: list[DispatchRequest] = []
        offset = self.reput_offset
        if offset < commit_log.min_offset():
            offset = commit_log.min_offset()
        while offset < end and len(batch) < DISPATCH_BATCH_MAX_RECORDS:
            if pending:
                while pending and pending[0][0] < offset:
                    pending.popleft()
                if pending and pending[0][0] == offset:
                    # Records this process appended: their requests are ready, take them in a run.
                    append = batch.append
                    popleft = pending.popleft
                    room = DISPATCH_BATCH_MAX_RECORDS - len(batch)
                    while room and pending:
                        phy_offset, request = pending[0]
                        if phy_offset != offset or offset + request.msg_size > end:
                            break
                        popleft()
                        append(request)
                        offset += request.msg_size
                        room -= 1
                    continue
            walk = getattr(commit_log, "walk_for_dispatch", None)
            if walk is not None:    # a DLedger log: records sit inside entries (store/dledger/)
                moved = walk(offset, end, batch, DISPATCH_BATCH_MAX_RECORDS - len(batch))
                if moved is None:
                    break
                offset = moved
                continue
            mapped = commit_log.mapped_files.find_file(offset)
            if mapped is None:
                break
            position = offset - mapped.file_from_offset
            if position >= mapped.read_position:
                if mapped.is_full() and mapped.read_position == mapped.file_size_bytes:
                    offset = mapped.file_end_offset
                    continue
                break
            moved = self._parse_records(mapped, position, batch)
            if moved is None:
                break
            offset = moved
        return batch, offset

    def _parse_records(self, mapped, position: int, batch: list) -> int | None:
        """Parse records of `mapped` from `position` into `batch` with the kernel's scan (what
        `check_message` finds, in bulk); returns the next offset, None to stop for now."""
        room = DISPATCH_BATCH_MAX_RECORDS - len(batch)
        out = self._scan_rows[:room]
        buf = mapped.buffer
        count, stop, kind, stop_size = kernel.scan(buf, position, mapped.read_position, False, out)
        if count:
            rows = self._uncovered(buf, out[:count], may_index_directly=not batch)
            if len(rows) and not batch:      # nothing before them waits for requests: log order
                rows = self._dispatch_rows(buf, rows)
            for start, length in _SPANS:    # lengths -> ends, for plain slicing
                rows[:, length] += rows[:, start]
            self._requests_from_rows(buf, rows, batch)
        base = mapped.file_from_offset
        if kind == kernel.STOP_END or kind == kernel.STOP_FULL:
            return base + stop
        if kind == kernel.STOP_BLANK:
            return mapped.file_end_offset
        if stop_size > 0:
            # A length mismatch: RocketMQ skips the record to keep a master moving; we log it.
            log.error("dispatch skips an invalid record of %d bytes at %d", stop_size, base + stop)
            self.skipped_invalid += 1
            return base + stop + stop_size
        return base + stop if count else None

    def _row_dispatchers(self):
        """(ConsumeQueueDispatcher or None, IndexDispatcher or None) when only the built-in ones are
        registered, in that order, and dispatch_rows can do their work (no multi-dispatch, consume
        queues that take runs of units or, RocksDB's, of 28-byte values; a log of plain records);
        None otherwise."""
        if getattr(self.commit_log, "walk_for_dispatch", None) is not None or not self.dispatchers:
            return None
        queue_dispatcher = index_dispatcher = None
        for dispatcher in self.dispatchers:
            if type(dispatcher) is ConsumeQueueDispatcher and queue_dispatcher is None and \
                    index_dispatcher is None and dispatcher.multi_dispatch is None and \
                    (hasattr(dispatcher.consume_queues, "put_unit_runs")
                     or hasattr(dispatcher.consume_queues, "put_value_runs")):
                queue_dispatcher = dispatcher
            elif type(dispatcher) is IndexDispatcher and index_dispatcher is None:
                index_dispatcher = dispatcher
            else:
                return None
        return queue_dispatcher, index_dispatcher

    def _dispatch_rows(self, buf, rows):
        """Dispatch `rows` without requests when `dispatch_rows` can; returns the rows left."""
        dispatchers = self._row_dispatchers()
        if dispatchers is None:
            return rows
        queue_dispatcher, index_dispatcher = dispatchers
        done = dispatch_rows(
            buf, rows, topic_is_legal=_topic_is_legal,
            consume_queues=queue_dispatcher.consume_queues if queue_dispatcher else None,
            on_written=queue_dispatcher.on_written if queue_dispatcher else None,
            batch_router=queue_dispatcher.batch if queue_dispatcher else None,
            index_service=index_dispatcher.index_service if index_dispatcher else None)
        if done is None:
            return rows
        self.dispatched_from_rows += done.count
        self.arrivals.note_rows(done.arrivals)
        if done.last_unit is not None:
            self._last_rows_unit = done.last_unit[0]
        return rows[done.count:]

    def _uncovered(self, buf, rows, *, may_index_directly: bool):
        """The rows that still need dispatch requests (`store.services.redispatch`): rows every
        built-in dispatcher already has are dropped, rows only the index lacks may be indexed
        directly. With any other dispatcher (or multi-dispatch: RocketMQ adds the LMQ units of a
        record whose own unit exists), every row gets a request."""
        if self._known_new(rows):
            return rows                  # what uncovered_rows answers for them, without the work
        queues = index = queue_dispatcher = None
        for dispatcher in self.dispatchers:
            # (batch topics have no ordinary queue: their rows always get requests)
            if type(dispatcher) is ConsumeQueueDispatcher and dispatcher.multi_dispatch is None:
                queues = dispatcher.consume_queues
                queue_dispatcher = dispatcher
            elif type(dispatcher) is IndexDispatcher:
                index = dispatcher.index_service
            else:
                return rows
        coverage = uncovered_rows(
            buf, rows, consume_queues=queues, index_service=index,
            may_index_directly=may_index_directly,
            note_rebuilt_unit=queue_dispatcher is not None and queue_dispatcher.on_written is not None)
        self.skipped_covered += coverage.covered
        self.indexed_directly += coverage.indexed_directly
        if coverage.last_rebuilt_unit is not None:
            self._last_skipped_unit = (*coverage.last_rebuilt_unit, queue_dispatcher)
        return coverage.rows

    def _known_new(self, rows) -> bool:
        """True when the first row gets a unit and ends past every queue's max phy end, known
        without asking the queues: then `uncovered_rows` returns the rows as they are. Only on the
        row path, where this service is the only writer of units, so that no queue ends past
        `_units_end_max` (every queue's max phy end when first asked, then the reput offset)."""
        dispatchers = self._row_dispatchers()
        if dispatchers is None or dispatchers[0] is None:
            return False
        first = rows[0]
        if not is_queued_transaction_type(int(first[_C["sys_flag"]])):
            return False
        end = int(first[_C["phy_offset"]]) + int(first[_C["size"]])
        if self._units_end_max is None:
            queues = dispatchers[0].consume_queues
            self._units_end_max = max((queues.get_max_phy_end(topic, queue_id)
                                       for topic, queue_id in queues.queues()), default=-1)
        return end > self._units_end_max

    def _requests_from_rows(self, buf, rows, batch: list) -> None:
        topics = self._topic_names
        tags_codes = self._tags_codes
        append = batch.append
        for (position, size, queue_id, queue_offset, phy_offset, sys_flag, store_ts, prepared,
             topic_pos, topic_end, tags_pos, tags_end, keys_pos, keys_end, uniq_pos, uniq_end,
             delay_pos) in zip(*rows[:, _ROW_COLUMNS].T.tolist()):
            raw = buf[topic_pos:topic_end]
            topic = topics.get(raw)
            if topic is None:
                topic = raw.decode("utf-8", "replace")
                if len(topics) < _NAME_MEMO_MAX:
                    topics[raw] = topic
            if delay_pos >= 0 and topic == msgcodec.SCHEDULE_TOPIC:
                # The delivery time is the tagsCode, and a DELAY Java cannot parse is invalid.
                result = record_check.check_message(buf, position, check_crc=False, limit=position + size,
                                                    delay_levels_ms=self.delay_levels_ms)
                if result.kind == record_check.CHECK_RECORD:
                    append(result.request)
                else:
                    log.error("dispatch skips a record at %d with an invalid DELAY", phy_offset)
                    self.skipped_invalid += 1
                continue
            if tags_pos >= 0:
                tags = buf[tags_pos:tags_end]
                tags_code = tags_codes.get(tags)
                if tags_code is None:
                    tags_code = compute_tags_code(tags.decode("utf-8", "replace"))
                    if len(tags_codes) < _NAME_MEMO_MAX:
                        tags_codes[tags] = tags_code
            else:
                tags_code = 0
            append(DispatchRequest(
                topic, queue_id, phy_offset, size, tags_code, store_ts, queue_offset,
                buf[keys_pos:keys_end].decode("utf-8", "replace") if keys_pos >= 0 else "",
                buf[uniq_pos:uniq_end].decode("utf-8", "replace") if uniq_pos >= 0 else None,
                sys_flag, prepared, None))

    def do_reput(self, max_batches: int | None = None, until: int | None = None) -> int:
        """Dispatch everything readable now (with `until`, no record that starts at or past it);
        return the number of records dispatched."""
        total = 0
        batches = 0
        if self.reput_offset >= max(self.commit_log.max_offset(), self.commit_log.min_offset()):
            return 0                     # nothing to do: no lock, no hand-off
        with self._lock, handoff(self.handoff_gil):     # prompt GIL hand-offs (gil_handoff)
            while True:
                end = self.commit_log.max_offset() if until is None else \
                    min(until, self.commit_log.max_offset())
                if self.reput_offset >= end and self.reput_offset >= self.commit_log.min_offset():
                    break
                before = self.reput_offset
                without_before = self.indexed_directly + self.dispatched_from_rows
                self._last_rows_unit = None
                batch, new_offset = self._next_batch(end)
                indexed = self.indexed_directly + self.dispatched_from_rows - without_before
                total += indexed
                self.dispatched_records += indexed
                if batch:
                    for dispatcher in self.dispatchers:
                        dispatcher.dispatch(batch)
                    total += len(batch)
                    self.dispatched_records += len(batch)
                self._note_skipped_units(batch)
                # Moved only once the batch is in every index, so "behind 0" means "queryable".
                self.reput_offset = new_offset
                if self._units_end_max is not None and new_offset > self._units_end_max:
                    self._units_end_max = new_offset     # units written end at or below it
                if batch or self.arrivals.pending():
                    self.arrivals.notify(batch, [dispatcher for dispatcher in self.dispatchers
                                                 if type(dispatcher) is ConsumeQueueDispatcher
                                                 and dispatcher.lmq_arrivals])
                if self.reput_offset == before:
                    break
                batches += 1
                if max_batches is not None and batches >= max_batches:
                    break
        return total

    def _note_skipped_units(self, batch) -> None:
        """Tell the consume-queue dispatcher's `on_written` about units dropped as already built
        when they come after every unit of the batch (it then has the time RocketMQ would have)."""
        skipped = self._last_skipped_unit
        if skipped is None:
            return
        self._last_skipped_unit = None
        phy_offset, store_timestamp, queue_dispatcher = skipped
        if self._last_rows_unit is not None and self._last_rows_unit > phy_offset:
            return      # a unit written from rows (before the batch in log order) came after it
        for request in reversed(batch):
            if is_queued_transaction_type(request.sys_flag) and _legal_topic(request):
                if request.commit_log_offset > phy_offset:
                    return
                break
        queue_dispatcher.on_written(store_timestamp)

    # -- thread ----------------------------------------------------------------------------------

    def start(self) -> None:
        assert self._thread is None
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # While records keep coming, hand the GIL over promptly between passes too, or the wake-up
        # after the linger waits out a producer's 5 ms switch interval (store.services.gil_handoff).
        hold = BusyHold(self.handoff_gil)
        try:
            while not self._stop.is_set():
                try:
                    dispatched = self.do_reput()
                except Exception as error:  # keep the service alive; check() surfaces the failure
                    log.exception("dispatch failed at reput offset %d", self.reput_offset)
                    self.last_error = error
                    dispatched = 0
                hold.note(dispatched > 0)
                if dispatched < DISPATCH_BATCH_MAX_RECORDS:
                    # Caught up: linger for the interval (RocketMQ's reput sleeps 1 ms too) so that
                    # the next pass takes a batch, not one record; a batch costs little more.
                    self._stop.wait(self.interval_ms / 1000.0)
        finally:
            hold.release()

    def shutdown(self, drain: bool = True) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            self._thread = None
        if drain:
            self.do_reput()
