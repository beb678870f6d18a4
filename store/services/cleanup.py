"""Expiry of old files (spec §12): commit log segments, then the consume queues and index behind them.

[5.x] Batch consume queues are cleaned with the others (5.3.3's `CleanConsumeQueueService` walks one
consume-queue table holding every kind: `BatchConsumeQueue.deleteExpiredFile`, then its
`correctMinOffset`); their files count in `consume_queue_files_deleted`.

A commit-log segment (never the last one) is deleted when its file modification time is older than
`fileReservedTime` hours and either the local hour is one of `deleteWhen`, the disk is fuller than
`diskMaxUsedSpaceRatio`, or a manual clean was requested; above the "clean forcibly" ratio segments go
regardless of age. Deletion stops at the first segment kept, and at 10 segments per run. Above the
warning ratio the store refuses puts (SERVICE_NOT_AVAILABLE) until usage falls again.

The disk usage measurement is a callable, so tests simulate a full disk without filling one.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from datetime import datetime

log = logging.getLogger(__name__)

DELETE_FILES_MAX_PER_RUN = 10
MANUAL_CLEAN_RUNS = 20


def disk_usage_ratio(path: str) -> float:
    """Used fraction of the partition holding `path` (-1 when it cannot be measured)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    used = usage.total - usage.free
    return used / usage.total if usage.total else -1.0


@dataclass
class CleanupResult:
    commit_log_files_deleted: int = 0
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    disk_ratio: float = 0.0
    clean_immediately: bool = False
    reason: str = ""


@dataclass(frozen=True)
class CleanupDecision:
    """What one pass would do at a moment (`CleanupService.decide`); ratios are fractions."""

    disk_ratio: float
    hour_now: int
    time_up: bool            # the local hour is one of deleteWhen
    space_full: bool         # above diskMaxUsedSpaceRatio (or cleaning immediately)
    clean_immediately: bool  # above diskSpaceCleanForciblyRatio, unmeasurable disk, or forced
    disk_full: bool          # above diskSpaceWarningLevelRatio: puts are refused
    manual: bool             # a manual clean is pending (or forced)
    age_ignored: bool        # segments go whatever their age

    @property
    def runs(self) -> bool:
        return self.time_up or self.space_full or self.manual

    @property
    def reason(self) -> str:
        return ", ".join(name for name, on in (("deleteWhen hour", self.time_up),
                                               ("disk usage", self.space_full),
                                               ("manual", self.manual)) if on)


