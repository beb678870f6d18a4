"""Why cleanup did (or did not) delete commit-log files: `StoreInspector.cleanup_explain`.

Answers the operators' question of apache/rocketmq #4707, #2260 and #4042 ("the disk is full, why
are old files still there?") from the cleanup service's own decisions (`CleanupService.decide`
and `commit_log_victims`, RocketMQ's `CleanCommitLogService.deleteExpiredFiles` and
`MappedFileQueue.deleteExpiredFileByTime`), without deleting anything:

- `fileReservedTime` (hours) against the age of the oldest file (its modification time);
- `deleteWhen` against the local hour now;
- the disk ratio against diskMaxUsedSpaceRatio (clean), diskSpaceCleanForciblyRatio (clean
  regardless of age, if cleanFileForciblyEnable) and diskSpaceWarningLevelRatio (puts refused);
- which files an automatic pass now, and a manual `rmqstore clean`, would delete (names, bytes),
  and why the walk stops where it does (the last file is never deleted; the first file kept stops
  it; at most 10 per pass; never what dispatch has not read).
"""

from __future__ import annotations

import os
import time


def _files(victims) -> tuple[list[str], int]:
    return [os.path.basename(m.path) for m in victims], sum(m.file_size_bytes for m in victims)


def explain_cleanup(config, commit_log, cleanup, now_ms: int | None = None) -> dict:
    """A dict of raw values (ms, fractions, bytes) plus `reasons`: sentences for humans."""
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    files = list(commit_log.mapped_files.files)
    oldest = files[0] if files else None
    mtime_ms = oldest.mtime_ms() if oldest is not None else None
    age_ms = None if mtime_ms is None else now_ms - mtime_ms
    decision = cleanup.decide(now_ms)
    auto_victims, auto_stop = cleanup.commit_log_victims(now_ms, force=decision.age_ignored)
    if not decision.runs:
        auto_victims, auto_stop = [], "no trigger (deleteWhen hour, disk ratio or manual clean)"
    manual = cleanup.decide(now_ms, manual=True)
    manual_victims, manual_stop = cleanup.commit_log_victims(now_ms, force=manual.age_ignored)
    auto_names, auto_bytes = _files(auto_victims)
    manual_names, manual_bytes = _files(manual_victims)
    out = {
        "now_ms": now_ms,
        "file_reserved_time_hours": config.file_reserved_time,
        "file_reserved_ms": cleanup.reserved_ms,
        "commit_log_files": len(files),
        "oldest_file": None if oldest is None else os.path.basename(oldest.path),
        "oldest_file_mtime_ms": mtime_ms,
        "oldest_file_age_ms": age_ms,
        "oldest_file_expired": None if age_ms is None else age_ms >= cleanup.reserved_ms,
        "delete_when": str(config.delete_when),
        "hour_now": decision.hour_now,
        "time_up": decision.time_up,
        "disk_ratio": decision.disk_ratio,
        "disk_max_used_space_ratio": cleanup.max_used_ratio,
        "disk_space_clean_forcibly_ratio": cleanup.forcibly_ratio,
        "disk_space_warning_level_ratio": cleanup.warning_ratio,
        "clean_file_forcibly_enable": bool(config.clean_file_forcibly_enable),
        "space_full": decision.space_full,
        "clean_immediately": decision.clean_immediately,
        "writes_refused": decision.disk_full,
        "runs_now": decision.runs,
        "would_delete_files": auto_names,
        "would_delete_bytes": auto_bytes,
        "stops_because": auto_stop,
        "manual_would_delete_files": manual_names,
        "manual_would_delete_bytes": manual_bytes,
        "manual_stops_because": manual_stop,
    }
    out["reasons"] = _reasons(out)
    return out


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _level(e: dict) -> str:
    age_rule = ("files go regardless of age" if e["clean_file_forcibly_enable"] else
                "but cleanFileForciblyEnable=false keeps the age rule")
    if e["writes_refused"]:
        return f"above diskSpaceWarningLevelRatio: the store refuses puts, and {age_rule}"
    if e["clean_immediately"]:
        return f"above diskSpaceCleanForciblyRatio: {age_rule}"
    if e["space_full"]:
        return "above diskMaxUsedSpaceRatio: expired files go at any hour"
    return "below diskMaxUsedSpaceRatio: no space pressure"


def _reasons(e: dict) -> list[str]:
    reasons = []
    if e["commit_log_files"] <= 1:
        reasons.append(f"the commit log has {e['commit_log_files']} file(s); the last file is never "
                       f"deleted, so nothing can be cleaned until the log rolls to a new file")
    if e["oldest_file_age_ms"] is not None:
        age_h = e["oldest_file_age_ms"] / 3_600_000
        reasons.append(f"the oldest file {e['oldest_file']} was last modified {age_h:.1f} h ago; "
                       f"fileReservedTime is {e['file_reserved_time_hours']} h, so it is "
                       f"{'expired' if e['oldest_file_expired'] else 'not expired yet'}")
    reasons.append(f"deleteWhen is {e['delete_when']!r} and the local hour is {e['hour_now']:02d}: "
                   f"{'a' if e['time_up'] else 'not a'} deletion hour")
    ratio = e["disk_ratio"]
    if ratio < 0:
        reasons.append("the disk ratio cannot be measured: cleanup treats that as a full disk")
    else:
        level = _level(e)
        reasons.append(f"the disk is {_pct(ratio)} full (clean at {_pct(e['disk_max_used_space_ratio'])}, "
                       f"forced at {_pct(e['disk_space_clean_forcibly_ratio'])}, puts refused at "
                       f"{_pct(e['disk_space_warning_level_ratio'])}): {level}")
    if e["runs_now"]:
        reasons.append(f"an automatic pass now deletes {len(e['would_delete_files'])} file(s), "
                       f"{e['would_delete_bytes']} bytes; it stops because {e['stops_because']}")
    else:
        reasons.append("an automatic pass now deletes nothing: neither the hour nor the disk "
                       "triggers it")
    reasons.append(f"a manual `rmqstore clean` now deletes {len(e['manual_would_delete_files'])} "
                   f"file(s), {e['manual_would_delete_bytes']} bytes; it stops because "
                   f"{e['manual_stops_because']}")
    return reasons
