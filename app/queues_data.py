"""Consume-queue views: the queue table, raw 20-byte units next to their records, consumer lag,
time jumps, and what a RocksDB backend shows of itself."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from app.bodies import preview
from app.overview_data import format_ms
from store.codec import cq_unit as cqcodec
from store.codec import message as msgcodec
from store.errors import CorruptDataError

MAX_UNITS_SHOWN = 200
MAX_QUEUES_WITH_TIMES = 2000
MAX_ROCKSDB_FILES = 5000


def queue_table(store) -> pd.DataFrame:
    """One row per queue: offsets, depth, retained time span, file count."""
    rows = []
    summaries = store.queue_summaries()
    with_times = len(summaries) <= MAX_QUEUES_WITH_TIMES
    rocksdb = store.config.store_type == "defaultRocksDB"
    for s in summaries:
        first = last = -1
        if with_times and s.depth > 0:
            first = store.get_message_store_timestamp(s.topic, s.queue_id, s.min_offset)
            last = store.get_message_store_timestamp(s.topic, s.queue_id, s.max_offset - 1)
        span_s = (last - first) / 1000 if first > 0 and last > 0 else None
        rows.append({
            "topic": s.topic, "queue_id": s.queue_id, "min_offset": s.min_offset,
            "max_offset": s.max_offset, "depth": s.depth,
            "first_store_time": format_ms(first), "last_store_time": format_ms(last),
            "span_hours": round(span_s / 3600, 2) if span_s is not None else None,
            "files": None if rocksdb else len(store.inspect.queue_file_names(s.topic, s.queue_id)),
        })
    return pd.DataFrame(rows, columns=["topic", "queue_id", "min_offset", "max_offset", "depth",
                                       "first_store_time", "last_store_time", "span_hours", "files"])


def queue_time_span(store, topic: str, queue_id: int, min_offset: int,
                    max_offset: int) -> tuple[int, int] | None:
    """(first, last) store timestamps in ms of a queue's retained messages; None when it is empty or
    the times cannot be read (expired records)."""
    if max_offset <= min_offset:
        return None
    first = store.get_message_store_timestamp(topic, queue_id, min_offset)
    last = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
    return (first, last) if first > 0 and last > 0 else None


def default_jump_time(span: tuple[int, int] | None, now_ms: int) -> dt.datetime:
    """Where "jump by store time" starts: the queue's first store time (to the minute, UTC), so the
    default lands inside the queue whatever year it was written; now when the queue has no times."""
    moment_ms = span[0] if span is not None else now_ms
    moment = dt.datetime.fromtimestamp(moment_ms / 1000, dt.timezone.utc)
    return moment.replace(second=0, microsecond=0)


def units_with_records(store, topic: str, queue_id: int, queue_offset: int,
                       count: int) -> pd.DataFrame:
    """Raw units from `queue_offset` (never crossing a CQ file), each next to the record it points to."""
    count = max(1, min(count, MAX_UNITS_SHOWN))
    units = store.inspect.queue_units(topic, queue_id, queue_offset, count)
    rows = []
    if units is None:
        return pd.DataFrame(rows)
    for index, unit in enumerate(units[:count]):
        phy_offset, size, tags_code = int(unit["phy_offset"]), int(unit["size"]), int(unit["tags_code"])
        raw_unit = cqcodec.pack_unit(phy_offset, size, tags_code)
        row = {"queue_offset": queue_offset + index, "unit_hex": raw_unit.hex(" ").upper(),
               "phy_offset": phy_offset, "size": size, "tags_code": tags_code}
        row.update(_pointed_record(store, phy_offset, size, tags_code))
        rows.append(row)
    return pd.DataFrame(rows)


def _pointed_record(store, phy_offset: int, size: int, tags_code: int) -> dict:
    raw = store.inspect.read(phy_offset, size) if size > 0 else None
    if raw is None:
        return {"record": "not readable (expired or beyond the log)"}
    try:
        record = msgcodec.decode_message(raw)
    except CorruptDataError as error:
        return {"record": f"corrupt: {error}"}
    from store.codec.javahash import tags_code as java_tags_code
    return {"record": f"{record.topic} q{record.queue_id} #{record.queue_offset}",
            "tags": record.tags or "", "tags_code_ok": java_tags_code(record.tags) == tags_code,
            "store_time": format_ms(record.store_timestamp), "body": preview(record.body, 40)}


def lag_table(store) -> pd.DataFrame:
    """Committed offset and lag (max offset - committed) per group, topic and queue."""
    rows = []
    table = store.consumer_offsets.table() if store.consumer_offsets is not None else {}
    for topic_at_group, offsets in sorted(table.items()):
        topic, _, group = topic_at_group.partition("@")
        for queue_id, committed in sorted(offsets.items()):
            max_offset = store.get_max_offset_in_queue(topic, int(queue_id))
            rows.append({"group": group, "topic": topic, "queue_id": int(queue_id),
                         "committed": committed, "max_offset": max_offset,
                         "lag": max(0, max_offset - committed)})
    return pd.DataFrame(rows, columns=["group", "topic", "queue_id", "committed", "max_offset", "lag"])


@dataclass(frozen=True)
class RocksDBSummary:
    """What a RocksDB consume queue shows of itself (the ConsumeQueue page's RocksDB section)."""
    facts: dict               # headline figures: keys, SST files and bytes, compaction state
    properties: pd.DataFrame  # one row per RocksDB property, one column per column family
    files: pd.DataFrame       # every file of the directory; SST files with level and entry counts


ROCKSDB_FILE_COLUMNS = ["file", "kind", "size_bytes", "level", "num_entries", "num_deletions"]


def _file_kind(name: str) -> str:
    if name.endswith(".sst"):
        return "sst"
    if name.endswith(".log"):
        return "wal"
    return name.split("-")[0].split(".")[0]


def rocksdb_summary(store) -> RocksDBSummary:
    """The RocksDB consume-queue directory (file kinds and sizes) joined with the backend's
    `stats()`: per-column-family properties, SST levels and entry counts, compaction state."""
    directory = store.config.consume_queue_dir
    stats = store.inspect.rocksdb_stats() or {"open": False, "column_families": {}, "sst_files": []}
    live = {item["name"]: item for item in stats["sst_files"]}
    rows = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
    for name in names[:MAX_ROCKSDB_FILES]:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        item = live.get(name, {})
        rows.append({"file": name, "kind": _file_kind(name), "size_bytes": os.path.getsize(path),
                     "level": item.get("level"), "num_entries": item.get("num_entries"),
                     "num_deletions": item.get("num_deletions")})
    # Nullable integers: only live SST files have a level and entry counts.
    files = pd.DataFrame(rows, columns=ROCKSDB_FILE_COLUMNS).astype(
        {"level": "Int64", "num_entries": "Int64", "num_deletions": "Int64"})
    families = stats["column_families"]
    properties = pd.DataFrame(
        [{"property": prop.removeprefix("rocksdb."),
          **{family: values.get(prop) for family, values in families.items()}}
         for prop in (next(iter(families.values())) if families else {})])

    def total(prop: str) -> int | None:
        values = [v.get(prop) for v in families.values() if v.get(prop) is not None]
        return sum(values) if values else None

    ssts = files[files["kind"] == "sst"]
    facts = {
        "directory": directory,
        "database open": "yes (snapshot)" if stats["open"] and store.read_only
        else ("yes" if stats["open"] else "no (no database yet)"),
        "column families": ", ".join(families) or "-",
        "estimated keys": total("rocksdb.estimate-num-keys"),
        "SST files (live)": len(stats["sst_files"]),
        "SST bytes (live)": total("rocksdb.live-sst-files-size"),
        "memtable bytes": total("rocksdb.cur-size-all-mem-tables"),
        "compaction pending": _yes_no(total("rocksdb.compaction-pending")),
        "running compactions": total("rocksdb.num-running-compactions"),
        "pending compaction bytes": total("rocksdb.estimate-pending-compaction-bytes"),
        "files in directory": len(files),
        "bytes in directory": int(files["size_bytes"].sum()) if len(files) else 0,
        "SST files in directory": len(ssts),
    }
    return RocksDBSummary(facts, properties, files)


def facts_rows(facts: dict) -> list[dict]:
    """The facts as two text columns (numbers with thousands separators, '-' for unknown)."""
    def text(value) -> str:
        if value is None:
            return "-"
        return f"{value:,}" if isinstance(value, int) else str(value)
    return [{"fact": name, "value": text(value)} for name, value in facts.items()]


def _yes_no(value: int | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def unit_array_to_frame(units: np.ndarray | None) -> pd.DataFrame:
    if units is None:
        return pd.DataFrame(columns=["phy_offset", "size", "tags_code"])
    return pd.DataFrame({"phy_offset": units["phy_offset"].astype(np.int64),
                         "size": units["size"].astype(np.int64),
                         "tags_code": units["tags_code"].astype(np.int64)})
