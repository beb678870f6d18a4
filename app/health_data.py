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


def findings_frame(findings, root: str | None = None) -> pd.DataFrame:
    """One row per finding, errors first; the message before the path (the part people read), and
    paths under `root` shown relative to it."""
    rows = [_as_dict(f) for f in (findings or [])]
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
