"""Turning `MessageStore.check()` findings into a table sorted by severity."""

from __future__ import annotations

import dataclasses

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


def findings_frame(findings) -> pd.DataFrame:
    rows = [_as_dict(f) for f in (findings or [])]
    frame = pd.DataFrame(rows)
    if not frame.empty and "severity" in frame:
        frame["severity"] = frame["severity"].astype(str).str.lower()
        frame = frame.sort_values("severity", key=lambda s: s.map(lambda v: SEVERITY_ORDER.get(v, 3)),
                                  kind="stable").reset_index(drop=True)
    return frame
