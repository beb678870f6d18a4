"""The commit log: every message of every topic, appended in one sequence of segment files.

Records are laid out as in spec §2. Appends happen under one put lock; inside it the record gets its
physical offset, its queue offset and its final store timestamp, and is copied into the last segment.
When a record (or a whole batch) does not fit with 8 bytes to spare, an 8-byte BLANK record
(`TOTALSIZE = bytes left`, `BLANK_MAGIC`) ends the file and the record goes to the next one (§2.5).

Crash safety of one append: the record's bytes after its first 8 are copied first and its TOTALSIZE and
magic last, so a process killed mid-copy leaves either the whole record or zeros where its header
belongs (which recovery reads as the end of the log). In a batch the first record's header is written
last, so a batch is visible whole or not at all.
"""

from __future__ import annotations

import collections
import struct
import threading
import time
from dataclasses import dataclass

from store.codec import message as msgcodec
from store.codec import prop_crc, record_check
from store.codec.message import DispatchRequest
from store.codec.msgid import msg_id_prefix
from store.kernel import COMPILED, place
from store.kernel.put_batch import place_batch
from store.mappedfile.mapped_file import MappedFile
from store.mappedfile.mapped_file_queue import MappedFileQueue

_PATCH_OFFSETS = struct.Struct(">qq").pack_into   # QUEUEOFFSET, PHYSICALOFFSET (adjacent)
_PATCH_LONG = struct.Struct(">q").pack_into
_TRANSACTION_MASK = 0x0C
_TRANSACTION_PREPARED = 0x04
_TRANSACTION_ROLLBACK = 0x0C
_END_FILE_MIN_BLANK = msgcodec.END_FILE_MIN_BLANK_LENGTH


# Not frozen: a frozen dataclass costs ~5x more to build, and one is built per message.
# Treat instances as immutable.
@dataclass(slots=True)
class RecordDraft:
    """What the put path knows about an encoded record before it is placed in the log."""

    topic: str
    queue_id: int
    sys_flag: int
    tags_code: int
    keys: str
    uniq_key: str | None
    prepared_transaction_offset: int
    properties: dict | None     # None from the compiled encoder (no dispatcher reads it)
    delivery_delay_ms: int = -1     # >= 0 for SCHEDULE_TOPIC_XXXX: tagsCode = store time + delay
    store_timestamp_position: int = 56   # 48 + born host size (IPv6 born hosts move it)
    seal_prop_crc: bool = False     # [5.x] enabledAppendPropCRC: fill the reserved `__CRC32#` digits


# Not frozen: a frozen dataclass costs ~5x more to build, and one is built per message.
# Treat instances as immutable.
@dataclass(slots=True)
class AppendResult:
    wrote_offset: int
    wrote_bytes: int          # bytes of the record(s), not counting a BLANK written before them
    queue_offset: int
    store_timestamp: int
    msg_ids: tuple[str, ...]
    message_count: int


class RecordTooLargeForSegment(Exception):
    """The encoded record can never fit in one segment (it needs size + 8 <= segment size)."""


# NOT_TYPE and COMMIT_TYPE: the transaction kinds (sys_flag & 0x0C) that get a queue offset and a
# consume-queue unit. `is_queued_transaction_type` for one flag; hot loops test membership directly.
QUEUED_TRANSACTION_KINDS = (0x00, 0x08)


def queued_transaction_mask(sys_flags):
    """`is_queued_transaction_type` of a numpy array of sys flags (boolean array)."""
    kinds = sys_flags & _TRANSACTION_MASK
    return (kinds == QUEUED_TRANSACTION_KINDS[0]) | (kinds == QUEUED_TRANSACTION_KINDS[1])


def is_queued_transaction_type(sys_flag: int) -> bool:
    """NOT_TYPE and COMMIT_TYPE records get a queue offset and a consume-queue unit (spec §2.8)."""
    kind = sys_flag & _TRANSACTION_MASK
    return kind != _TRANSACTION_PREPARED and kind != _TRANSACTION_ROLLBACK


