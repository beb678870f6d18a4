"""The Health page's crash diagnosis: `store.inspect.restart_plan()` in sentences and tables.

Shown for a store left with an `abort` file by someone else (opened read-only). A store this
dashboard hosts has its own abort file, which says nothing about a crash (see app.health_data).
"""

from __future__ import annotations

import pandas as pd

from app.times import human_ms


def summary(plan) -> list[str]:
    """Plain sentences, in the order a broker does the steps."""
    minimum = human_ms(plan.min_timestamp_ms) if plan.min_timestamp_ms > 0 else "0 (unset)"
    lines = [f"The broker would run abnormal recovery (CommitLog.recoverAbnormally) from segment "
             f"{plan.start_file} (physical offset {plan.start_phy_offset:,}), {plan.start_reason} "
             f"(checkpoint min timestamp: {minimum})."
             if plan.start_file else
             f"The broker would find no commit-log segment: {plan.stop_reason}."]
    for problem in plan.load_problems:
        lines.append(f"Before that: {problem}.")
    if plan.start_file:
        lines.append(f"It replays {plan.records_replayed:,} records ({plan.bytes_replayed:,} bytes) "
                     f"and stops at {plan.process_offset:,}: {plan.stop_reason}.")
        gap = plan.write_end_offset - plan.process_offset
        lines.append(f"The segment files end at {plan.write_end_offset:,}, {gap:,} bytes past the "
                     f"recovered end {plan.process_offset:,}: "
                     + (f"{plan.truncated_bytes:,} non-zero bytes after the last valid record are cut"
                        if plan.truncated_bytes else "no data there is cut (only zeros)")
                     + (f", and {len(plan.files_deleted)} later segment(s) are deleted "
                        f"({', '.join(f['file'] + (' (preallocated, all zero)' if f['holds_data'] is False else ' (holds data)') for f in plan.files_deleted)})"
                        if plan.files_deleted else "") + ".")
        changed = plan.changed_queues
        if changed:
            lines.append(f"Consume queues: {plan.units_truncated:,} unit(s) pointing past the end are "
                         f"removed and {plan.units_appended:,} unit(s) rebuilt by the re-dispatch, in "
                         f"{len(changed)} queue(s) (table below).")
        else:
            lines.append("Consume queues: every queue already matches the recovered log; none is "
                         "cut or rebuilt.")
    if plan.index_files_dropped:
        lines.append(f"Index: {len(plan.index_files_dropped)} file(s) newer than the checkpoint's "
                     f"indexMsgTimestamp {human_ms(plan.index_msg_timestamp_ms)} are deleted at load "
                     f"(IndexService.load) and their keys indexed again by the re-dispatch; "
                     f"{plan.index_files_kept} kept.")
    else:
        lines.append(f"Index: all {plan.index_files_kept} file(s) are kept.")
    return lines


def queues_frame(plan) -> pd.DataFrame:
    return pd.DataFrame([{"topic": q.topic, "queue": q.queue_id, "max offset now": q.max_offset_before,
                          "units removed": q.units_truncated, "units rebuilt": q.units_appended,
                          "max offset after": q.max_offset_after} for q in plan.changed_queues],
                        columns=["topic", "queue", "max offset now", "units removed", "units rebuilt",
                                 "max offset after"])


def index_frame(plan) -> pd.DataFrame:
    return pd.DataFrame([{"file": f["file"], "end time": human_ms(f["end_timestamp_ms"]),
                          "entries": f["entries"],
                          "physical offsets": f"{f['begin_phy_offset']:,} … {f['end_phy_offset']:,}"}
                         for f in plan.index_files_dropped],
                        columns=["file", "end time", "entries", "physical offsets"])