class CleanupService:
    """RocketMQ's `CleanCommitLogService` + `CleanConsumeQueueService`, over the store's parts.

    `disk_full` says whether the last pass found the disk above the warning level (the facade then
    refuses puts); `reput_offset_of` keeps it from deleting what dispatch has not indexed yet.
    """

    def __init__(self, parts, *, reput_offset_of, disk_ratio_of=None, now_ms=None):
        self.parts = parts
        self.reput_offset_of = reput_offset_of
        self.disk_full = False
        cfg = parts.config
        self.reserved_ms = cfg.file_reserved_time * 3_600_000
        self.delete_hours = {int(h) for h in str(cfg.delete_when).split(";") if h.strip().isdigit()}
        self.max_used_ratio = min(95, max(10, cfg.disk_max_used_space_ratio)) / 100.0
        self.warning_ratio = _as_fraction(cfg.disk_space_warning_level_ratio)
        self.forcibly_ratio = _as_fraction(cfg.disk_space_clean_forcibly_ratio)
        self.interval_ms = cfg.clean_resource_interval
        self.disk_ratio_of = disk_ratio_of or disk_usage_ratio
        self.now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)
        self.manual_runs_left = 0
        self.last_result = CleanupResult()
        self._last_min_offset = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def request_manual_clean(self) -> None:
        self.manual_runs_left = MANUAL_CLEAN_RUNS

    def decide(self, now_ms: int, *, manual: bool = False, force: bool = False) -> CleanupDecision:
        """Whether a pass at `now_ms` deletes commit-log segments, and how (no state changes).

        `CleanCommitLogService.deleteExpiredFiles` (4.9.7): it runs when the hour is in `deleteWhen`
        (isTimeToDelete), the disk is above diskMaxUsedSpaceRatio (isSpaceToDelete) or a manual clean
        is pending; above the forcibly ratio it cleans immediately (ignores age, if
        cleanFileForciblyEnable); above the warning ratio the disk is full (puts refused).
        Shared by `run_once` and the inspection API's cleanup explanation."""
        ratio = self.disk_ratio_of(self.parts.commit_log.mapped_files.directory)  # DLedger: data/
        clean_immediately = ratio > self.forcibly_ratio or ratio < 0 or force
        hour_now = datetime.fromtimestamp(now_ms / 1000).hour
        return CleanupDecision(
            disk_ratio=ratio, hour_now=hour_now, time_up=hour_now in self.delete_hours,
            space_full=ratio > self.max_used_ratio or clean_immediately,
            clean_immediately=clean_immediately, disk_full=ratio > self.warning_ratio,
            manual=manual or force,
            age_ignored=clean_immediately and self.parts.config.clean_file_forcibly_enable)

    def run_once(self, *, force: bool = False) -> CleanupResult:
        """One cleaning pass. `force` deletes expired-or-not segments (an operator's forced clean)
        without pretending the disk is full."""
        parts = self.parts
        result = CleanupResult()
        now_ms = self.now_ms()
        decision = self.decide(now_ms, manual=self.manual_runs_left > 0, force=force)
        result.disk_ratio = decision.disk_ratio
        self.disk_full = decision.disk_full
        result.clean_immediately = decision.clean_immediately
        if decision.manual:
            self.manual_runs_left -= 1
        if decision.runs:
            result.reason = decision.reason
            result.commit_log_files_deleted = self._delete_commit_log_files(
                now_ms, force=decision.age_ignored)
        min_offset = parts.commit_log.min_offset()
        if min_offset > self._last_min_offset:
            self._last_min_offset = min_offset
            result.consume_queue_files_deleted = parts.consume_queues.delete_expired(min_offset)
            parts.consume_queues.correct_min_offset(min_offset)
            if parts.batch_queues is not None:      # [5.x] batch queues: the same table
                result.consume_queue_files_deleted += parts.batch_queues.delete_expired(min_offset)
            if parts.index_service is not None:
                result.index_files_deleted = parts.index_service.delete_expired(min_offset)
        self.last_result = result
        return result

    def commit_log_victims(self, now_ms: int, *, force: bool) -> tuple[list, str]:
        """The segments a pass at `now_ms` deletes, oldest first, and why the walk stopped
        (`MappedFileQueue.deleteExpiredFileByTime`: never the last file, stop at the first file kept,
        at most DELETE_FILES_MAX_PER_RUN; ours also keeps what dispatch has not read). No changes."""
        files = list(self.parts.commit_log.mapped_files.files)
        if getattr(self.parts.commit_log, "cleaned_by_dledger", False):
            return [], ("a DLedger log: DLedger's own CleanSpaceService deletes its files "
                        "(DLedgerCommitLog.deleteExpiredFile deletes none)")
        reput_offset = self.reput_offset_of()
        victims = []
        for mapped in files[:-1]:  # never the last file
            if len(victims) >= DELETE_FILES_MAX_PER_RUN:
                return victims, f"at most {DELETE_FILES_MAX_PER_RUN} files per pass"
            if mapped.file_end_offset > reput_offset:
                return victims, f"{_name(mapped)} is not fully dispatched yet"
            if not (force or now_ms >= mapped.mtime_ms() + self.reserved_ms):
                return victims, f"{_name(mapped)} is younger than fileReservedTime"
            victims.append(mapped)
        if not files:
            return victims, "the commit log has no files"
        return victims, f"the last file ({_name(files[-1])}) is never deleted"

    def _delete_commit_log_files(self, now_ms: int, *, force: bool) -> int:
        victims, _why = self.commit_log_victims(now_ms, force=force)
        if victims:
            with self.parts.commit_log.put_lock:
                self.parts.commit_log.mapped_files.delete_files(victims)
            log.info("deleted %d expired commit log segments", len(victims))
        return len(victims)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="CleanResourceService", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        # RocketMQ waits 60 s before the first run; so do we, then every cleanResourceInterval.
        if self._stop.wait(60.0):
            return
        while not self._stop.is_set():
            try:
                self.run_once()
            except OSError:
                log.exception("cleanup failed")
            self._stop.wait(self.interval_ms / 1000.0)

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None


def _name(mapped) -> str:
    return os.path.basename(mapped.path)


def _as_fraction(value) -> float:
    value = float(value)
    return value / 100.0 if value > 1 else value
