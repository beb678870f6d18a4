"""The Topics page's tables, from `store.inspect.topics()` / `topic_status(topic)` (the same
numbers mqadmin's topicList / topicStatus show, see store/inspect/admin_views.py).

Normal and system topics are listed apart from the `%RETRY%` and `%DLQ%` topics (RocketMQ's
MixAll.RETRY_GROUP_TOPIC_PREFIX / DLQ_GROUP_TOPIC_PREFIX): those hold the messages consumers failed
on, and operators look at them on their own. Times are shown with their zone; the raw values stay in
the `*_ms` columns of `topic_rows` (for export and tests)."""

from __future__ import annotations

import pandas as pd

from app.times import human_bytes, human_ms

SORT_KEYS = {"topic": "topic", "messages": "messages", "size on disk": "bytes",
             "last store time": "last_store_ms", "put rate": "put_rate_per_s"}
RETRY_KINDS = ("retry", "dlq")
COLUMNS = ["topic", "kind", "queues", "messages", "size", "first store time", "last store time",
           "put rate (msgs/s)"]


def topic_rows(store) -> list[dict]:
    """The inspection API's rows, unchanged (raw values)."""
    return list(store.inspect.topics())


def sorted_rows(rows: list[dict], sort_key: str, descending: bool) -> list[dict]:
    field = SORT_KEYS[sort_key]
    present = [r for r in rows if r.get(field) is not None]
    missing = [r for r in rows if r.get(field) is None]     # unknown values last, either way
    return sorted(present, key=lambda r: r[field], reverse=descending) + missing


def topics_frame(rows: list[dict]) -> pd.DataFrame:
    """What people read: sizes in KiB/MiB, times with their zone, the rate rounded."""
    return pd.DataFrame([{
        "topic": r["topic"], "kind": r["kind"], "queues": r["queues"], "messages": r["messages"],
        "size": human_bytes(r["bytes"]), "first store time": human_ms(r["first_store_ms"]),
        "last store time": human_ms(r["last_store_ms"]),
        "put rate (msgs/s)": "-" if r["put_rate_per_s"] is None else f"{r['put_rate_per_s']:,.1f}",
    } for r in rows], columns=COLUMNS)


def split(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(normal and system topics, %RETRY% and %DLQ% topics)."""
    return ([r for r in rows if r["kind"] not in RETRY_KINDS],
            [r for r in rows if r["kind"] in RETRY_KINDS])


def status_frame(store, topic: str) -> pd.DataFrame:
    """Per queue: min and max offset, messages held, the last message's store time."""
    return pd.DataFrame([{
        "queue": r["queue_id"], "min offset": r["min_offset"], "max offset": r["max_offset"],
        "messages": r["max_offset"] - r["min_offset"], "last store time": human_ms(r["last_updated_ms"]),
    } for r in store.inspect.topic_status(topic)],
        columns=["queue", "min offset", "max offset", "messages", "last store time"])
