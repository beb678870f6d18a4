"""What a broker restart would do to a store left with an `abort` file: `RestartPlanMixin.restart_plan()`
on `StoreInspector` (`store.inspect.restart_plan()`). Read-only: it walks the files as the broker
would and changes nothing, not even positions.

RocketMQ 4.9.7 behind each step (the 5.x file-queue store does the same):

| step | RocketMQ | what the plan reports |
|------|----------|------------------------|
| 1 | `DefaultMessageStore.load`: `lastExitOK = !isTempFileExist()` | `abort_present`; nothing below applies to a clean store |
| 2 | `IndexService.load(lastExitOK)`: an index file whose `endTimestamp` > the checkpoint's `indexMsgTimestamp` is destroyed | `index_files_dropped` (name, end time, entries) |
| 3 | `DefaultMessageStore.recoverConsumeQueue`: each queue's last valid unit; their largest phy end | `cq_max_phy_offset` |
| 4 | `CommitLog.recoverAbnormally`: from the newest segment back, the first whose first record has `storeTimestamp` != 0 and <= `StoreCheckpoint.getMinTimestamp()` (min(physic, logics) - 3 s, or `getMinTimestampIndex()` with messageIndexSafe); the first segment when none does | `start_file`, `start_phy_offset`, `min_timestamp_ms` |
| 5 | the walk `checkMessageAndReturnSize` + `doDispatch` from there: every valid record re-dispatched, BLANK = next segment, the first invalid record ends it | `process_offset`, `records_replayed`, `stop_reason` |
| 6 | `MappedFileQueue.truncateDirtyFiles(processOffset)`: the segment holding it is cut, later segments are deleted | `truncated_bytes` (non-zero bytes cut), `files_deleted` (name, size, written or all zero) |
| 7 | `truncateDirtyLogicFiles(processOffset)` when `maxPhyOffsetOfConsumeQueue >= processOffset`: units pointing at or past it are removed | `queues[*].units_truncated` |
| 8 | the re-dispatch of step 5 appends the units a queue lacks (`ConsumeQueue.putMessagePositionInfo` skips the ones it holds) | `queues[*].units_appended` |
| 9 | `recoverTopicQueueTable`: each queue's max offset becomes the next queue offset | `queues[*].max_offset_after` |

The counts are raw values; callers format them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from store.meta.lockfile import abort_exists
from store.recovery.commitlog_recovery import (RecoveryReport, choose_abnormal_start, measure_dirty_tail,
                                               scan_valid_end)

MAX_TAIL_UNITS = 1 << 20      # units examined per queue when counting the ones a cut removes
TAIL_CHUNK = 4096


@dataclass(frozen=True)
class QueueChange:
    topic: str
    queue_id: int
    max_offset_before: int
    units_truncated: int       # units pointing at or past process_offset (step 7)
    units_appended: int        # units the re-dispatch adds (step 8)
    max_offset_after: int


@dataclass
class RestartPlan:
    abort_present: bool
    write_end_offset: int = 0          # end of the written segment files before the restart
    min_timestamp_ms: int = 0
    start_file: str | None = None
    start_phy_offset: int = 0
    start_reason: str = ""
    process_offset: int = 0            # the commit log's end after the restart
    records_replayed: int = 0
    bytes_replayed: int = 0
    stop_reason: str = ""
    truncated_bytes: int = 0           # non-zero bytes after process_offset in its segment
    files_deleted: list[dict] = field(default_factory=list)
    cq_max_phy_offset: int = -1
    queues_truncated: bool = False
    queues: list[QueueChange] = field(default_factory=list)
    index_msg_timestamp_ms: int = 0
    index_files_dropped: list[dict] = field(default_factory=list)
    index_files_kept: int = 0
    load_problems: list[str] = field(default_factory=list)

    @property
    def changed_queues(self) -> list[QueueChange]:
        return [q for q in self.queues if q.units_truncated or q.units_appended]

    @property
    def units_truncated(self) -> int:
        return sum(q.units_truncated for q in self.queues)

    @property
    def units_appended(self) -> int:
        return sum(q.units_appended for q in self.queues)


class RestartPlanMixin:
    """`restart_plan()` for `StoreInspector` (needs the checkpoint from `attach_admin`)."""

    def restart_plan(self) -> RestartPlan:
        config = self.config
        root = config.store_path_root_dir
        checkpoint = self._checkpoint
        assert checkpoint is not None, "attach_admin was not called"
        queue = self._commit_log.mapped_files
        files = list(queue.files)
        plan = RestartPlan(abort_present=abort_exists(root), write_end_offset=queue.max_wrote_offset())
        plan.load_problems = _segment_size_problems(files, config.mapped_file_size_commit_log)
        plan.index_msg_timestamp_ms = checkpoint.index_msg_timestamp
        if not plan.abort_present:
            return plan
        self._plan_index(plan)
        plan.cq_max_phy_offset = self._cq_max_phy_end()
        safe = config.message_index_enable and config.message_index_safe
        plan.min_timestamp_ms = checkpoint.min_timestamp_index if safe else checkpoint.min_timestamp
        if not files:
            plan.stop_reason = "no commit-log segment: the broker destroys every consume queue"
            return plan
        report = RecoveryReport(mode="plan")
        start_index = choose_abnormal_start(files, min_timestamp=plan.min_timestamp_ms)
        plan.start_file = os.path.basename(files[start_index].path)
        plan.start_phy_offset = files[start_index].file_from_offset
        plan.start_reason = _start_reason(start_index, len(files), plan.min_timestamp_ms, safe)
        plan.process_offset = scan_valid_end(self._commit_log, start_index,
                                             check_crc=config.recovery_crc_mode(checkpoint.style),
                                             report=report)
        plan.records_replayed, plan.bytes_replayed = report.records_checked, report.bytes_checked
        plan.stop_reason = report.stop_reason
        plan.truncated_bytes = measure_dirty_tail(self._commit_log, plan.process_offset)
        plan.files_deleted = [_file_row(f) for f in files if f.file_from_offset > plan.process_offset]
        plan.queues_truncated = plan.cq_max_phy_offset >= plan.process_offset
        plan.queues = self._plan_queues(plan, report.scanned_queue_max)
        return plan

    # -- steps -----------------------------------------------------------------------------------

    def _cq_max_phy_end(self) -> int:
        best = -1
        for topic, queue_id in self._consume_queues.queues():
            best = max(best, self.queue_max_phy_end(topic, queue_id))
        return best

    def _plan_index(self, plan: RestartPlan) -> None:
        for name, header in self.index_headers():
            if header.end_timestamp > plan.index_msg_timestamp_ms:
                plan.index_files_dropped.append({
                    "file": name, "end_timestamp_ms": header.end_timestamp,
                    "entries": max(0, header.index_count - 1),
                    "begin_phy_offset": header.begin_phy_offset, "end_phy_offset": header.end_phy_offset})
            else:
                plan.index_files_kept += 1

    def _plan_queues(self, plan: RestartPlan, scanned_max: dict) -> list[QueueChange]:
        cq = self._consume_queues
        keys = set(cq.queues()) | set(scanned_max)
        changes = []
        for topic, queue_id in sorted(keys):
            before = cq.get_max_offset(topic, queue_id) if (topic, queue_id) in set(cq.queues()) else 0
            cut = self._units_at_or_after(topic, queue_id, before, plan.process_offset) \
                if plan.queues_truncated else 0
            kept = before - cut
            scanned = scanned_max.get((topic, queue_id))
            appended = max(0, scanned + 1 - kept) if scanned is not None else 0
            changes.append(QueueChange(topic, queue_id, before, cut, appended, kept + appended))
        return changes

    def _units_at_or_after(self, topic: str, queue_id: int, max_offset: int, phy_offset: int) -> int:
        """Units at the queue's end whose phy offset is >= `phy_offset` (RocketMQ's
        ConsumeQueue.truncateDirtyLogicFiles removes exactly those)."""
        low = self._consume_queues.get_min_offset(topic, queue_id)
        count, end = 0, max_offset
        while end > low and count < MAX_TAIL_UNITS:
            begin = max(low, end - TAIL_CHUNK)
            units = self.queue_units(topic, queue_id, begin, end - begin)
            if units is None or len(units) == 0:
                break
            phy = units["phy_offset"][::-1]
            below = (phy < phy_offset).nonzero()[0]
            if len(below):
                return count + int(below[0])
            count += len(units)
            end = begin
        return count


def _segment_size_problems(files, segment_size_bytes: int) -> list[str]:
    """MappedFileQueue.load refuses a segment whose length is not mappedFileSizeCommitLog: the broker
    would not start at all."""
    return [f"{os.path.basename(f.path)} is {f.file_size_bytes:,} bytes, not {segment_size_bytes:,}: "
            f"MappedFileQueue.load fails and the broker does not start"
            for f in files if f.file_size_bytes != segment_size_bytes]


def _start_reason(start_index: int, file_count: int, min_timestamp_ms: int, safe: bool) -> str:
    which = "getMinTimestampIndex()" if safe else "getMinTimestamp()"
    if min_timestamp_ms <= 0:
        return (f"because the checkpoint's {which} is 0 (a checkpoint time was never flushed), so "
                f"no segment qualifies and recovery starts at the first segment")
    if start_index == 0 and file_count > 1:
        return (f"because no newer segment's first record is stored at or before the checkpoint's "
                f"{which}, so recovery starts at the first segment")
    return (f"the newest segment whose first record is stored at or before the checkpoint's {which}")


def _file_row(mapped) -> dict:
    buffer = mapped.buffer
    written = None if buffer is None else \
        bool(np.frombuffer(buffer, dtype=np.uint8, count=mapped.file_size_bytes).any())
    return {"file": os.path.basename(mapped.path), "file_from_offset": mapped.file_from_offset,
            "size_bytes": mapped.file_size_bytes, "holds_data": written}
