"""Turning `MessageStore.check()` findings into a table sorted by severity."""

from __future__ import annotations

import dataclasses
import os

import pandas as pd

SEVERITY_ORDER = {"error": 0, "critical": 0, "warning": 1, "warn": 1, "info": 2}


def _as_dict(finding) -> dict:
    if dataclasses.is_dataclass(finding):
        row = dataclasses.asdict(finding)
    elif isinstance(finding, dict):
        row = dict(finding)
    else:
        row = {"finding": str(finding)}
    for name, value in list(row.items()):
        if hasattr(value, "value") and not isinstance(value, (int, str)):
            row[name] = value.value     # enums
        elif not isinstance(value, (int, float, str, bool, type(None))):
            row[name] = str(value)
    return row


FIRST_COLUMNS = ("severity", "component", "message", "path", "position")


HOSTED_ABORT = ("abort file present: expected, it is this dashboard's own. The dashboard hosts this "
                "store, and RocketMQ creates abort when a store starts and deletes it at a clean "
                "shutdown (closing the store here); it says nothing about the previous run.")


def _is_abort(row: dict) -> bool:
    path = row.get("path")
    return row.get("component") == "files" and isinstance(path, str) and \
        os.path.basename(path) == "abort"


def findings_frame(findings, root: str | None = None, *, hosted: bool = False) -> pd.DataFrame:
    """One row per finding, errors first; the message before the path (the part people read), and
    paths under `root` shown relative to it. On a store this process hosts, the abort file is the
    one our own open created (DefaultMessageStore.start -> createTempFile), so its finding says so
    instead of reporting an unclean last run."""
    rows = [_as_dict(f) for f in (findings or [])]
    if hosted:
        for row in rows:
            if _is_abort(row):
                row["message"] = HOSTED_ABORT
                if "on_restart" in row:
                    row["on_restart"] = "none: a clean close deletes the abort file first"
    if root:
        for row in rows:
            path = row.get("path")
            if isinstance(path, str) and os.path.isabs(path) and \
                    os.path.commonpath([path, root]) == os.path.normpath(root):
                row["path"] = os.path.relpath(path, root)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = frame[[c for c in FIRST_COLUMNS if c in frame] +
                      [c for c in frame if c not in FIRST_COLUMNS]]
    if not frame.empty and "severity" in frame:
        frame["severity"] = frame["severity"].astype(str).str.lower()
        frame = frame.sort_values("severity", key=lambda s: s.map(lambda v: SEVERITY_ORDER.get(v, 3)),
                                  kind="stable").reset_index(drop=True)
    return frame


def pointer_notes(store, checkpoint_confirm: int | None) -> list[str]:
    """Why the confirm offset reads as it does (it is not an error when it is -1 or 0)."""
    confirm = store.confirm_offset()
    notes = []
    if confirm == -1:
        notes.append("confirm offset -1: not set. RocketMQ 4.9.7 keeps CommitLog.confirmOffset at -1 "
                     "unless DLedger/replication confirms writes; -1 means 'no confirm', not an error.")
    if checkpoint_confirm == 0:
        notes.append("checkpoint confirmPhyOffset 0: never written (the 5.x checkpoint field is 0 "
                     "on disk unless a DLedger/HA confirm is recorded).")
    return notes
