"""One batch consume queue (`BatchConsumeQueue`, rocketmq-all-5.3.3): a `MappedFileQueue` in
`batchconsumequeue/<topic>/<queueId>/` of files of `mapperFileSizeBatchConsumeQueue` bytes (default
300000 x 46) named by their first byte offset, holding 46-byte units (`store.codec.batch_cq_unit`).

Queue offsets are message offsets ("deep logic offsets"): a unit covers [msg_base_offset,
msg_base_offset + batch_size). The rules, by RocketMQ method:

| method                          | rule here                                                       |
|---------------------------------|-----------------------------------------------------------------|
| `recover`                       | from the third-last file, keep units while valid (phy >= 0, size > 0, base >= 0, batch > 0); cut the files there |
| `putBatchMessagePositionInfo`   | a record at or below the last unit's phy offset is skipped; the unit goes at the queue's end (not at a computed position) |
| `reviseMinOffsetInQueue`        | min = the first file's first unit's base (-1 when there is none) |
| `reviseMaxOffsetInQueue`        | max = the last unit's base + batch size (last file, else the one before; 0 when none) |
| `getBatchMsgIndexBuffer`        | offsets >= max: none; the file: the last one if its first base <= the offset, else the last file (backwards) whose first base <= it; in it the unit with the largest base <= the offset (`binarySearch`) |
| `truncateDirtyLogicFiles`       | units whose record starts at or past the log's end are cut      |
"""

from __future__ import annotations

import numpy as np

from store.codec.batch_cq_unit import (BATCH_CQ_UNIT_DTYPE, BATCH_CQ_UNIT_SIZE, BatchCqUnit,
                                       decode_batch_unit, encode_batch_unit, search_msg_offset,
                                       valid_prefix_units)
from store.consumequeue.batch.by_time import check_batch_boundary, offset_by_time
from store.errors import ConfigError, ReadOnlyStoreError
from store.mappedfile.mapped_file_queue import MappedFileQueue


