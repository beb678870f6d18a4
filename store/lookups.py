"""Read-only lookups of the facade: by offset, msgId and key; offsets, time search, earliest times, topics.

Kept apart from `message_store.py` so that the facade stays small; everything here only reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from store.api import QueryMessageResult
from store.codec.message import (
    MESSAGE_MAGIC_V1,
    MESSAGE_MAGIC_V2,
    SYSFLAG_BORNHOST_V6,
    MessageRecord,
    decode_message,
    store_timestamp_position,
)
from store.codec import msgid
from store.codec.msgid import decode_message_id
from store.commitlog.earliest import earliest_message_time_5x
from store.consumequeue.batch.by_time import check_batch_boundary
from store.errors import MessageNotFoundError, StoreClosedError
from store.codec.properties import decode_properties
from store.kernel.lookup import COMPILED as KERNEL_COMPILED
from store.kernel.query import query_message_fast, query_message_py

BOUNDARIES = ("nearest", "lower", "upper")
_unpack_int = struct.Struct(">i").unpack_from
_unpack_long = struct.Struct(">q").unpack_from
_unpack_size_magic = struct.Struct(">ii").unpack_from
# Store times remembered by time searches (see `_store_time_reader`); cleared when this full. A
# search remembers its first 11 probes, at most 2,047 units per file for a fixed window.
STORE_TIME_MEMO_MAX = 1 << 16
# STORETIMESTAMP position for an IPv4 / IPv6 born host (the only thing the sys flag changes here).
_STORE_TS_V4 = store_timestamp_position(0)
_STORE_TS_V6 = store_timestamp_position(SYSFLAG_BORNHOST_V6)


@dataclass(frozen=True)
class QueueSummary:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    max_phy_end: int

    @property
    def depth(self) -> int:
        return self.max_offset - self.min_offset


FOREVER_MS = 2**63 - 1
_new_object = object.__new__
_DECODERS = (MessageRecord, decode_message, decode_properties, msgid.host_to_string)


def query_result(messages: list, last_ts: int, last_phy: int, truncated: bool,
                 collisions_filtered: int) -> QueryMessageResult:
    """`QueryMessageResult(messages, last_ts, last_phy, truncated=..., collisions_filtered=...)`
    without its frozen dataclass __init__ (one object.__setattr__ per field, about half of a key
    query's Python time): the same fields, in the same instance dict (tests/test_kernel_query.py
    checks that they are all of them)."""
    result = _new_object(QueryMessageResult)
    result.__dict__.update(messages=messages, index_last_update_timestamp=last_ts,
                           index_last_update_phy_offset=last_phy, truncated=truncated,
                           collisions_filtered=collisions_filtered)
    return result


def segment_store_time_reader(files, first_from: int, segment_bytes: int, count: int, slow):
    """`store_time_of(phy_offset, size)` over the commit log's segments `files[:count]` as they are now
    (`first_from` the first one's offset, `segment_bytes` each): the record's head inside one
    segment's readable part is read straight from its map, anything else asks `slow` (the live
    `CommitLog.store_timestamp_at`, which answers the same). -1 below `first_from`."""
    def store_time_of(phy_offset: int, size: int) -> int:
        if phy_offset < first_from:
            return -1      # below commit_log.min_offset()
        index = (phy_offset - first_from) // segment_bytes
        if index < count:
            mapped = files[index]
            position = phy_offset - mapped.file_from_offset
            if 0 <= position < segment_bytes and not mapped.destroyed:
                limit = mapped.read_position
                if position + 40 <= limit:
                    buffer = mapped.buffer
                    try:
                        if _unpack_int(buffer, position + 36)[0] & SYSFLAG_BORNHOST_V6:
                            position += _STORE_TS_V6
                        else:
                            position += _STORE_TS_V4
                        if position + 8 <= limit:
                            return _unpack_long(buffer, position)[0]
                    except ValueError:
                        pass    # unmapped since the check (cleanup deleted it): the live log answers
        return slow(phy_offset, size)
    return store_time_of


class LookupsMixin:
    def look_message_by_offset(self, phy_offset: int) -> MessageRecord:
        """Decode the record at a physical offset (spec §10.4); MessageNotFoundError if none."""
        self._check_open()
        raw = self.commit_log.read_record(phy_offset)
        if raw is None:
            raise MessageNotFoundError(f"no record starts at physical offset {phy_offset}")
        return decode_message(raw)

    def view_message(self, msg_id: str) -> MessageRecord:
        """Find a message by its offset msgId (store host + physical offset, spec §3.1)."""
        _host, phy_offset = decode_message_id(msg_id)
        return self.look_message_by_offset(phy_offset)

    def query_message(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                      end_ms: int = FOREVER_MS) -> QueryMessageResult:
        """Messages of `topic` whose KEYS or UNIQ_KEY contain `key`, stored in [begin, end] (spec
        §10.5). Up to 3 index rounds; hash collisions are filtered out by checking the real keys."""
        if self.closed:
            raise StoreClosedError("the store is closed")
        cap = self.config.max_msgs_num_batch      # max(1, min(max_num, cap)), without two calls
        if cap < max_num:
            max_num = cap
        if not max_num > 1:
            max_num = 1
        index = self.index_service
        cap = index.max_msgs_num_batch
        # The rounds, the index walks, the reads, the check of the keys (hash collisions are
        # dropped, as a Java client does; like the broker, a message indexed twice after a crash's
        # re-dispatch is returned twice) and the result object in one call (store.kernel.query),
        # under the index service's lock as its queryOffset.
        answer = query_message_fast(index, topic, key, cap if cap < max_num else max_num, begin_ms,
                                    end_ms, self.commit_log.mapped_files, _DECODERS,
                                    QueryMessageResult, max_num)
        if answer is NotImplemented:               # the C asks its twin
            answer = query_message_py(index, topic, key, cap if cap < max_num else max_num,
                                      begin_ms, end_ms, self.commit_log.mapped_files, _DECODERS,
                                      QueryMessageResult, max_num)
        return answer

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        batch = self._batch_queue(topic, queue_id)      # [5.x] batch topics: message offsets
        if batch is not False:
            return batch.min_offset() if batch is not None else 0
        return self.consume_queues.get_min_offset(topic, queue_id)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        batch = self._batch_queue(topic, queue_id)
        if batch is not False:
            return batch.max_offset() if batch is not None else 0
        return self.consume_queues.get_max_offset(topic, queue_id)

    def _unit_of(self, topic: str, queue_id: int, queue_offset: int):
        """The unit holding `queue_offset`: [5.x] of a batch topic, the unit of the record holding
        that message (`BatchConsumeQueue.get`); else the consume queue's unit. None: none."""
        batch = self._batch_queue(topic, queue_id)
        if batch is not False:
            return None if batch is None else batch.get_unit(queue_offset)
        return self.consume_queues.get_unit(topic, queue_id, queue_offset)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        unit = self._unit_of(topic, queue_id, queue_offset)
        return unit.phy_offset if unit is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int,
                                    boundary: str | None = None) -> int:
        """Queue offset of the message stored nearest `timestamp_ms` (spec §10.3).

        `boundary`: "nearest" (4.9.7, the default for 4.9 stores), "lower" (first message stored at
        or after the time; the 5.x default) or "upper" (last message stored at or before it).
        [5.x] A batch topic's queue answers as `BatchConsumeQueue.getOffsetInQueueByTime` does
        (lower/upper only; store.consumequeue.batch.by_time).
        """
        boundary = boundary or ("lower" if self.style == "5.x" else "nearest")
        if boundary not in BOUNDARIES:
            raise ValueError(f"boundary must be one of {BOUNDARIES}, not {boundary!r}")
        if self._parts.batch_queues is not None:       # else no batch topic (_batch_queue)
            batch = self._batch_queue(topic, queue_id)
            if batch is not False:   # [5.x] a batch topic: store times of its units, message offsets
                check_batch_boundary(boundary)
                return 0 if batch is None else batch.offset_by_time(timestamp_ms, boundary)
        # _store_time_reader(), inlined (this is the hot path of a time lookup)
        cached = self.__dict__.get("_time_reader")
        if cached is None or cached[0] is not self.commit_log.mapped_files.files:
            cached = self._new_time_reader()
        memo = cached[2]
        if memo is not None and len(memo) >= STORE_TIME_MEMO_MAX:
            memo.clear()
        queues = self.consume_queues
        if boundary == "nearest" and queues.nearest_by_time is not None:
            return queues.nearest_by_time(topic, queue_id, timestamp_ms, cached[1])
        return queues.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms, boundary,
                                                  cached[1])

    def _store_time_of(self, phy_offset: int, size: int) -> int:
        """Store time of the record at `phy_offset`, -1 below the commit log or when unreadable."""
        return self._store_time_reader()(phy_offset, size)

    def _store_time_reader(self):
        """`_make_store_time_reader()`, made again only when the commit log's segment list changed.

        A reader depends on nothing but that list (a new list object on every change: segments are
        added and dropped copy-on-write), so one made for the same list answers the same.
        """
        cached = self.__dict__.get("_time_reader")
        if cached is None or cached[0] is not self.commit_log.mapped_files.files:
            cached = self._new_time_reader()
        memo = cached[2]
        if memo is not None and len(memo) >= STORE_TIME_MEMO_MAX:
            memo.clear()
        return cached[1]

    def _new_time_reader(self) -> tuple:
        """(segment list, `_make_store_time_reader()` for it, its memo or None), remembered."""
        files = self.commit_log.mapped_files.files
        reader = self._make_store_time_reader()
        cached = self.__dict__["_time_reader"] = (files, reader, getattr(reader, "memo", None))
        return cached

    def _make_store_time_reader(self):
        """A `_store_time_of` for lookups, which call it ~log2(n) times each.

        It holds the commit log's segment list as it was when made, and reads the usual case (the
        record's head inside one segment's readable part) straight from the map; anything else
        (a segment appended or deleted since, a record past the readable part) takes
        `CommitLog.store_timestamp_at` on the live segments, which gives the same answers.

        On a writable store it carries `memo` (this store's dict phy offset -> store time) and
        `floor` (the commit log's start): the searches of store.consumequeue.time_search remember there
        the times of their first probes, the same units for every search of a file. That is sound
        because a record never changes while the store is open (the commit log only grows;
        recovery, the only thing that truncates it, runs before the store opens), and offsets
        below the start are never looked up in it. A read-only store follows a writer that may
        recover and rewrite its tail, so it has no memo.
        """
        mapped_files = self.commit_log.mapped_files
        files = mapped_files.files
        slow = self.commit_log.store_timestamp_at
        if not files:
            return lambda phy_offset, size: -1 if phy_offset < 0 else slow(phy_offset, size)
        first_from = files[0].file_from_offset
        segment_bytes = mapped_files.file_size_bytes
        count = len(files)

        store_time_of = segment_store_time_reader(files, first_from, segment_bytes, count, slow)

        if KERNEL_COMPILED:
            # search_nearest_units then runs in C on these segments (with no memo to fill).
            store_time_of.segments = (files, first_from, segment_bytes, count)
            if not self.read_only:
                # The C remembers here the offset and map of each segment it found full, which
                # never change while this segment list is current (store.kernel.c.lookup.c's
                # segment_load); a read-only store follows a writer that may recover and cut them.
                store_time_of.full_segments = [None] * count
        if not self.read_only:
            memo = self.__dict__.get("_store_times")
            if memo is None:
                memo = self.__dict__["_store_times"] = {}
            elif len(memo) >= STORE_TIME_MEMO_MAX:
                memo.clear()
            store_time_of.memo = memo
            store_time_of.floor = first_from
        return store_time_of

    def _read_record(self, phy_offset: int) -> bytes | None:
        """`CommitLog.read_record` (the raw record at `phy_offset`, None if there is none) with one
        segment lookup instead of two; same checks: the head and the whole record within the
        segment's readable part, a message magic, TOTALSIZE > 0."""
        mapped = self.commit_log.mapped_files.find_file(phy_offset)
        if mapped is None or mapped.destroyed:
            return None
        position = phy_offset - mapped.file_from_offset
        limit = mapped.read_position
        if position < 0 or position + 8 > limit:
            return None
        buffer = mapped.buffer
        size, magic = _unpack_size_magic(buffer, position)
        if (magic != MESSAGE_MAGIC_V1 and magic != MESSAGE_MAGIC_V2) or size <= 0 \
                or position + size > limit:
            return None
        return buffer[position:position + size]

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        unit = self._unit_of(topic, queue_id, queue_offset)
        if unit is None:
            return -1
        return self.commit_log.store_timestamp_at(unit.phy_offset, unit.size)

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the first message of a queue, or of the whole commit log (-1 if none).

        4.9.7 reads the store-wide value through a buffer of 2 x maxMessageSize, which fails (-1)
        when the first segment holds fewer readable bytes than that; 4.9 stores keep that answer.
        5.3.3 throws when the first record's born host is IPv6 (and brokerIP1 is not): 5.x stores
        raise EarliestTimeUnavailable there (store.commitlog.earliest), which carries the first
        record's store time.
        """
        if topic is not None:
            return self.get_message_store_timestamp(
                topic, queue_id, self.get_min_offset_in_queue(topic, queue_id))
        if self.style == "5.x":
            return earliest_message_time_5x(self.commit_log, self.config.store_host)
        min_offset = self.commit_log.min_offset()
        if self.style != "5.x":
            mapped = self.commit_log.mapped_files.find_file(min_offset)
            size = self.config.max_message_size * 2
            if mapped is None or (min_offset - mapped.file_from_offset) + size > mapped.read_position:
                return -1
        if min_offset >= self.commit_log.max_offset():
            return -1
        return self.commit_log.store_timestamp_at(min_offset)

    def queues(self) -> list[tuple[str, int]]:
        """Every (topic, queue_id) with a consume queue, sorted."""
        return sorted(self.consume_queues.queues())

    def topic_names(self) -> list[str]:
        return sorted({topic for topic, _ in self.queues()})

    def queue_summaries(self) -> list[QueueSummary]:
        cq = self.consume_queues
        return [QueueSummary(t, q, cq.get_min_offset(t, q), cq.get_max_offset(t, q),
                             cq.get_max_phy_end(t, q)) for t, q in self.queues()]

    def total_messages(self) -> int:
        return sum(s.depth for s in self.queue_summaries())

    def dispatch_behind_bytes(self) -> int:
        return self.services.reput.behind_bytes()
