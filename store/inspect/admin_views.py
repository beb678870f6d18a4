"""The store's admin views (what mqadmin asks a broker about its store), mixed into `StoreInspector`.

The CLI's mqadmin verbs (`rmqstore topicList`, `topicStatus`, `consumerProgress`, `brokerStatus`,
`statsAll`, `clean --explain`) and the dashboard's Topics and Consumer groups pages call these same
methods, so both show the same numbers. Every value is raw (offsets, bytes, ms since the epoch); the
callers format them.

| method                       | RocketMQ behind it                                                      |
|------------------------------|-------------------------------------------------------------------------|
| `topics()`                   | `TopicList` + `TopicStatsTable` per topic; kinds from `MixAll`'s        |
|                              | `%RETRY%` / `%DLQ%` prefixes and `TopicValidator`'s system topics        |
| `topic_status(topic)`        | `AdminBrokerProcessor.getTopicStatsInfo`: min, max and the store time   |
|                              | of the message at max - 1 per queue (`TopicOffset`)                      |
| `consumer_progress(group)`   | `AdminBrokerProcessor.getConsumeStats` (`OffsetWrapper`): broker offset |
|                              | = the queue's max, diff = broker - consumer offset, last timestamp =    |
|                              | store time at consumer offset - 1; clamped here, with the reason        |
|                              | (apache/rocketmq #2743)                                                  |
| `broker_status()`            | `DefaultMessageStore.getRuntimeInfo` / `BrokerStatusSubCommand`          |
| `cleanup_explain(now_ms)`    | `DefaultMessageStore.CleanCommitLogService` (cleanup_view.py)            |

Cost: one min/max lookup and at most two unit reads per queue, plus (for `topics()`' bytes) the
queue's CQ units read in bulk; never a walk of the commit log.

The parts beyond the inspector's own (consumer offsets, topics.json, checkpoint, cleanup service)
are handed in by the facade through `attach_admin`.
"""

from __future__ import annotations

import datetime as dt

from store.commitlog.earliest import earliest_message_time_5x
from store.errors import EarliestTimeUnavailable
from store.inspect.cleanup_view import explain_cleanup

