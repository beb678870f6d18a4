"""The Query page's lookups: by key, msgId, unique key, queue offset, physical offset, time range.

Every lookup is capped; `QueryOutcome.capped` says when the cap cut the result short.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

import pandas as pd

from app.commitlog_data import message_row
from app.paths import InputError
from app.times import human_ms
from store.codec.msgid import decode_message_id
from store.errors import CorruptDataError, MessageNotFoundError

KINDS = ("key", "msgId", "unique key", "queue offset", "physical offset", "time range")
MAX_RESULTS = 64
FOREVER_MS = 2**63 - 1


@dataclass
class QueryOutcome:
    messages: list = field(default_factory=list)
    capped: bool = False
    notes: list[str] = field(default_factory=list)


def by_key(store, topic: str, key: str, begin_ms: int = 0, end_ms: int = FOREVER_MS,
           max_num: int = MAX_RESULTS) -> QueryOutcome:
    if not topic or not key:
        raise InputError("Give a topic and a key.")
    result = store.query_message(topic, key, max_num=max_num, begin_ms=begin_ms, end_ms=end_ms)
    notes = []
    if result.collisions_filtered:
        notes.append(f"{result.collisions_filtered} index hit(s) were hash collisions "
                     "(a different key with the same 32-bit hash) and were filtered out.")
    return QueryOutcome(list(result.messages), result.truncated, notes)


def by_msg_id(store, msg_id: str) -> QueryOutcome:
    msg_id = (msg_id or "").strip()
    try:
        host, phy_offset = decode_message_id(msg_id)
    except (ValueError, CorruptDataError) as error:
        raise InputError(f"Not an offset msgId: {error}") from None
    notes = [f"msgId decodes to store host {host}, physical offset {phy_offset}."]
    if host != store.config.store_host:
        notes.append(f"This store's host is {store.config.store_host}; the id names another broker, "
                     "but the offset is looked up here anyway.")
    try:
        record = store.look_message_by_offset(phy_offset)
    except (MessageNotFoundError, CorruptDataError) as error:
        notes.append(str(error))
        return QueryOutcome([], False, notes)
    return QueryOutcome([record], False, notes)


def by_unique_key(store, topic: str, uniq_key: str) -> QueryOutcome:
    outcome = by_key(store, topic, uniq_key)
    outcome.messages = [m for m in outcome.messages if m.uniq_key == uniq_key]
    return outcome


def by_queue_offset(store, topic: str, queue_id: int, queue_offset: int, count: int) -> QueryOutcome:
    count = max(1, min(count, MAX_RESULTS))
    result = store.get_message("query-page", topic, queue_id, queue_offset, count)
    return QueryOutcome(list(result.messages), len(result.messages) >= count,
                        [f"{result.status.value}: {result.explanation}"])


def by_phy_offset(store, phy_offset: int) -> QueryOutcome:
    try:
        return QueryOutcome([store.look_message_by_offset(phy_offset)])
    except (MessageNotFoundError, CorruptDataError) as error:
        return QueryOutcome([], False, [str(error)])


def by_time_range(store, topic: str, begin_ms: int, end_ms: int,
                  max_num: int = MAX_RESULTS) -> QueryOutcome:
    """Messages of every queue of `topic` stored in [begin, end] (offsets found by time search)."""
    if end_ms < begin_ms:
        raise InputError("The end of the time range is before its start.")
    queues = [q for t, q in store.inspect.served_queue_keys() if t == topic]    # [5.x] batch too
    if not queues:
        raise InputError(f"No consume queue for topic {topic!r} in this store.")
    found = []
    capped = False
    for queue_id in queues:
        start = store.get_offset_in_queue_by_time(topic, queue_id, begin_ms, "lower")
        offset = start
        max_offset = store.get_max_offset_in_queue(topic, queue_id)
        while offset < max_offset and len(found) < max_num:
            result = store.get_message("query-page", topic, queue_id, offset,
                                       min(32, max_num - len(found)))
            if not result.messages:
                break
            stop = False
            for record in result.messages:
                if record.store_timestamp > end_ms:
                    stop = True
                    break
                if record.store_timestamp >= begin_ms:
                    found.append(record)
            if stop or result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        if len(found) >= max_num:
            capped = True
            break
    found.sort(key=lambda r: (r.store_timestamp, r.commit_log_offset))
    return QueryOutcome(found[:max_num], capped)


def results_frame(messages) -> pd.DataFrame:
    """Rows for people: the store time as text with its zone (exports keep the milliseconds)."""
    rows = []
    for m in messages:
        row = message_row(m)
        row["store_timestamp"] = human_ms(m.store_timestamp)
        rows.append({("store time" if k == "store_timestamp" else k): v for k, v in row.items()})
    return pd.DataFrame(rows)


def export_rows(messages) -> list[dict]:
    """Full rows for export; bodies as base64 so any bytes survive."""
    rows = []
    for m in messages:
        row = message_row(m)
        row.pop("body", None)
        row.update({"uniq_key": m.uniq_key or "", "properties": dict(m.properties),
                    "born_timestamp": m.born_timestamp, "born_host": m.born_host,
                    "store_host": m.store_host, "body_base64": base64.b64encode(m.body).decode()})
        rows.append(row)
    return rows


def export_json(messages) -> str:
    return json.dumps(export_rows(messages), ensure_ascii=False, indent=1)


def export_csv(messages) -> str:
    frame = pd.DataFrame(export_rows(messages))
    if "properties" in frame:
        frame["properties"] = frame["properties"].map(lambda p: json.dumps(p, ensure_ascii=False))
    return frame.to_csv(index=False)
