"""The reput service: reads the commit log from the reput offset and builds the indexes (spec §9).

Dispatchers are a one-method interface, `dispatch(requests)`, fed batches of `DispatchRequest`s in log
order. Arrival listeners (long polling) are told, per batch, the new max offset of every queue that got
messages.

Records appended by this process come with their dispatch request already made by the put path
(`CommitLog.pending_dispatch`), so they are not parsed again; anything else (recovery, a log written by
another process) is parsed with the spec §2.7 check. Dispatch never reads past the commit log's read
position, so a record still being copied (or not yet committed from the transient pool) is never seen.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Protocol, Sequence

from store.codec import message as msgcodec
from store.codec.message import DispatchRequest
from store.commit_log import CommitLog, is_queued_transaction_type
from store.codec.topic import validate_topic
from store.errors import InvalidTopicError

log = logging.getLogger(__name__)

DISPATCH_BATCH_MAX_RECORDS = 4096


class Dispatcher(Protocol):
    def dispatch(self, requests: Sequence[DispatchRequest]) -> None: ...


_LEGAL_TOPICS: set[str] = set()     # memo: validation runs for every dispatched record
_LEGAL_TOPICS_MAX = 100_000


def _legal_topic(request: DispatchRequest) -> bool:
    """A topic read from the commit log becomes a directory name: a crafted record ("../x", "/abs")
    must not create one outside consumequeue/. Such records stay in the log but get no unit."""
    if request.topic in _LEGAL_TOPICS:
        return True
    try:
        validate_topic(request.topic, allow_v2=True)
    except InvalidTopicError:
        log.warning("record at %d has an illegal topic %r: not dispatched to a consume queue",
                    request.commit_log_offset, request.topic[:64])
        return False
    if len(_LEGAL_TOPICS) < _LEGAL_TOPICS_MAX:
        _LEGAL_TOPICS.add(request.topic)
    return True


class ConsumeQueueDispatcher:
    """CommitLogDispatcherBuildConsumeQueue: NOT/COMMIT records get a consume-queue unit."""

    def __init__(self, consume_queues, on_written: Callable[[int], None] | None = None):
        self.consume_queues = consume_queues
        self.on_written = on_written

    def dispatch(self, requests: Sequence[DispatchRequest]) -> None:
        queued = [r for r in requests if is_queued_transaction_type(r.sys_flag)
                  and _legal_topic(r)]
        if not queued:
            return
        self.consume_queues.put_units(queued)
        if self.on_written is not None:
            self.on_written(queued[-1].store_timestamp)


class IndexDispatcher:
    """CommitLogDispatcherBuildIndex (spec §5.6)."""

    def __init__(self, index_service):
        self.index_service = index_service

    def dispatch(self, requests: Sequence[DispatchRequest]) -> None:
        self.index_service.build_index(requests)


ArrivalListener = Callable[[dict[tuple[str, int], int]], None]


class ReputService:
    """Moves `reput_offset` forward through the commit log, feeding every dispatcher."""

    def __init__(self, commit_log: CommitLog, dispatchers: list[Dispatcher], *,
                 interval_ms: int = 1):
        self.commit_log = commit_log
        self.dispatchers = list(dispatchers)
        self.listeners: list[ArrivalListener] = []
        self.reput_offset = 0
        self.interval_ms = interval_ms
        self.dispatched_records = 0
        self.skipped_invalid = 0
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()   # one dispatch pass at a time (thread vs catch-up callers)
        self.last_error: BaseException | None = None

    def add_listener(self, listener: ArrivalListener) -> None:
        self.listeners.append(listener)

    def behind_bytes(self) -> int:
        return max(0, self.commit_log.max_offset() - self.reput_offset)

    def wakeup(self) -> None:
        if not self._wakeup.is_set():   # Event.set takes a lock: skip it when already set
            self._wakeup.set()

    # -- one pass --------------------------------------------------------------------------------

    def _next_batch(self, end: int) -> tuple[list[DispatchRequest], int]:
        commit_log = self.commit_log
        pending = commit_log.pending_dispatch
        batch: list[DispatchRequest] = []
        offset = self.reput_offset
        if offset < commit_log.min_offset():
            offset = commit_log.min_offset()
        while offset < end and len(batch) < DISPATCH_BATCH_MAX_RECORDS:
            while pending and pending[0][0] < offset:
                pending.popleft()
            if pending and pending[0][0] == offset:
                request = pending[0][1]
                if offset + request.msg_size > end:
                    break
                pending.popleft()
                batch.append(request)
                offset += request.msg_size
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
            result = msgcodec.check_message(mapped.buffer, position, check_crc=False,
                                            limit=mapped.read_position)
            if result.kind == msgcodec.CHECK_RECORD:
                batch.append(result.request)
                offset += result.size
            elif result.kind == msgcodec.CHECK_BLANK:
                offset = mapped.file_end_offset
            elif result.size > 0:
                # A length mismatch: RocketMQ skips the record to keep a master moving; we log it.
                log.error("dispatch skips an invalid record of %d bytes at %d", result.size, offset)
                self.skipped_invalid += 1
                offset += result.size
            else:
                break
        return batch, offset

    def do_reput(self, max_batches: int | None = None) -> int:
        """Dispatch everything readable now; return the number of records dispatched."""
        total = 0
        batches = 0
        with self._lock:
            while True:
                end = self.commit_log.max_offset()
                if self.reput_offset >= end and self.reput_offset >= self.commit_log.min_offset():
                    break
                before = self.reput_offset
                batch, new_offset = self._next_batch(end)
                if batch:
                    for dispatcher in self.dispatchers:
                        dispatcher.dispatch(batch)
                    total += len(batch)
                    self.dispatched_records += len(batch)
                # Moved only once the batch is in every index, so "behind 0" means "queryable".
                self.reput_offset = new_offset
                if batch:
                    self._notify(batch)
                if self.reput_offset == before:
                    break
                batches += 1
                if max_batches is not None and batches >= max_batches:
                    break
        return total

    def _notify(self, batch: Sequence[DispatchRequest]) -> None:
        if not self.listeners:
            return
        arrivals: dict[tuple[str, int], int] = {}
        for request in batch:
            if is_queued_transaction_type(request.sys_flag):
                arrivals[(request.topic, request.queue_id)] = request.consume_queue_offset + 1
        if arrivals:
            for listener in self.listeners:
                listener(arrivals)

    # -- thread ----------------------------------------------------------------------------------

    def start(self) -> None:
        assert self._thread is None
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                dispatched = self.do_reput()
            except Exception as error:  # keep the service alive; the failure is surfaced in check()
                log.exception("dispatch failed at reput offset %d", self.reput_offset)
                self.last_error = error
                dispatched = 0
            if not dispatched:
                self._wakeup.wait(self.interval_ms / 1000.0)
                self._wakeup.clear()

    def shutdown(self, drain: bool = True) -> None:
        if self._thread is not None:
            self._stop.set()
            self._wakeup.set()
            self._thread.join(timeout=30)
            self._thread = None
        if drain:
            self.do_reput()