class BatchConsumeQueue:
    """One batch queue (topic, queue_id). Writes are serialized by the caller."""

    def __init__(self, directory: str, topic: str, queue_id: int, file_size_bytes: int, *,
                 read_only: bool):
        if file_size_bytes <= 0 or file_size_bytes % BATCH_CQ_UNIT_SIZE:
            raise ConfigError(f"mapperFileSizeBatchConsumeQueue={file_size_bytes} is not a "
                              f"positive multiple of the {BATCH_CQ_UNIT_SIZE}-byte unit")
        self.topic, self.queue_id = topic, queue_id
        self.read_only = read_only
        self.mapped_files = MappedFileQueue(directory, file_size_bytes, read_only=read_only)
        self.max_msg_phy_offset = -1       # maxMsgPhyOffsetInCommitLog: the last unit's phy offset
        self.min_offset_in_queue = -1      # minOffsetInQueue
        self.max_offset_in_queue = 0       # maxOffsetInQueue

    # -- load and recovery ------------------------------------------------------------------------

    def load(self) -> None:
        self.mapped_files.load()

    def recover(self) -> int:
        """`BatchConsumeQueue.recover`; returns the last unit's phy offset (-1: none)."""
        files = self.mapped_files.files
        if not files:
            return self.max_msg_phy_offset
        file_size = self.mapped_files.file_size_bytes
        per_file = file_size // BATCH_CQ_UNIT_SIZE
        index = max(0, len(files) - 3)
        end = files[index].file_from_offset
        for mapped in files[index:]:          # bounded by the file count
            kept = valid_prefix_units(mapped.buffer, per_file)
            if kept:
                last = decode_batch_unit(mapped.buffer, (kept - 1) * BATCH_CQ_UNIT_SIZE)
                self.max_msg_phy_offset = last.phy_offset
            end = mapped.file_from_offset + kept * BATCH_CQ_UNIT_SIZE
            if kept < per_file:
                break
        if not self.read_only:
            self.mapped_files.truncate_dirty_files(end)
        else:
            for mapped in self.mapped_files.files:
                position = min(max(end - mapped.file_from_offset, 0), file_size)
                mapped.set_positions(position)
        self.mapped_files.set_positions(end)
        self._revise_min_max()
        return self.max_msg_phy_offset

    def _revise_min_max(self) -> None:
        first = self._first_unit_of(self.mapped_files.first_file())
        self.min_offset_in_queue = -1 if first is None else first.msg_base_offset
        files = self.mapped_files.files
        last = self._last_unit_of(files[-1]) if files else None
        if last is None and len(files) >= 2:
            last = self._last_unit_of(files[-2])
        self.max_offset_in_queue = 0 if last is None else last.end_queue_offset

    @staticmethod
    def _first_unit_of(mapped) -> BatchCqUnit | None:
        if mapped is None or mapped.read_position < BATCH_CQ_UNIT_SIZE:
            return None
        return decode_batch_unit(mapped.buffer, 0)

    @staticmethod
    def _last_unit_of(mapped) -> BatchCqUnit | None:
        if mapped is None or mapped.read_position < BATCH_CQ_UNIT_SIZE:
            return None
        position = mapped.read_position // BATCH_CQ_UNIT_SIZE * BATCH_CQ_UNIT_SIZE
        return decode_batch_unit(mapped.buffer, position - BATCH_CQ_UNIT_SIZE)

    # -- writing ----------------------------------------------------------------------------------

    def put(self, unit: BatchCqUnit) -> bool:
        """`putBatchMessagePositionInfo`: True if written, False if skipped (built already)."""
        if self.read_only:
            raise ReadOnlyStoreError(f"batch consume queue {self.topic}/{self.queue_id} is read-only")
        if unit.phy_offset <= self.max_msg_phy_offset:
            return False
        data = encode_batch_unit(BatchCqUnit(unit.phy_offset, unit.size, unit.tags_code,
                                             unit.store_timestamp, unit.msg_base_offset,
                                             unit.batch_size))       # compactedOffset = -1
        mapped = self.mapped_files.last_file_or_create(self.mapped_files.max_offset())
        mapped.append(data)
        self.max_msg_phy_offset = unit.phy_offset
        self.max_offset_in_queue = unit.end_queue_offset
        if self.min_offset_in_queue == -1:
            self._revise_min_max()
        return True

    def truncate_dirty(self, phy_offset: int) -> None:
        """`truncateDirtyLogicFiles`: cut the units whose record starts at or past `phy_offset`
        (a file whose first unit goes is deleted; the walk goes back file by file)."""
        cut = None
        for mapped in reversed(self.mapped_files.files):     # bounded by the file count
            units = self._units_of(mapped)
            keep = int(np.count_nonzero(units["phy_offset"] < phy_offset))
            if keep == len(units) and keep:
                break
            cut = mapped.file_from_offset + keep * BATCH_CQ_UNIT_SIZE
            if keep:
                break
        if cut is not None:
            self.mapped_files.truncate_dirty_files(cut)
            self.mapped_files.set_positions(cut)
        last = None
        for mapped in reversed(self.mapped_files.files[-2:]):   # an emptied last file: the one before
            last = last or self._last_unit_of(mapped)
        self.max_msg_phy_offset = -1 if last is None else last.phy_offset
        self._revise_min_max()

    # -- expiry -----------------------------------------------------------------------------------

    def delete_expired(self, commit_log_min_offset: int) -> int:
        """`deleteExpiredFile`: `MappedFileQueue.deleteExpiredFileByOffset(min, 46)` (every file but
        the last, oldest first, goes while it is full and its last unit's record starts below
        `commit_log_min_offset`; the first one kept ends the walk), then `correctMinOffset`.
        Returns the files deleted (read-only: forgotten in memory, nothing deleted on disk)."""
        file_size = self.mapped_files.file_size_bytes
        victims = []
        for mapped in self.mapped_files.files[:-1]:          # never the last file
            if mapped.read_position <= file_size - BATCH_CQ_UNIT_SIZE:
                break           # selectMappedBuffer(size - 46) is null: "not executed forever"
            if decode_batch_unit(mapped.buffer, file_size - BATCH_CQ_UNIT_SIZE).phy_offset >= \
                    commit_log_min_offset:
                break
            victims.append(mapped)
        if victims and self.read_only:
            self.mapped_files.files = [f for f in self.mapped_files.files if f not in victims]
            for mapped in victims:
                mapped.close()
        elif victims:
            self.mapped_files.delete_files(victims)
        self.correct_min_offset(commit_log_min_offset)
        return len(victims)

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """`correctMinOffset`: `reviseMinOffsetInQueue` (no file: min -1 and max 0; else the first
        file's first base, -1 without units), then over the first file's units while their record
        starts below `commit_log_min_offset`, min = that unit's base + batch size."""
        first = self.mapped_files.first_file()
        if first is None:
            self.min_offset_in_queue, self.max_offset_in_queue = -1, 0
            return
        unit = self._first_unit_of(first)
        self.min_offset_in_queue = -1 if unit is None else unit.msg_base_offset
        units = self._units_of(first)
        gone = units["phy_offset"] < commit_log_min_offset
        below = len(units) if gone.all() else int(np.argmin(gone))      # the leading run
        if below:
            self.min_offset_in_queue = int(units["msg_base_offset"][below - 1]) + \
                int(units["batch_size"][below - 1])

    # -- reading ----------------------------------------------------------------------------------

    def min_offset(self) -> int:
        """`getMinOffsetInQueue` (-1 for an empty queue, as RocketMQ answers)."""
        return self.min_offset_in_queue

    def max_offset(self) -> int:
        return self.max_offset_in_queue

    @staticmethod
    def _units_of(mapped) -> np.ndarray:
        return np.frombuffer(mapped.buffer, dtype=BATCH_CQ_UNIT_DTYPE,
                             count=mapped.read_position // BATCH_CQ_UNIT_SIZE)

    def get_unit(self, queue_offset: int) -> BatchCqUnit | None:
        """The unit of the record holding message `queue_offset` (`getBatchMsgIndexBuffer`)."""
        if queue_offset >= self.max_offset_in_queue:
            return None
        files = self.mapped_files.files
        for mapped in reversed(files):        # the last file first, then backwards
            first = self._first_unit_of(mapped)
            if first is not None and first.msg_base_offset <= queue_offset:
                units = self._units_of(mapped)
                index = search_msg_offset(units["msg_base_offset"], queue_offset)
                if index < 0:
                    return None
                return decode_batch_unit(mapped.buffer, index * BATCH_CQ_UNIT_SIZE)
        return None

    def offset_by_time(self, timestamp_ms: int, boundary: str) -> int:
        """`ConsumeQueueStore.getOffsetInQueueByTime` on this queue (`store.consumequeue.batch.by_time`):
        a message offset clamped into [min, max]; 0 for a queue without files (5.3.3 throws)."""
        check_batch_boundary(boundary)
        files = self.mapped_files.files
        if not files:
            return 0
        result = offset_by_time(files, timestamp_ms, boundary)
        return min(max(result, self.min_offset_in_queue), self.max_offset_in_queue)

    def close(self) -> None:
        self.mapped_files.close()
