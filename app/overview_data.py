"""Numbers for the Overview page: pointers, rates from samples, totals, flush mode, checkpoint."""

from __future__ import annotations

import datetime as dt
import os

import pandas as pd

from store.errors import EarliestTimeUnavailable

RATE_WINDOW_SAMPLES = 120


def format_ms(timestamp_ms: int | None) -> str:
    """An epoch-milliseconds value as UTC text; '-' for unset (<= 0)."""
    if not timestamp_ms or timestamp_ms <= 0:
        return "-"
    try:
        return dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    except (OverflowError, OSError, ValueError):
        return str(timestamp_ms)


def rates(samples) -> pd.DataFrame:
    """Per-interval rates between consecutive samples (the last RATE_WINDOW_SAMPLES)."""
    samples = list(samples)[-RATE_WINDOW_SAMPLES:]
    rows = []
    for previous, current in zip(samples, samples[1:]):
        seconds = current.at_s - previous.at_s
        if seconds <= 0:
            continue
        messages = (current.messages - previous.messages) if current.messages >= 0 <= \
            previous.messages else 0
        rows.append({
            "time": pd.Timestamp(current.wall_ms, unit="ms"),
            "put_messages_per_s": max(0, messages) / seconds,
            "put_kib_per_s": max(0, current.max_phy_offset - previous.max_phy_offset) / 1024 / seconds,
            "dispatch_kib_per_s": max(0, current.reput_offset - previous.reput_offset) / 1024 / seconds,
            "backlog_kib": max(0, current.max_phy_offset - current.reput_offset) / 1024,
        })
    return pd.DataFrame(rows, columns=["time", "put_messages_per_s", "put_kib_per_s",
                                       "dispatch_kib_per_s", "backlog_kib"])


def totals(store) -> dict[str, int]:
    summaries = store.queue_summaries()
    # [5.x] batch topics' queues (offsets in messages): queue_summaries() has the consume queues only
    batches = [view for view in store.inspect.batch_queues() if view.batch_topic]
    pointers = store.pointers()
    return {
        "topics": len({s.topic for s in summaries} | {view.topic for view in batches}),
        "queues": len(summaries) + len(batches),
        "messages": sum(s.depth for s in summaries) + sum(view.messages for view in batches),
        "bytes": max(0, pointers["max_phy_offset"] - pointers["min_phy_offset"]),
        "segments": len(store.inspect.segments()),
    }


def scale_bytes(size_bytes: int) -> tuple[str, str]:
    """(unit, number) for a byte count in a narrow metric tile: the number stays at most five
    characters (exact bytes below 10,000; else KiB/MiB/GiB/TiB with three significant digits)."""
    if size_bytes < 10_000:
        return "B", f"{size_bytes:,}"
    value = float(size_bytes)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1000 or unit == "TiB":
            return unit, f"{value:.3g}" if value < 1000 else f"{value:,.0f}"
    raise AssertionError("unreachable")


def metric_tile(name: str, value: int, *, is_bytes: bool = False) -> tuple[str, str]:
    """(label, value) of a metric tile; byte counts carry their unit in the label so they fit."""
    if not is_bytes:
        return name, f"{value:,}"
    unit, number = scale_bytes(value)
    return f"{name} ({unit})", number


def flush_settings(store) -> dict[str, str]:
    cfg = store.config
    return {
        "flush mode": cfg.flush_disk_type,
        "transient store pool": "on" if cfg.transient_store_pool_enable else "off",
        "flush interval": f"{cfg.flush_interval_commit_log} ms",
        "consume queue backend": cfg.store_type,
        "store format": store.style,
        "opened": "read-only" if store.read_only else "hosted (this process owns it)",
    }


def checkpoint_rows(store) -> list[dict]:
    cp = store.checkpoint
    rows = []
    for name in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
                 "master_flushed_offset", "confirm_phy_offset"):
        value = getattr(cp, name, None)
        if value is None:
            continue
        rows.append({"field": name, "value": value,
                     "as time": format_ms(value) if name.endswith("timestamp") else ""})
    return rows


def status_flags(store) -> dict[str, str]:
    root = store.config.store_path_root_dir
    report = store.recovery_report
    return {
        "abort file": "present" if os.path.exists(os.path.join(root, "abort")) else "absent",
        "last recovery": f"{report.mode}: {report.records_checked} records checked, "
                         f"stopped: {report.stop_reason or '-'}",
        "dispatch backlog": f"{store.dispatch_behind_bytes():,} bytes",
        "earliest message time": earliest_time_text(store),
        "log": log_text(store),
    }


def log_text(store) -> str:
    """Which log the store keeps: `commitlog/`, or DLedger's data files and its ledger state."""
    dledger = store.inspect.dledger_log()
    if dledger is None:
        return f"commit log in {store.inspect.log_dir()}"
    return (f"DLedger log in {dledger.data_dir} (member {dledger.self_id}): entries "
            f"{dledger.ledger_begin_index}..{dledger.ledger_end_index}, committed index "
            f"{dledger.committed_index} at pos {dledger.committed_pos:,}, term {dledger.current_term}")


def earliest_time_text(store) -> str:
    """The store-wide earliest message time as RocketMQ answers it, in words where it cannot: 5.3.3
    throws when the first record's born host is IPv6 (EarliestTimeUnavailable)."""
    try:
        value = store.get_earliest_message_time()
    except EarliestTimeUnavailable as error:
        return f"{error}; the first record's store time is " \
               f"{format_ms(error.first_store_timestamp_ms)}"
    return format_ms(value) if value > 0 else "- (RocketMQ answers -1 for this store)"