RETRY_PREFIX = "%RETRY%"          # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_PREFIX = "%DLQ%"              # MixAll.DLQ_GROUP_TOPIC_PREFIX
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX
SYSTEM_TOPICS = frozenset({       # TopicValidator.SYSTEM_TOPIC_SET (4.9.7)
    "TBW102", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SCHEDULE_TOPIC_XXXX",
    "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})
UNITS_PER_READ = 1 << 16          # CQ units read per call when summing a queue's bytes
MAX_READS_PER_QUEUE = 1 << 16     # bound: 4 G units per queue

NOTE_NO_OFFSET = "no offset committed: lag counts every stored message"
NOTE_NO_QUEUE = "the queue has no consume queue in this store (deleted, or never written)"


def topic_kind(topic: str) -> str:
    """"retry", "dlq", "system" or "normal"."""
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    if topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX):
        return "system"
    return "normal"


def clamp_lag(broker_offset: int, min_offset: int, consumer_offset: int | None,
              queue_exists: bool) -> tuple[int, str]:
    """(lag, note): mqadmin's diff (broker offset - consumer offset) kept within the messages the
    store still holds, and the reason whenever it was clamped or guessed."""
    if consumer_offset is None or consumer_offset < 0:
        return broker_offset - min_offset, NOTE_NO_OFFSET
    if not queue_exists:
        return 0, NOTE_NO_QUEUE if consumer_offset == 0 else \
            f"{NOTE_NO_QUEUE}; committed offset {consumer_offset}"
    if consumer_offset > broker_offset:
        return 0, (f"consumer offset {consumer_offset} is ahead of the queue's max {broker_offset} "
                   f"(the queue was truncated or recreated); lag shown as 0, mqadmin shows "
                   f"{broker_offset - consumer_offset}")
    if consumer_offset < min_offset:
        return broker_offset - min_offset, (
            f"consumer offset {consumer_offset} is below the queue's min {min_offset} "
            f"({min_offset - consumer_offset} messages were deleted by cleanup); lag counts the "
            f"stored messages only")
    return broker_offset - consumer_offset, ""


class AdminViewsMixin:
    """Admin views of `StoreInspector` (see the module docstring). Needs `attach_admin` first."""

    _consumer_offsets = None
    _topic_configs = None
    _checkpoint = None
    _cleanup = None

    def attach_admin(self, *, consumer_offsets, topic_configs, checkpoint, cleanup) -> None:
        """Hand in the consumer offsets, topics.json, the checkpoint and the cleanup service."""
        self._consumer_offsets = consumer_offsets
        self._topic_configs = topic_configs
        self._checkpoint = checkpoint
        self._cleanup = cleanup

    # -- helpers ---------------------------------------------------------------------------------

    def _store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        return self._time_of_unit(self._all_queues().get_unit(topic, queue_id, queue_offset))

    def _time_of_unit(self, unit) -> int | None:
        """Store time of the record a CQ unit points to; None without a unit or a readable record."""
        if unit is None:
            return None
        value = self._commit_log.store_timestamp_at(unit.phy_offset, unit.size)
        return value if value >= 0 else None

    def _queue_bytes(self, topic: str, queue_id: int, low: int, high: int) -> int:
        batch_bytes = self._all_queues().batch_bytes(topic, queue_id)    # [5.x] a batch queue
        if batch_bytes is not None:
            return batch_bytes
        total = 0
        offset = low
        for _ in range(MAX_READS_PER_QUEUE):
            if offset >= high:
                break
            units = self._consume_queues.get_units(topic, queue_id, offset,
                                                   min(UNITS_PER_READ, high - offset))
            if units is None or len(units) == 0:
                break
            total += int(units["size"].astype("int64").sum())
            offset += len(units)
        return total

    def _queues_by_topic(self) -> dict[str, list[int]]:
        by_topic: dict[str, list[int]] = {}
        for topic, queue_id in self._all_queues().queues():     # with [5.x] batch queues
            by_topic.setdefault(topic, []).append(queue_id)
        return by_topic

    # -- topics ----------------------------------------------------------------------------------

    def topics(self) -> list[dict]:
        """One dict per topic (with a consume queue or in topics.json), sorted by name."""
        by_topic = self._queues_by_topic()
        if self._topic_configs is not None:
            for name in self._topic_configs.topics():
                by_topic.setdefault(name, [])
        cq = self._all_queues()
        rows = []
        for topic in sorted(by_topic):
            messages = size_bytes = 0
            first_unit = last_unit = None
            for queue_id in by_topic[topic]:
                low, high = cq.get_min_offset(topic, queue_id), cq.get_max_offset(topic, queue_id)
                if high <= low:
                    continue
                messages += high - low
                size_bytes += self._queue_bytes(topic, queue_id, low, high)
                head, tail = cq.get_unit(topic, queue_id, low), cq.get_unit(topic, queue_id, high - 1)
                if head is not None and (first_unit is None or head.phy_offset < first_unit.phy_offset):
                    first_unit = head
                if tail is not None and (last_unit is None or tail.phy_offset > last_unit.phy_offset):
                    last_unit = tail
            first_ms = self._time_of_unit(first_unit)
            last_ms = self._time_of_unit(last_unit)
            rate = None
            if messages >= 2 and first_ms is not None and last_ms is not None and last_ms > first_ms:
                rate = messages / ((last_ms - first_ms) / 1000.0)
            rows.append({"topic": topic, "kind": topic_kind(topic), "queues": len(by_topic[topic]),
                         "messages": messages, "bytes": size_bytes, "first_store_ms": first_ms,
                         "last_store_ms": last_ms, "put_rate_per_s": rate})
        return rows

    def topic_status(self, topic: str) -> list[dict]:
        """Per queue of `topic` (sorted): min and max queue offset and the store time of the last
        message (None when the queue is empty). [] for a topic without consume queues. A batch
        topic's offsets count messages (`BatchConsumeQueue`)."""
        cq = self._all_queues()
        rows = []
        for queue_id in self._queues_by_topic().get(topic, []):
            low, high = cq.get_min_offset(topic, queue_id), cq.get_max_offset(topic, queue_id)
            last = self._store_time_at(topic, queue_id, high - 1) if high > low else None
            rows.append({"queue_id": queue_id, "min_offset": low, "max_offset": high,
                         "last_updated_ms": last})
        return rows

    # -- consumer groups -------------------------------------------------------------------------

    def consumer_groups(self) -> list[str]:
        """Every group with a committed offset or a `%RETRY%group` topic (how mqadmin's
        consumerProgress finds groups; a 5.x POP retry topic `%RETRY%group+topic` names the group
        before the `+`, which group names never contain), sorted."""
        groups = {group for (_topic, group), _queues in self._offset_keys()}
        names = {topic for topic, _queue_id in self._consume_queues.queues()}
        if self._topic_configs is not None:
            names |= set(self._topic_configs.topics())
        for topic in names:
            if topic.startswith(RETRY_PREFIX) and len(topic) > len(RETRY_PREFIX):
                groups.add(topic[len(RETRY_PREFIX):].split("+", 1)[0])
        return sorted(groups)

    def _offset_keys(self):
        table = {} if self._consumer_offsets is None else self._consumer_offsets.table()
        for key, queues in table.items():
            topic, sep, group = key.partition("@")      # topics never hold '@' (TopicValidator)
            if sep and topic and group:
                yield (topic, group), queues

    def consumer_progress(self, group: str | None = None) -> list[dict]:
        """Rows per (group, topic, queue) of the committed offsets (every group when None), plus the
        topic's other queues the group has not committed on; sorted by group, topic, queue."""
        by_topic = self._queues_by_topic()
        cq = self._all_queues()
        rows = []
        for (topic, owner), committed in sorted(self._offset_keys(), key=lambda kv: (kv[0][1], kv[0][0])):
            if group is not None and owner != group:
                continue
            stored = set(by_topic.get(topic, []))
            for queue_id in sorted(stored | set(committed)):
                consumer_offset = committed.get(queue_id)
                exists = queue_id in stored
                broker_offset = cq.get_max_offset(topic, queue_id) if exists else 0
                min_offset = cq.get_min_offset(topic, queue_id) if exists else 0
                lag, note = clamp_lag(broker_offset, min_offset, consumer_offset, exists)
                last = None
                if exists and consumer_offset is not None and \
                        min_offset < consumer_offset <= broker_offset:
                    last = self._store_time_at(topic, queue_id, consumer_offset - 1)
                rows.append({"group": owner, "topic": topic, "queue_id": queue_id,
                             "broker_offset": broker_offset, "consumer_offset": consumer_offset,
                             "lag": lag, "last_store_ms": last, "note": note})
        return rows

    # -- broker ----------------------------------------------------------------------------------

    def broker_status(self) -> dict:
        """The store's runtime figures (`DefaultMessageStore.getRuntimeInfo`), raw values.

        `earliest_message_time_ms` is the store time of the first record of the log; 4.9.7's
        `getEarliestMessageTime` (the facade's answer on 4.9 stores) gives -1 when the first segment
        holds fewer than 2 x maxMessageSize readable bytes, which tells an operator nothing.
        `earliest_message_time_note` is None, or on a 5.x store whose first record's born host is
        IPv6 a sentence saying that 5.3.3's `getEarliestMessageTime` throws there (its bug; see
        store.commitlog.earliest) and what the first record's store time is."""
        commit_log = self._commit_log
        queue = commit_log.mapped_files
        min_offset, max_offset = commit_log.min_offset(), commit_log.max_offset()
        earliest = commit_log.store_timestamp_at(min_offset) if min_offset < max_offset else -1
        earliest_note = None
        cp = self._checkpoint
        if cp is not None and cp.style == "5.x":
            try:
                earliest_message_time_5x(commit_log, self.config.store_host)
            except EarliestTimeUnavailable as error:
                earliest = error.first_store_timestamp_ms
                earliest_note = f"{error}; the first record's store time is " + \
                    _utc_text(earliest)
        cleanup = self._cleanup
        ratio_of = cleanup.disk_ratio_of if cleanup is not None else None
        queues = self._all_queues()
        totals = [(cq_max - cq_min) for cq_min, cq_max in
                  ((queues.get_min_offset(t, q), queues.get_max_offset(t, q))
                   for t, q in queues.queues())]
        return {
            "commit_log_min_offset": min_offset, "commit_log_max_offset": max_offset,
            "wrote_offset": queue.max_wrote_offset(), "committed_offset": queue.max_offset(),
            "flushed_offset": queue.flushed_where, "reput_offset": self._reput.reput_offset,
            "dispatch_behind_bytes": self._reput.behind_bytes(),
            "earliest_message_time_ms": earliest if earliest >= 0 else None,
            "earliest_message_time_note": earliest_note,
            "commit_log_files": len(queue.files),
            # The log's own directory: DLedger's data path on a DLedger store (getRuntimeInfo).
            "commit_log_disk_ratio": None if ratio_of is None else ratio_of(queue.directory),
            "consume_queue_disk_ratio": None if ratio_of is None else
            ratio_of(self.config.consume_queue_dir),
            "disk_full": None if cleanup is None else cleanup.disk_full,
            "checkpoint_physic_msg_timestamp_ms": None if cp is None else cp.physic_msg_timestamp,
            "checkpoint_logics_msg_timestamp_ms": None if cp is None else cp.logics_msg_timestamp,
            "checkpoint_index_msg_timestamp_ms": None if cp is None else cp.index_msg_timestamp,
            "topics": len({t for t, _q in queues.queues()}),
            "queues": len(totals), "messages": sum(totals),
        }

    def cleanup_explain(self, now_ms: int | None = None) -> dict:
        """Why cleanup would or would not delete commit-log files now; changes nothing."""
        if self._cleanup is None:
            raise AssertionError("attach_admin was not called")
        return explain_cleanup(self.config, self._commit_log, self._cleanup, now_ms)


def _utc_text(timestamp_ms: int) -> str:
    """Epoch milliseconds as readable UTC text (the raw value stays in the JSON fields)."""
    try:
        return dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S.%f")[:-3] + f" UTC ({timestamp_ms} ms)"
    except (OverflowError, OSError, ValueError):
        return f"{timestamp_ms} ms"
