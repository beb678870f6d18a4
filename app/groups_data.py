"""The Consumer groups page's tables and its offset reset, from `store.inspect.consumer_progress()`
(mqadmin consumerProgress: broker offset = the queue's max offset, lag = broker - consumer offset,
clamped by the inspection API with the reason; apache/rocketmq #2743 showed negative and -1 lags).

A reset (ResetOffsetByTimeCommand / `resetOffset` in RocketMQ) sets a group's committed offset on
every queue of a topic to the queue's earliest (min) or latest (max) offset, or to the first message
stored at or after a time. `plan_reset` computes it without writing; `apply_reset` commits it, and
refuses a read-only store (the broker that owns that directory would overwrite consumerOffset.json,
and this process never writes there).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from app.paths import InputError
from app.times import human_ms

TARGETS = ("earliest", "latest", "time")


def progress_rows(store, group: str | None = None) -> list[dict]:
    rows = list(store.inspect.consumer_progress(group))
    for row in rows:      # the inspection API clamps; a negative or -1 lag here is a bug there
        assert row["lag"] >= 0, row
    return rows


def groups_frame(rows: list[dict]) -> pd.DataFrame:
    """One row per group: topics, queues, total lag, the newest consumed store time; most lag first."""
    by_group: dict[str, dict] = {}
    for row in rows:
        entry = by_group.setdefault(row["group"], {"group": row["group"], "topics": set(), "queues": 0,
                                                   "total lag": 0, "last": None, "notes": 0})
        entry["topics"].add(row["topic"])
        entry["queues"] += 1
        entry["total lag"] += row["lag"]
        entry["notes"] += bool(row["note"])
        if row["last_store_ms"] is not None and (entry["last"] is None or row["last_store_ms"] > entry["last"]):
            entry["last"] = row["last_store_ms"]
    ordered = sorted(by_group.values(), key=lambda e: (-e["total lag"], e["group"]))
    return pd.DataFrame([{
        "group": e["group"], "topics": ", ".join(sorted(e["topics"])), "queues": e["queues"],
        "total lag": e["total lag"], "last consumed store time": human_ms(e["last"]),
        "queues with a note": e["notes"],
    } for e in ordered], columns=["group", "topics", "queues", "total lag", "last consumed store time",
                                  "queues with a note"])


def queues_frame(rows: list[dict]) -> pd.DataFrame:
    """One row per (topic, queue) of the rows given, most lag first; the note says why a lag was
    clamped or counted from the queue's start."""
    ordered = sorted(rows, key=lambda r: (-r["lag"], r["topic"], r["queue_id"]))
    return pd.DataFrame([{
        "topic": r["topic"], "queue": r["queue_id"],
        "committed offset": "none" if r["consumer_offset"] is None else str(r["consumer_offset"]),
        "max offset": r["broker_offset"], "lag": r["lag"],
        "last consumed store time": human_ms(r["last_store_ms"]), "note": r["note"] or "",
    } for r in ordered], columns=["topic", "queue", "committed offset", "max offset", "lag",
                                  "last consumed store time", "note"])


@dataclass(frozen=True)
class ResetStep:
    queue_id: int
    current: int            # -1 when the group never committed on the queue
    target: int

    @property
    def backwards(self) -> bool:
        return self.current >= 0 and self.target < self.current


def plan_reset(store, group: str, topic: str, target: str, timestamp_ms: int | None = None) -> list[ResetStep]:
    """The offset every queue of `topic` would get; writes nothing."""
    if not group or not topic:
        raise InputError("Give a group and a topic.")
    if target not in TARGETS:
        raise InputError(f"Reset target must be one of {TARGETS}.")
    if target == "time" and timestamp_ms is None:
        raise InputError("Give the time to reset to.")
    queues = [q for t, q in store.inspect.served_queue_keys() if t == topic]    # [5.x] batch too
    if not queues:
        raise InputError(f"No consume queue for topic {topic} in this store.")
    steps = []
    for queue_id in queues:
        if target == "earliest":
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif target == "latest":
            offset = store.get_max_offset_in_queue(topic, queue_id)
        else:
            offset = store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms, "lower")
        steps.append(ResetStep(queue_id, store.query_consumer_offset(group, topic, queue_id), offset))
    return steps


def plan_frame(steps: list[ResetStep]) -> pd.DataFrame:
    return pd.DataFrame([{"queue": s.queue_id, "committed now": "none" if s.current < 0 else str(s.current),
                          "after the reset": s.target,
                          "change": "-" if s.current < 0 else f"{s.target - s.current:+,}"}
                         for s in steps], columns=["queue", "committed now", "after the reset", "change"])


def apply_reset(store, read_only: bool, group: str, topic: str, steps: list[ResetStep]) -> int:
    """Commit the planned offsets; the number of queues changed. Refused on a read-only store."""
    if read_only or store.read_only:
        raise InputError("This store is open read-only: offsets cannot be reset here (the broker "
                         "that owns it would overwrite consumerOffset.json anyway).")
    changed = 0
    for step in steps:
        if step.current != step.target:
            store.commit_consumer_offset(group, topic, step.queue_id, step.target)
            changed += 1
    return changed
