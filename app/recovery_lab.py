"""The recovery lab: crash a scratch copy of a store, damage its tail, recover it, show what happened.

The crash is real: a child process opens the copy with our engine, puts messages and exits with
`os._exit` (no clean shutdown, so `abort` stays and the checkpoint is stale). Damage is applied to the
files afterwards. Recovery is our engine's open; its `RecoveryReport` says what it checked and cut.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field

import pandas as pd

from app.commitlog_data import segment_map
from app.store_config import resolve_config
from store.codec import java_properties, record_check
from store.codec.checkpoint_codec import decode_checkpoint
from store.errors import CorruptDataError
from store.message_store import MessageStore

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAMAGES = ("none", "tear the last record", "flip bytes in the last record")
MAX_CRASH_MESSAGES = 500
CHILD_TIMEOUT_S = 60

_CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from app.store_config import resolve_config
from store import Message, MessageStore
root, props, count = sys.argv[2], sys.argv[3] or None, int(sys.argv[4])
store = MessageStore.open(resolve_config(root, props).config)
for number in range(count):
    store.put_message(Message("LabTopic", b"lab message %d" % number, queue_id=number % 2,
                              tags="lab", keys=["lab-%d" % number]))
deadline = time.monotonic() + 10
while store.dispatch_behind_bytes() and time.monotonic() < deadline:
    time.sleep(0.01)
os._exit(0)   # the crash: no flush, no checkpoint, abort stays
"""


def crash(root: str, properties_path: str | None, messages: int) -> str:
    """Run the crashing child on `root`; returns its stderr (empty when fine)."""
    messages = max(0, min(messages, MAX_CRASH_MESSAGES))
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, REPO_ROOT, root, properties_path or "", str(messages)],
        capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    if completed.returncode != 0:
        return completed.stderr[-2000:] or f"child exited with {completed.returncode}"
    return ""


def lab_properties(config, directory: str) -> str:
    """Write the config the viewed store was opened with (its geometry, DLedger and CRC settings) as
    `store.properties` in `directory`, without its paths (the copy gets its own root); returns the
    file. The crashing child and the recovery open read it, so the copy is opened as the store was."""
    values = {k: v for k, v in config.to_dict().items() if not k.startswith("storePath")}
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "store.properties")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(java_properties.dump(values))
    return path


def last_record(root: str, properties_path: str | None) -> tuple[int, int] | None:
    """(phy_offset, size) of the last valid record, found through a read-only open."""
    with MessageStore.open(resolve_config(root, properties_path).config, read_only=True) as store:
        report = store.recovery_report
        if not report.records_checked:
            return None
        start = report.last_record_offset
        size = store.inspect.record_size_at(start)
        return (start, size) if size else None


def _segment_path(root: str, properties_path: str | None, phy_offset: int) -> tuple[str, int]:
    """(file, position) of `phy_offset`: a `commitlog/` segment, or a DLedger data file (where a
    record sits at the same file and position, inside its entry)."""
    with MessageStore.open(resolve_config(root, properties_path).config, read_only=True) as store:
        segment = store.inspect.segment_holding(phy_offset)
    if segment is None:
        raise CorruptDataError(root, phy_offset, "no segment file holds this physical offset")
    return segment.path, phy_offset - segment.file_from_offset


def damage(root: str, properties_path: str | None, kind: str) -> str:
    """Damage the last record on disk; returns a sentence saying what was done."""
    if kind == "none":
        return "no damage applied"
    found = last_record(root, properties_path)
    if found is None:
        return "no record to damage"
    phy_offset, size = found
    path, position = _segment_path(root, properties_path, phy_offset)
    with open(path, "r+b") as handle:
        if kind == "tear the last record":
            handle.seek(position + size // 2)
            handle.write(bytes(size - size // 2))
            return (f"zeroed the second half of the record at {phy_offset} ({size - size // 2} of "
                    f"{size} bytes), as a write torn by a power cut")
        body_position = position + size - 20 if size > 120 else position + size - 4
        handle.seek(body_position)
        original = handle.read(4)
        handle.seek(body_position)
        handle.write(bytes(b ^ 0xFF for b in original))
        return f"flipped 4 bytes at physical offset {phy_offset + body_position - position}"


@dataclass
class LabResult:
    before: dict[str, int]
    after: dict[str, int]
    checkpoint_before: dict[str, int]
    steps: pd.DataFrame
    report_fields: dict
    abort_before: bool
    notes: list[str] = field(default_factory=list)
    segments_before: list = field(default_factory=list)    # SegmentInfo as the crash left them
    segments_after: list = field(default_factory=list)     # SegmentInfo after recovery


def recover(root: str, properties_path: str | None) -> LabResult:
    """Open the crashed copy with the engine (recovery runs) and compare before and after."""
    config = resolve_config(root, properties_path).config
    abort_before = os.path.exists(os.path.join(root, "abort"))
    with open(config.checkpoint_path, "rb") as handle:
        checkpoint = decode_checkpoint(handle.read())
    with MessageStore.open(config, read_only=True) as viewer:
        before = {"file end (max wrote)": viewer.recovery_report.max_offset_before,
                  "valid end (scan)": viewer.recovery_report.process_offset,
                  "consume queues end": viewer.recovery_report.cq_max_phy_offset}
        segments_before = segment_map(viewer)
    with MessageStore.open(config) as store:
        report = store.recovery_report
        pointers = store.pointers()
        after = {"file end (max wrote)": pointers["wrote"], "valid end (scan)": report.process_offset,
                 "consume queues end": max(store.inspect.queue_max_phy_end(t, q)
                                           for t, q in store.queues()) if store.queues() else -1,
                 "reput": pointers["reput"]}
        steps = pd.DataFrame([{"step": s.what, "detail": s.detail} for s in report.steps])
        segments_after = segment_map(store)
        fields = {name: getattr(report, name) for name in (
            "mode", "start_file", "start_phy_offset", "records_checked", "bytes_checked",
            "process_offset", "max_offset_before", "truncated_bytes", "stop_reason", "deleted_files",
            "consume_queues_truncated", "cq_max_phy_offset", "dispatch_from",
            "redispatched_records", "redispatched_bytes")}
    cp = {name: getattr(checkpoint, name) for name in (
        "physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp")}
    return LabResult(before, after, cp, steps, fields, abort_before,
                     segments_before=segments_before, segments_after=segments_after)


def record_kind_at(buf: bytes) -> str:
    result = record_check.check_message(buf, 0, check_crc=True, limit=len(buf))
    return result.kind
