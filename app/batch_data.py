"""[5.x] Batch consume queues for the ConsumeQueue page (`BatchConsumeQueue`, rocketmq-all-5.3.3):
the queue table, a page of 46-byte units beside the records they point to, and the check's findings
on one queue. Everything comes from the inspection API (`store.inspect.batch_queues`,
`batch_units`, `batch_findings`); times are shown as UTC text, raw values stay in their columns."""

from __future__ import annotations

import pandas as pd

from app.times import human_ms

MAX_UNITS_SHOWN = 200

QUEUE_COLUMNS = ["topic", "queue_id", "files", "units", "min_offset", "max_offset", "messages",
                 "batch_topic", "first_store_time", "last_store_time"]
UNIT_COLUMNS = ["queue_offsets", "msg_base_offset", "batch_size", "valid", "problems", "record",
                "store_time", "phy_offset", "size", "tags_code", "compacted_offset", "file",
                "position", "record_queue_offset", "inner_base", "inner_num", "record_store_time",
                "store_timestamp", "unit_hex"]
FINDING_COLUMNS = ["severity", "file", "position", "message", "on_restart"]


def has_batch_queues(store) -> bool:
    return bool(store.inspect.batch_queue_keys())


def batch_queue_table(store) -> pd.DataFrame:
    """One row per batch queue; offsets count messages."""
    rows = [{"topic": view.topic, "queue_id": view.queue_id, "files": len(view.files),
             "units": view.units, "min_offset": view.min_offset, "max_offset": view.max_offset,
             "messages": view.messages, "batch_topic": view.batch_topic,
             "first_store_time": human_ms(view.first_store_ms),
             "last_store_time": human_ms(view.last_store_ms)}
            for view in store.inspect.batch_queues()]
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS)


def batch_units_table(store, topic: str, queue_id: int, queue_offset: int,
                      count: int) -> tuple[pd.DataFrame, bool]:
    """(units from the one holding message `queue_offset`, whether more follow). Raises StoreError
    (one line naming the queue's directory) when no unit holds that offset."""
    count = max(1, min(int(count), MAX_UNITS_SHOWN))
    page = store.inspect.batch_units(topic, queue_id, queue_offset, count)
    rows = []
    for unit in page.units:
        record = "-" if unit.record_topic is None else \
            f"{unit.record_topic} / {unit.record_queue_id}"
        rows.append({
            "queue_offsets": f"{unit.msg_base_offset}..{unit.last_queue_offset}",
            "msg_base_offset": unit.msg_base_offset, "batch_size": unit.batch_size,
            "phy_offset": unit.phy_offset, "size": unit.size, "tags_code": unit.tags_code,
            "store_time": human_ms(unit.store_timestamp), "store_timestamp": unit.store_timestamp,
            "compacted_offset": unit.compacted_offset, "file": unit.file_name,
            "position": unit.position, "record": record,
            "record_queue_offset": unit.record_queue_offset,
            "inner_base": unit.record_inner_base, "inner_num": unit.record_inner_num,
            "record_store_time": human_ms(unit.record_store_timestamp),
            "valid": unit.valid, "problems": "; ".join(unit.problems),
            "unit_hex": unit.raw.hex(" ").upper()})
    frame = pd.DataFrame(rows, columns=UNIT_COLUMNS)
    # Nullable integers: a unit whose record cannot be read has no record queue offset.
    return frame.astype({"record_queue_offset": "Int64"}), page.more


def batch_findings_table(store, topic: str, queue_id: int) -> pd.DataFrame:
    """The store check's findings on the queue's files (file name and byte position)."""
    rows = [{"severity": f.severity, "file": f.path, "position": f.position,
             "message": f.message, "on_restart": f.on_restart}
            for f in store.inspect.batch_findings(topic, queue_id)]
    return pd.DataFrame(rows, columns=FINDING_COLUMNS).astype({"position": "Int64"})
