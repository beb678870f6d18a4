"""Times for humans: epoch milliseconds as text with their zone, and the relative ranges the
browsing views offer ("last 15 min", ...). Raw milliseconds stay in the data; only the text shown
to people goes through here. The zone is UTC, named in every string, so two people reading the same
page read the same time."""

from __future__ import annotations

import datetime as dt

ZONE = dt.timezone.utc
ZONE_NAME = "UTC"
RELATIVE_RANGES_MS = {
    "last 15 min": 15 * 60_000,
    "last hour": 60 * 60_000,
    "last 6 hours": 6 * 60 * 60_000,
    "last 24 hours": 24 * 60 * 60_000,
    "last 7 days": 7 * 24 * 60 * 60_000,
}


def human_ms(timestamp_ms: int | None) -> str:
    """`2026-11-26 08:38:58.161 UTC`; '-' for a time that is not set (None or <= 0)."""
    if timestamp_ms is None or timestamp_ms <= 0:
        return "-"
    try:
        moment = dt.datetime.fromtimestamp(timestamp_ms / 1000, ZONE)
    except (OverflowError, OSError, ValueError):
        return f"{timestamp_ms} ms (out of range)"
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + f" {ZONE_NAME}"


def to_ms(day: dt.date, clock: dt.time) -> int:
    """A date and a time of day (in ZONE) as epoch milliseconds."""
    return int(dt.datetime.combine(day, clock, tzinfo=ZONE).timestamp() * 1000)


def relative_range(label: str, now_ms: int) -> tuple[int, int]:
    """(begin_ms, end_ms) of a relative range ending now."""
    if label not in RELATIVE_RANGES_MS:
        raise ValueError(f"unknown range {label!r}; one of {list(RELATIVE_RANGES_MS)}")
    return now_ms - RELATIVE_RANGES_MS[label], now_ms


def human_bytes(size_bytes: int | None) -> str:
    if size_bytes is None:
        return "-"
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
