"""Browsing one queue: seek by time or by queue offset, page forwards and backwards, keep only the
messages whose body holds a text, within a time range; and the tail of a queue (the live view).

Every read goes through the facade's pull (`MessageStore.get_message`, which commits nothing) and is
bounded: a page scans at most `MAX_SCAN` units, and says when that cap ended it before the page was
full. Times in the rows are text with their zone (app.times); the raw values stay on the records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd

from app.bodies import preview
from app.paths import InputError
from app.times import human_ms

GROUP = "inspector-browse"     # pulls commit nothing; the name only shows up in the engine's logs
CHUNK = 32                     # units per pull
MAX_PAGE = 200
MAX_SCAN = 20_000              # units scanned for one page (a filter that matches nothing stops here)


@dataclass
class BrowsePage:
    topic: str
    queue_id: int
    start_offset: int          # first queue offset scanned
    end_offset: int            # one past the last scanned; the next page starts here
    messages: list = field(default_factory=list)
    scanned: int = 0
    min_offset: int = 0
    max_offset: int = 0
    capped: bool = False       # MAX_SCAN ended the scan before the page was full
    notes: list[str] = field(default_factory=list)

    @property
    def at_end(self) -> bool:
        return self.end_offset >= self.max_offset

    @property
    def at_start(self) -> bool:
        return self.start_offset <= self.min_offset


def body_matches(body: bytes, needle: str, case_sensitive: bool = False) -> bool:
    """True when the body, read as UTF-8 (bad bytes replaced), holds `needle`; '' matches all."""
    if not needle:
        return True
    text = body.decode("utf-8", errors="replace")
    return needle in text if case_sensitive else needle.casefold() in text.casefold()


def _keep(record, needle: str, case_sensitive: bool, begin_ms: int | None, end_ms: int | None) -> bool:
    if begin_ms is not None and record.store_timestamp < begin_ms:
        return False
    if end_ms is not None and record.store_timestamp > end_ms:
        return False
    return body_matches(record.body, needle, case_sensitive)


def _bounds(store, topic: str, queue_id: int) -> tuple[int, int]:
    if not topic:
        raise InputError("Give a topic.")
    if (topic, queue_id) not in set(store.inspect.served_queue_keys()):     # [5.x] with batch queues
        raise InputError(f"No consume queue {topic} / {queue_id} in this store.")
    return store.get_min_offset_in_queue(topic, queue_id), store.get_max_offset_in_queue(topic, queue_id)


def seek_time(store, topic: str, queue_id: int, timestamp_ms: int) -> int:
    """The first queue offset stored at or after `timestamp_ms` (5.x's "lower" boundary; the
    queue's max offset when every message is older)."""
    _bounds(store, topic, queue_id)
    return store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms, "lower")


def _read(store, topic: str, queue_id: int, offset: int, count: int):
    result = store.get_message(GROUP, topic, queue_id, offset, count)
    return result.messages, max(result.next_begin_offset, offset)


def _read_range(store, topic: str, queue_id: int, begin: int, end: int) -> list:
    """Every message with begin <= queue offset < end (a pull may return fewer than asked: its
    byte and count limits; it is repeated from where it stopped)."""
    records, offset = [], begin
    for _ in range(end - begin):
        if offset >= end:
            break
        got, next_offset = _read(store, topic, queue_id, offset, end - offset)
        # A batch queue's pull at `offset` returns the whole record holding it, which may start
        # before `begin` (the chunk before has it): keep [begin, end) only.
        records += [r for r in got if begin <= r.queue_offset < end]
        if next_offset <= offset:
            break
        offset = next_offset
    return records


def page_forward(store, topic: str, queue_id: int, start_offset: int, page_size: int, *,
                 needle: str = "", case_sensitive: bool = False, begin_ms: int | None = None,
                 end_ms: int | None = None) -> BrowsePage:
    """Up to `page_size` kept messages from `start_offset` on."""
    low, high = _bounds(store, topic, queue_id)
    page_size = max(1, min(page_size, MAX_PAGE))
    offset = min(max(start_offset, low), high)
    page = BrowsePage(topic, queue_id, offset, offset, min_offset=low, max_offset=high)
    if start_offset < low:
        page.notes.append(f"Offset {start_offset} is below the queue's min offset {low} (expired "
                          f"or cleaned): started at {low}.")
    while offset < high and len(page.messages) < page_size:
        if page.scanned >= MAX_SCAN:
            page.capped = True
            break
        records, next_offset = _read(store, topic, queue_id, offset, CHUNK)
        if not records or next_offset <= offset:
            break
        past_range = False
        for record in records:
            if len(page.messages) >= page_size:
                next_offset = record.queue_offset
                break
            if end_ms is not None and record.store_timestamp > end_ms:
                # A queue's store times only grow (one writer appends them in order): the range
                # is over.
                past_range, next_offset = True, record.queue_offset
                break
            if _keep(record, needle, case_sensitive, begin_ms, end_ms):
                page.messages.append(record)
        page.scanned += next_offset - offset
        offset = next_offset
        if past_range:
            page.notes.append("Reached the end of the time range.")
            break
    page.end_offset = offset
    return page


def page_backward(store, topic: str, queue_id: int, end_offset: int, page_size: int, *,
                  needle: str = "", case_sensitive: bool = False, begin_ms: int | None = None,
                  end_ms: int | None = None) -> BrowsePage:
    """Up to `page_size` kept messages before `end_offset` (the page before a page that starts
    there), oldest first."""
    low, high = _bounds(store, topic, queue_id)
    page_size = max(1, min(page_size, MAX_PAGE))
    end_offset = min(max(end_offset, low), high)
    kept: list = []
    cursor, scanned, capped = end_offset, 0, False
    while cursor > low and len(kept) < page_size:
        if scanned >= MAX_SCAN:
            capped = True
            break
        begin = max(low, cursor - CHUNK)
        chunk = [r for r in _read_range(store, topic, queue_id, begin, cursor)
                 if _keep(r, needle, case_sensitive, begin_ms, end_ms)]
        kept = chunk + kept
        scanned += cursor - begin
        cursor = begin
    if len(kept) > page_size:
        kept = kept[-page_size:]
        cursor = kept[0].queue_offset
    return BrowsePage(topic, queue_id, cursor, end_offset, kept, scanned, low, high, capped)


def tail(store, topic: str, queue_id: int, count: int) -> BrowsePage:
    """The last `count` messages of the queue (the live view refreshes this)."""
    _low, high = _bounds(store, topic, queue_id)
    return page_backward(store, topic, queue_id, high, count)


def pretty_json(body: bytes) -> str | None:
    """The body as indented JSON, or None when it is not a JSON document in UTF-8."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def rows_frame(messages) -> pd.DataFrame:
    """The messages of a page, with the store time as text with its zone."""
    return pd.DataFrame([{
        "queue offset": m.queue_offset, "store time": human_ms(m.store_timestamp),
        "born time": human_ms(m.born_timestamp), "tags": m.tags or "", "keys": m.keys or "",
        "size": m.store_size, "msgId": m.msg_id, "body": preview(m.body),
    } for m in messages], columns=["queue offset", "store time", "born time", "tags", "keys", "size",
                                   "msgId", "body"])
