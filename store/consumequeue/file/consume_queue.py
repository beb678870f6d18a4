"""One file-based consume queue (`ConsumeQueue`, spec §4, §10.3, §11.4, §12.3).

One queue is a `MappedFileQueue` in `consumequeue/<topic>/<queueId>/`: files of
`mappedFileSizeConsumeQueue` bytes (rounded up to whole units) named by their first CQ byte offset
(queue offset x 20), holding 20-byte units (layout in `store.codec.cq_unit`). The end of a queue is the
first invalid (all-zero) unit; `min_logic_offset` (a CQ byte offset) lives only in memory.

The per-store part (the directory scan and the queue table) is `store.consumequeue.file.queue_store`.
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

import numpy as np

from store.codec.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PREFILL_UNIT, UNIT_STRUCT, CqUnit
from store.consumequeue.base import STYLE_5X, StoreTimeOf
from store.consumequeue.file.mapping import OnDemandMapping
from store.consumequeue.file.queue_recovery import QueueRecovery
from store.consumequeue.file.time_search import offset_by_time
from store.mappedfile.mapped_file import fsync_directory
from store.mappedfile.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)


class _Unit:
    """The fields of a dispatch request `put` reads, for units that come as columns."""

    __slots__ = ("commit_log_offset", "msg_size", "tags_code", "consume_queue_offset")

    def __init__(self, commit_log_offset: int, msg_size: int, tags_code: int, queue_offset: int):
        self.commit_log_offset = commit_log_offset
        self.msg_size = msg_size
        self.tags_code = tags_code
        self.consume_queue_offset = queue_offset


class FileConsumeQueue(OnDemandMapping, QueueRecovery):
    """One consume queue (topic, queue_id). Writes are serialized by the owning store's lock."""

    def __init__(self, directory: str, topic: str, queue_id: int, file_size_bytes: int, *,
                 read_only: bool, style: str):
        assert file_size_bytes % CQ_UNIT_SIZE == 0
        self.topic = topic
        self.queue_id = queue_id
        self.file_size_bytes = file_size_bytes
        self.read_only = read_only
        self.style = style
        self.directory = directory
        self._mapped_files: MappedFileQueue | None = self._new_file_queue()
        self._hibernated = None  # saved positions while the files are unmapped (see hibernate)
        self.on_touch = None     # set by the store: keeps the number of mapped queues bounded
        # Set by the store: records directories whose new entries must be fsynced before the next
        # flush of unit data (batched; a directory fsync per new queue would stall dispatch).
        self.on_new_directory_entry = None
        self.max_phy_end = -1          # maxPhysicOffset: end of the last unit written/recovered
        self.min_logic_offset = 0      # CQ byte offset of the first unit still backed by the log
        self.commit_log_min_offset = 0  # last value seen by correct_min_offset (time lookups)
        self.order_warnings = 0        # "[BUG]logic queue order maybe wrong" count
        # Units at or past this queue offset were written here by dispatch at their record's own
        # queue offset (so they name their record); those below came from disk (load/recovery)
        # or follow an out-of-order write: a pull checks their records (commitlog/read_path.py).
        self.trusted_from = 0
        self._first_created = None     # the file created while the queue had none (pre-fill rule)
        self.time_cache: dict[tuple[int, str], int] = {}  # (file start, "start"/"stop") -> ms

    # -- load (recovery, truncation and refresh: store.consumequeue.file.queue_recovery) ----------

    def load(self) -> None:
        self.mapped_files.load()
        # Every unit on disk is untrusted (recovery lowers this to where the queue really ends);
        # read-only, another process writes: nothing is.
        files = self.mapped_files.files
        self.trusted_from = 1 << 62 if self.read_only else \
            files[-1].file_end_offset // CQ_UNIT_SIZE if files else 0

    # -- writing (spec §4.4) ---------------------------------------------------------------------

    def put(self, requests: Sequence) -> int:
        """Append the units of `requests` (one queue, dispatch order). Returns how many were written."""
        file_size = self.file_size_bytes
        pending = bytearray()
        mapped = None
        base_position = 0
        written = 0
        pack = UNIT_STRUCT.pack
        for request in requests:
            phy_offset = request.commit_log_offset
            size = request.msg_size
            if phy_offset + size <= self.max_phy_end:
                continue  # duplicate dispatch
            queue_offset = request.consume_queue_offset
            expected = queue_offset * CQ_UNIT_SIZE
            if mapped is None or base_position + len(pending) == file_size:
                if mapped is not None:
                    mapped.append(bytes(pending))
                    pending.clear()
                mapped = self._last_file_or_create(expected)
                base_position = mapped.wrote_position
            if mapped is self._first_created and queue_offset != 0 and \
                    base_position + len(pending) == 0:
                self.min_logic_offset = expected
                pending += PREFILL_UNIT * ((expected % file_size) // CQ_UNIT_SIZE)
            current = mapped.file_from_offset + base_position + len(pending)
            if queue_offset != 0 and expected < current:
                continue  # already built
            if expected != current:
                self.trusted_from = max(self.trusted_from, current // CQ_UNIT_SIZE + 1)
                self.order_warnings += 1
                log.warning("logic queue order maybe wrong: %s-%d expected %d, writing at %d",
                            self.topic, self.queue_id, expected, current)
            pending += pack(phy_offset, size, request.tags_code)
            self.max_phy_end = phy_offset + size
            written += 1
        if mapped is not None and pending:
            mapped.append(bytes(pending))
        return written

    def put_run(self, units, queue_offsets, consecutive: bool, first_end: int, last_end: int) -> int:
        """`put` of one queue's units already encoded (`store.kernel.unit_runs`; `first_end` /
        `last_end`: phy end of the first and last record): one append when they continue the last
        file at its write position with consecutive queue offsets and fit in it, else
        `put_columns`. Returns how many were written."""
        count = len(queue_offsets)
        files = self.mapped_files.files
        mapped = files[-1] if files else None
        first_queue_offset = int(queue_offsets[0])
        if consecutive and mapped is not None and first_end > self.max_phy_end and \
                first_queue_offset * CQ_UNIT_SIZE == mapped.file_from_offset + mapped.wrote_position and \
                count * CQ_UNIT_SIZE <= self.file_size_bytes - mapped.wrote_position and \
                not (mapped is self._first_created and mapped.wrote_position == 0 and first_queue_offset):
            mapped.append(units)
            self.max_phy_end = last_end
            return count
        columns = np.frombuffer(units, dtype=CQ_UNIT_DTYPE)
        return self.put_columns(columns["phy_offset"].astype(np.int64), columns["size"].astype(np.int64),
                                columns["tags_code"].astype(np.int64), queue_offsets)

    def put_columns(self, phy_offsets, sizes, tags_codes, queue_offsets) -> int:
        """`put` of units given as int64 columns (one queue, dispatch order), with the same bytes
        and rules: a run that continues the last file at its write position with consecutive queue
        offsets is appended in one write; any other unit (a new file, a pre-fill, a duplicate, an
        out-of-order offset) goes through `put`. Returns how many were written."""
        count = len(phy_offsets)
        file_size = self.file_size_bytes
        done = written = 0
        mapped_files = self.mapped_files
        for _ in range(2 * count + 1):      # bounded: each pass takes at least one unit
            if done >= count:
                break
            files = mapped_files.files
            mapped = files[-1] if files else None
            first_queue_offset = int(queue_offsets[done])
            if mapped is None or mapped.wrote_position >= file_size or \
                    int(phy_offsets[done]) + int(sizes[done]) <= self.max_phy_end or \
                    first_queue_offset * CQ_UNIT_SIZE != mapped.file_from_offset + mapped.wrote_position or \
                    (mapped is self._first_created and mapped.wrote_position == 0 and first_queue_offset):
                written += self.put([_Unit(int(phy_offsets[done]), int(sizes[done]),
                                           int(tags_codes[done]), first_queue_offset)])
                done += 1
                continue
            run = min((file_size - mapped.wrote_position) // CQ_UNIT_SIZE, count - done)
            gaps = np.flatnonzero(queue_offsets[done:done + run] -
                                  np.arange(first_queue_offset, first_queue_offset + run))
            if len(gaps):
                run = int(gaps[0])
            units = np.empty(run, dtype=CQ_UNIT_DTYPE)
            units["phy_offset"] = phy_offsets[done:done + run]
            units["size"] = sizes[done:done + run]
            units["tags_code"] = tags_codes[done:done + run]
            mapped.append(units.tobytes())
            last = done + run - 1
            self.max_phy_end = int(phy_offsets[last]) + int(sizes[last])
            done += run
            written += run
        return written

    def _last_file_or_create(self, expected: int):
        files_before = len(self.mapped_files.files)
        mapped = self.mapped_files.last_file_or_create(expected)
        if files_before == 0:
            self._first_created = mapped
        if len(self.mapped_files.files) != files_before:
            # Make the new name durable before units go into it: after a power cut a queue must not
            # come back with its first file missing while a later one survived.
            # The queue's directory; for a new queue also the topic's, consumequeue/ and the store
            # root (consumequeue/ itself may be new: its entry in the root must survive too).
            levels = 4 if files_before == 0 else 1
            directory = self.directory
            for _ in range(levels):
                if self.on_new_directory_entry is not None:
                    self.on_new_directory_entry(directory)
                else:
                    fsync_directory(directory)
                directory = os.path.dirname(directory)
        return mapped

    # -- reading ---------------------------------------------------------------------------------

    def max_offset(self) -> int:
        if self._mapped_files is None:  # no need to map a queue to answer this
            return self._hibernated[4] // CQ_UNIT_SIZE
        return self._mapped_files.max_offset() // CQ_UNIT_SIZE

    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    def get_units(self, queue_offset: int, max_units: int) -> np.ndarray | None:
        """Units from `queue_offset` to the end of the readable part of its file (`getIndexBuffer`)."""
        data = self.unit_bytes(queue_offset, max_units)
        return None if data is None else np.frombuffer(data, dtype=CQ_UNIT_DTYPE)

    def pull_window(self, queue_offset: int, max_units: int
                    ) -> tuple[int, int, bytes | None, int]:
        """(min offset, max offset, the bytes of up to `max_units` units from `queue_offset`,
        `trusted_from`): what a pull needs in one call. The bytes are None when the offset is
        outside [min, max) (nothing is mapped then) or its file is gone."""
        min_offset = self.min_logic_offset // CQ_UNIT_SIZE
        max_offset = self.max_offset()
        if queue_offset < min_offset or queue_offset >= max_offset:
            return min_offset, max_offset, None, self.trusted_from
        return min_offset, max_offset, self.unit_bytes(
            queue_offset, min(max_units, max_offset - queue_offset)), self.trusted_from

    def pull_window_untouched(self, queue_offset: int, max_units: int
                              ) -> tuple[int, int, bytes | None, int]:
        """`pull_window` of the queue the store touched last (the store checks): the same answer in
        fewer steps, with no LRU touch while it is mapped (the touch would change nothing)."""
        files = self._mapped_files
        if files is None:    # unmapped since: the full path maps it again (and touches)
            return self.pull_window(queue_offset, max_units)
        cq_offset = queue_offset * CQ_UNIT_SIZE
        end, mapped, read_position, buffer = files.end_and_file(cq_offset)
        min_logic_offset = self.min_logic_offset
        min_offset = min_logic_offset // CQ_UNIT_SIZE
        max_offset = end // CQ_UNIT_SIZE
        if queue_offset < min_offset or queue_offset >= max_offset:
            return min_offset, max_offset, None, self.trusted_from
        if queue_offset < 0 or cq_offset < min_logic_offset or mapped is None:
            return min_offset, max_offset, None, self.trusted_from
        position = cq_offset - mapped.file_from_offset
        readable_units = (read_position - position) // CQ_UNIT_SIZE
        if readable_units <= 0:
            return min_offset, max_offset, None, self.trusted_from
        # min(readable_units, max_units, max_offset - queue_offset), at least 0, without
        # min/max (each parses keyword arguments: a tenth of this function's time)
        count = max_offset - queue_offset
        if max_units < count:
            count = max_units
        if readable_units < count:
            count = readable_units
        if count < 0:
            count = 0
        # `mapped.read` without its bounds check: [position, + count units) is readable here
        data = None if mapped.destroyed else buffer[position:position + count * CQ_UNIT_SIZE]
        return min_offset, max_offset, data, self.trusted_from

    def unit_bytes(self, queue_offset: int, max_units: int) -> bytes | None:
        """A copy of the units `get_units` returns (copied: the file may be unmapped later)."""
        cq_offset = queue_offset * CQ_UNIT_SIZE
        if queue_offset < 0 or cq_offset < self.min_logic_offset:
            return None
        mapped = self.mapped_files.find_file(cq_offset)
        if mapped is None:
            return None
        position = cq_offset - mapped.file_from_offset
        readable_units = (mapped.read_position - position) // CQ_UNIT_SIZE
        if readable_units <= 0:
            return None
        count = max(0, min(readable_units, max_units))
        return mapped.read(position, count * CQ_UNIT_SIZE)

    def get_unit(self, queue_offset: int) -> CqUnit | None:
        units = self.get_units(queue_offset, 1)
        if units is None or len(units) == 0:
            return None
        return CqUnit(int(units["phy_offset"][0]), int(units["size"][0]), int(units["tags_code"][0]))

    def offset_by_time(self, timestamp_ms: int, boundary: str, store_time_of: StoreTimeOf) -> int:
        return offset_by_time(self, timestamp_ms, boundary, store_time_of)

    # -- min offset, expiry ----------------------------------------------------------------------

    def _drop_files(self, victims: list) -> None:
        if not self.read_only:
            self.mapped_files.delete_files(victims)
            return
        # Read-only: forget them in memory; MappedFileQueue has no read-only "forget" yet.
        self.mapped_files.files = [f for f in self.mapped_files.files if f not in victims]
        for mapped in victims:
            mapped.close()

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Spec §4.5: the first unit still backed by the commit log (4.9.7 linear / 5.x rules)."""
        self.commit_log_min_offset = commit_log_min_offset
        if self.style == STYLE_5X:
            self._correct_min_offset_5x(commit_log_min_offset)
        else:
            self._correct_min_offset_49(commit_log_min_offset)

    def _correct_min_offset_49(self, commit_log_min_offset: int) -> None:
        first = self.mapped_files.first_file()
        if first is None or first.read_position == 0:
            return
        units = np.frombuffer(first.buffer, dtype=CQ_UNIT_DTYPE,
                              count=first.read_position // CQ_UNIT_SIZE)
        hits = units["phy_offset"] >= commit_log_min_offset
        if hits.any():
            self.min_logic_offset = first.file_from_offset + int(hits.argmax()) * CQ_UNIT_SIZE

    def _correct_min_offset_5x(self, commit_log_min_offset: int) -> None:
        queue_end = self.mapped_files.max_offset()
        if self.min_logic_offset >= queue_end:
            return  # no valid entries
        last = self.mapped_files.last_file()
        if last is None:
            return
        if last.read_position >= CQ_UNIT_SIZE:
            last_phy = UNIT_STRUCT.unpack_from(last.buffer, last.read_position - CQ_UNIT_SIZE)[0]
            if last_phy < commit_log_min_offset:
                self.min_logic_offset = last.file_from_offset + last.read_position
                return
        first = self.mapped_files.first_file()
        start = self.min_logic_offset - first.file_from_offset
        intact = start >= 0
        start = max(start, 0)
        if start >= first.read_position:
            return
        units = np.frombuffer(first.buffer, dtype=CQ_UNIT_DTYPE,
                              count=(first.read_position - start) // CQ_UNIT_SIZE, offset=start)
        phy = units["phy_offset"]
        if intact and int(phy[0]) >= commit_log_min_offset:
            return
        low, high = 0, len(phy) - 1
        while high - low > 1:  # RocketMQ's loop, in units; bounded by log2(units per file)
            mid = (low + high) // 2
            value = int(phy[mid])
            if value > commit_log_min_offset:
                high = mid
            elif value == commit_log_min_offset:
                low = high = mid
            else:
                low = mid
        for index in range(low, high + 1):
            if int(phy[index]) >= commit_log_min_offset:
                self.min_logic_offset = first.file_from_offset + start + index * CQ_UNIT_SIZE
                break

    def delete_expired(self, commit_log_min_offset: int) -> int:
        """Spec §12.3: delete files (never the last) whose last unit is below the log's min offset."""
        victims = []
        for mapped in self.mapped_files.files[:-1]:
            if mapped.read_position < self.file_size_bytes:
                break
            last_phy = UNIT_STRUCT.unpack_from(mapped.buffer, self.file_size_bytes - CQ_UNIT_SIZE)[0]
            if last_phy >= commit_log_min_offset:
                break
            victims.append(mapped)
        if victims:
            self.time_cache.clear()
            self._drop_files(victims)
        self.correct_min_offset(commit_log_min_offset)
        return len(victims)

    def flush(self, least_pages: int) -> None:
        if self.read_only:
            return
        for _ in range(len(self.mapped_files.files) + 1):  # bounded: one file per step
            if not self.mapped_files.flush(least_pages):
                break

    def close(self) -> None:
        if self._mapped_files is not None:
            self._mapped_files.close()