class CommitLog:
    """Segment files of the commit log plus the put lock and the queue-offset table."""

    def __init__(self, directory: str, segment_size_bytes: int, *, read_only: bool,
                 store_host: str, clock_ms=None):
        self.mapped_files = MappedFileQueue(directory, segment_size_bytes, read_only=read_only)
        self.mapped_files.hold_sync_fds = not read_only   # a few segments, synced very often
        # Flushes sync the written range, the map's pages below it dropped first: no TLB shootdown
        # per page a sync cleans (store.kernel.prefault.sync_range; the twin holds the GIL). Not
        # under SYNC_FLUSH (the store's services turn it off): records go in by pwrite there, and
        # every sync is an fdatasync, as the group commit's.
        self.mapped_files.ranged_sync = COMPILED and not read_only
        self.segment_size_bytes = segment_size_bytes
        self.read_only = read_only
        self.store_host = store_host
        self._msg_id_prefix = msg_id_prefix(store_host)   # + f"{phy_offset:016X}" is a msgId
        self.clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.put_lock = threading.Lock()
        # "<topic>-<queueId>" -> next queue offset (spec §2.8), keyed by a tuple here.
        self.queue_offsets: dict[tuple[str, int], int] = {}
        # Dispatch requests made by the put path, in log order, so the reput service does not have
        # to parse what we just encoded. Entries are (phy_offset, DispatchRequest). Bounded by the
        # dispatch backlog, which the reput service drains continuously.
        self.pending_dispatch: collections.deque = collections.deque()
        # False when the reput service dispatches straight from the log (store.services.dispatch_rows):
        # it would not use the requests, so the put path does not make them.
        self.make_dispatch_requests = True
        self.last_store_timestamp = 0
        self.confirm_offset = -1

    # -- offsets ---------------------------------------------------------------------------------

    def min_offset(self) -> int:
        return self.mapped_files.min_offset()

    def max_offset(self) -> int:
        return self.mapped_files.max_offset()

    def max_wrote_offset(self) -> int:
        return self.mapped_files.max_wrote_offset()

    def next_file_start(self, phy_offset: int) -> int:
        size = self.segment_size_bytes
        return phy_offset + size - phy_offset % size

    # -- write path ------------------------------------------------------------------------------

    def append_one(self, record: bytearray, draft: RecordDraft) -> AppendResult:
        """`append` for a single record: the put path's common case, with the least work under the
        lock (same bytes, same rules)."""
        size = len(record)
        if size + msgcodec.END_FILE_MIN_BLANK_LENGTH > self.segment_size_bytes:
            raise RecordTooLargeForSegment(
                f"{size} bytes need a commit log segment of at least {size + 8} bytes")
        kind = draft.sys_flag & _TRANSACTION_MASK
        queued = kind != _TRANSACTION_PREPARED and kind != _TRANSACTION_ROLLBACK
        topic = draft.topic
        queue_id = draft.queue_id
        with self.put_lock:
            store_timestamp = self.clock_ms()
            if store_timestamp < self.last_store_timestamp:
                store_timestamp = self.last_store_timestamp  # keep store times non-decreasing
            mapped, position = self._segment_with_room(size)
            key = (topic, queue_id)
            queue_offset = self.queue_offsets.get(key, 0) if queued else 0
            phy_offset = mapped.file_from_offset + position
            if draft.seal_prop_crc:
                # The CRC covers offsets and store time: set them in the record, then seal it
                # (DefaultAppendMessageCallback.doAppend); `place` writes the same values again.
                _PATCH_OFFSETS(record, msgcodec.QUEUE_OFFSET_POSITION, queue_offset, phy_offset)
                _PATCH_LONG(record, draft.store_timestamp_position, store_timestamp)
                prop_crc.seal(record)
            # Offsets and store time set in the segment, size and magic last: see module docstring.
            place(mapped.write_buffer if mapped.write_buffer is not None else mapped.buffer,
                  position, record, queue_offset, phy_offset, draft.store_timestamp_position,
                  store_timestamp)
            mapped.wrote_position = position + size
            if queued:
                self.queue_offsets[key] = queue_offset + 1
            self.last_store_timestamp = store_timestamp
            if not self.make_dispatch_requests:
                return AppendResult(phy_offset, size, queue_offset, store_timestamp,
                                    (self._msg_id_prefix + f"{phy_offset:016X}",), 1)
            tags_code = draft.tags_code if draft.delivery_delay_ms < 0 else \
                store_timestamp + draft.delivery_delay_ms
            self.pending_dispatch.append((phy_offset, DispatchRequest(
                topic, queue_id, phy_offset, size, tags_code, store_timestamp,
                queue_offset, draft.keys, draft.uniq_key, draft.sys_flag,
                draft.prepared_transaction_offset, draft.properties)))
        return AppendResult(phy_offset, size, queue_offset, store_timestamp,
                            (self._msg_id_prefix + f"{phy_offset:016X}",), 1)

    def append(self, records: list[bytearray], drafts: list[RecordDraft],
               now_ms: int | None = None) -> AppendResult:
        """Append one record, or a batch of one topic and queue (one draft per record), in one
        segment."""
        assert len(records) == len(drafts) and records
        total = sum(len(r) for r in records)
        if total + msgcodec.END_FILE_MIN_BLANK_LENGTH > self.segment_size_bytes:
            raise RecordTooLargeForSegment(
                f"{total} bytes need a commit log segment of at least {total + 8} bytes")
        first = drafts[0]
        queued = is_queued_transaction_type(first.sys_flag)
        key = (first.topic, first.queue_id)
        with self.put_lock:
            store_timestamp = self.clock_ms() if now_ms is None else now_ms
            if store_timestamp < self.last_store_timestamp:
                store_timestamp = self.last_store_timestamp  # keep store times non-decreasing
            mapped = self.mapped_files.last_file_or_create(0)
            if total + msgcodec.END_FILE_MIN_BLANK_LENGTH > mapped.free_bytes():
                self._write_blank(mapped)
                mapped = self.mapped_files.last_file_or_create(0)
            queue_offset = self.queue_offsets.get(key, 0) if queued else 0
            position = mapped.wrote_position
            phy_offset = mapped.file_from_offset + position
            host_hex = self._msg_id_prefix
            msg_ids = []
            add_id = msg_ids.append
            add_request = self.pending_dispatch.append
            requests = []
            cursor_phy = phy_offset
            this_queue_offset = queue_offset
            make_requests = self.make_dispatch_requests
            for record, draft in zip(records, drafts):
                size = len(record)
                _PATCH_OFFSETS(record, msgcodec.QUEUE_OFFSET_POSITION,
                               this_queue_offset if queued else 0, cursor_phy)
                _PATCH_LONG(record, draft.store_timestamp_position, store_timestamp)
                if draft.seal_prop_crc:
                    prop_crc.seal(record)
                add_id(host_hex + f"{cursor_phy:016X}")
                if not make_requests:
                    cursor_phy += size
                    this_queue_offset += 1
                    continue
                tags_code = draft.tags_code if draft.delivery_delay_ms < 0 else \
                    store_timestamp + draft.delivery_delay_ms
                requests.append((cursor_phy, DispatchRequest(
                    draft.topic, draft.queue_id, cursor_phy, size, tags_code, store_timestamp,
                    this_queue_offset if queued else 0, draft.keys, draft.uniq_key, draft.sys_flag,
                    draft.prepared_transaction_offset, draft.properties)))
                cursor_phy += size
                this_queue_offset += 1
            self._copy_records(mapped, position, records)
            mapped.wrote_position = position + total
            if queued:
                self.queue_offsets[key] = queue_offset + len(records)
            self.last_store_timestamp = store_timestamp
            for request in requests:
                add_request(request)
        return AppendResult(phy_offset, total, queue_offset, store_timestamp, tuple(msg_ids),
                            len(records))

    def append_encoded(self, records: bytearray, layout: bytes, topic: str, queue_id: int,
                       sys_flag: int, count: int) -> AppendResult:
        """`append` of `store.kernel.put_batch.encode_batch`'s answer (one record or a batch of one
        topic and queue, no delay, no `__CRC32#` trailer): offsets, store time and msgIds set and the
        records copied in one native call, the first header last; the same bytes, offsets and msgIds
        as `append`. No dispatch requests: only for when `make_dispatch_requests` is off."""
        total = len(records)
        kind = sys_flag & _TRANSACTION_MASK
        queued = kind != _TRANSACTION_PREPARED and kind != _TRANSACTION_ROLLBACK
        with self.put_lock:
            store_timestamp = self.clock_ms()
            if store_timestamp < self.last_store_timestamp:
                store_timestamp = self.last_store_timestamp  # keep store times non-decreasing
            files = self.mapped_files.files
            mapped = files[-1] if files else None
            if mapped is None or total + _END_FILE_MIN_BLANK > \
                    mapped.file_size_bytes - mapped.wrote_position:
                mapped, position = self._segment_with_room(total)   # a new segment, or a roll
            else:
                position = mapped.wrote_position    # the common case, _segment_with_room's answer
            key = (topic, queue_id)
            queue_offset = self.queue_offsets.get(key, 0) if queued else 0
            phy_offset = mapped.file_from_offset + position
            target = mapped.write_buffer
            msg_ids = place_batch(mapped.buffer if target is None else target, position, records,
                                  layout, queue_offset, phy_offset, store_timestamp, queued,
                                  self._msg_id_prefix)
            mapped.wrote_position = position + total
            if queued:
                self.queue_offsets[key] = queue_offset + count
            self.last_store_timestamp = store_timestamp
        return AppendResult(phy_offset, total, queue_offset, store_timestamp, msg_ids, count)

    def _segment_with_room(self, size: int) -> tuple[MappedFile, int]:
        """Under the put lock: the segment `size` bytes go into and where, the last one closed with
        a BLANK filler first when they and the end-of-file filler don't fit in it."""
        files = self.mapped_files.files
        mapped = files[-1] if files else None
        if mapped is None or mapped.wrote_position >= mapped.file_size_bytes:
            mapped = self.mapped_files.last_file_or_create(0)
        if size + msgcodec.END_FILE_MIN_BLANK_LENGTH > mapped.file_size_bytes - mapped.wrote_position:
            self._write_blank(mapped)
            mapped = self.mapped_files.last_file_or_create(0)
        return mapped, mapped.wrote_position

    @staticmethod
    def _copy_records(mapped: MappedFile, position: int, records: list[bytearray]) -> None:
        target = mapped.write_buffer if mapped.write_buffer is not None else mapped.buffer
        cursor = position
        spans = []
        for record in records:
            size = len(record)
            target[cursor + 8:cursor + size] = memoryview(record)[8:]
            spans.append((cursor, record))
            cursor += size
        for start, record in reversed(spans):
            target[start:start + 8] = memoryview(record)[:8]

    def _write_blank(self, mapped: MappedFile) -> None:
        free = mapped.free_bytes()
        assert free >= msgcodec.END_FILE_MIN_BLANK_LENGTH
        position = mapped.wrote_position
        target = mapped.write_buffer if mapped.write_buffer is not None else mapped.buffer
        target[position:position + 8] = msgcodec.encode_blank(free)
        mapped.wrote_position = mapped.file_size_bytes

    # -- read path -------------------------------------------------------------------------------

    def read(self, phy_offset: int, size: int) -> bytes | None:
        """A copy of [phy_offset, phy_offset+size) if it lies inside one readable segment."""
        mapped = self.mapped_files.find_file(phy_offset)
        if mapped is None:
            return None
        return mapped.read(phy_offset - mapped.file_from_offset, size)

    def view(self, phy_offset: int, size: int) -> memoryview | None:
        mapped = self.mapped_files.find_file(phy_offset)
        if mapped is None:
            return None
        return mapped.view(phy_offset - mapped.file_from_offset, size)

    def record_size_at(self, phy_offset: int) -> int | None:
        head = self.read(phy_offset, 8)
        if head is None:
            return None
        size = int.from_bytes(head[:4], "big", signed=True)
        magic = int.from_bytes(head[4:8], "big", signed=True)
        if magic not in (msgcodec.MESSAGE_MAGIC_V1, msgcodec.MESSAGE_MAGIC_V2) or size <= 0:
            return None
        return size

    def read_record(self, phy_offset: int) -> bytes | None:
        """The raw bytes of the record starting at `phy_offset` (None if there is none)."""
        size = self.record_size_at(phy_offset)
        if size is None:
            return None
        return self.read(phy_offset, size)

    def store_timestamp_at(self, phy_offset: int, size: int | None = None) -> int:
        """STORETIMESTAMP of the record at `phy_offset`, -1 if unreadable."""
        head = self.read(phy_offset, 40)
        if head is None:
            return -1
        sys_flag = int.from_bytes(head[36:40], "big", signed=True)
        position = msgcodec.store_timestamp_position(sys_flag)
        raw = self.read(phy_offset + position, 8)
        return -1 if raw is None else int.from_bytes(raw, "big", signed=True)

    def scan(self, start_phy_offset: int, *, check_crc: bool, limit_offset: int | None = None,
             max_records: int | None = None):
        """Yield (phy_offset, CheckResult) from `start_phy_offset` until the first invalid record.

        A BLANK moves to the next file and is yielded too. Stops at the end of the files, at
        `limit_offset`, after `max_records` records, or after yielding the first INVALID result.
        """
        phy_offset = start_phy_offset
        count = 0
        while True:
            if limit_offset is not None and phy_offset >= limit_offset:
                return
            mapped = self.mapped_files.find_file(phy_offset)
            if mapped is None:
                return
            position = phy_offset - mapped.file_from_offset
            result = record_check.check_message(mapped.buffer, position, check_crc=check_crc,
                                                limit=mapped.read_position)
            yield phy_offset, result
            if result.kind == record_check.CHECK_RECORD:
                phy_offset += result.size
                count += 1
                if max_records is not None and count >= max_records:
                    return
            elif result.kind == record_check.CHECK_BLANK:
                phy_offset = mapped.file_end_offset
            else:
                return
