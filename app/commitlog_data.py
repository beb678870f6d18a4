"""Commit-log views: the segment map (fill level, BLANK filler) and a paged record browser.

Only reads through the facade's inspection API (`store.inspect`: segments and their layout, records,
raw record bytes). Scans are bounded; a full segment's layout is cached because it can no longer change.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.bodies import preview
from store.codec import message as msgcodec
from store.codec import record_check
from store.errors import CorruptDataError

MAX_SCAN_RECORDS_PER_SEGMENT = 200_000        # the record browser's cap per segment
MAX_PAGE_RECORDS = 500


@dataclass(frozen=True)
class SegmentInfo:
    name: str
    file_from_offset: int
    size_bytes: int
    data_bytes: int            # bytes of records (up to the BLANK or the write position)
    filler_bytes: int          # length of the BLANK filler at the end (0 if none)
    records: int               # -1 when not counted (scan cap reached)
    state: str                 # "full" | "active" | "empty"

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.size_bytes

    @property
    def fill_ratio(self) -> float:
        return (self.data_bytes + self.filler_bytes) / self.size_bytes if self.size_bytes else 0.0


def segment_map(store, cache: dict | None = None) -> list[SegmentInfo]:
    """One row per commit-log segment, oldest first. A full segment's layout is kept in `cache`
    (it can no longer change); the active one is walked again on every call."""
    cache = cache if cache is not None else {}
    segments = store.inspect.segments()
    infos = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment.read_position == 0:
            infos.append(SegmentInfo(segment.name, segment.file_from_offset, segment.file_size_bytes,
                                     0, 0, 0, "empty"))
            continue
        key = (segment.name, segment.file_size_bytes)
        if segment.is_full and key in cache:
            infos.append(cache[key])
            continue
        layout = store.inspect.segment_layout(segment.name)
        data, filler = layout.data_bytes, layout.filler_bytes
        if not segment.is_full:
            data, filler = segment.read_position, 0
        info = SegmentInfo(segment.name, segment.file_from_offset, segment.file_size_bytes, data,
                           filler, layout.records,
                           "full" if segment.is_full else ("active" if last or segment.read_position
                                                           else "empty"))
        if segment.is_full:
            cache[key] = info
        infos.append(info)
    return infos


def snap_to_record(store, phy_offset: int) -> int:
    """The start of the record that holds `phy_offset` (or the next record boundary)."""
    bounds = store.pointers()
    phy_offset = max(phy_offset, bounds["min_phy_offset"])
    segment = store.inspect.segment_holding(phy_offset)
    if segment is None:
        return min(phy_offset, bounds["max_phy_offset"])
    previous = segment.file_from_offset
    for offset, result in store.inspect.records(segment.file_from_offset, check_crc=False,
                                                limit_phy_offset=segment.file_end_offset,
                                                max_records=MAX_SCAN_RECORDS_PER_SEGMENT):
        if offset > phy_offset:
            return previous
        previous = offset
        if result.kind != record_check.CHECK_RECORD:
            break
    return previous


def browse_records(store, start_phy_offset: int, count: int) -> tuple[list[dict], int]:
    """Up to `count` rows (records, BLANK fillers, the first invalid spot) from `start_phy_offset`;
    returns (rows, the phy_offset where the next page starts)."""
    count = max(1, min(count, MAX_PAGE_RECORDS))
    rows: list[dict] = []
    next_offset = start_phy_offset
    for phy_offset, result in store.inspect.records(start_phy_offset, check_crc=True,
                                                    limit_phy_offset=store.pointers()["max_phy_offset"],
                                                    max_records=count + 1):
        if len(rows) >= count:
            break
        if result.kind == record_check.CHECK_RECORD:
            rows.append(record_row(store, phy_offset))
            next_offset = phy_offset + result.size
        elif result.kind == record_check.CHECK_BLANK:
            segment = store.inspect.segment_holding(phy_offset)
            end = segment.file_end_offset if segment is not None else phy_offset
            rows.append({"phy_offset": phy_offset, "kind": "BLANK", "size": end - phy_offset,
                         "topic": "", "queue_id": None, "queue_offset": None, "store_timestamp": None,
                         "tags": "", "keys": "", "msg_id": "", "body": "(end-of-file filler)"})
            next_offset = end
        else:
            rows.append({"phy_offset": phy_offset, "kind": "INVALID", "size": result.size,
                         "topic": "", "queue_id": None, "queue_offset": None, "store_timestamp": None,
                         "tags": "", "keys": "", "msg_id": "",
                         "body": "invalid or torn record: the log ends here for recovery"})
            next_offset = phy_offset
            break
    return rows, next_offset


def record_row(store, phy_offset: int) -> dict:
    """A table row for the record at `phy_offset`."""
    raw = store.inspect.record_bytes(phy_offset)
    if raw is None:
        return {"phy_offset": phy_offset, "kind": "MISSING", "size": 0}
    try:
        record = msgcodec.decode_message(raw)
    except CorruptDataError as error:
        return {"phy_offset": phy_offset, "kind": "CORRUPT", "size": len(raw), "body": str(error)}
    return message_row(record, kind="RECORD")


def message_row(record, kind: str | None = None) -> dict:
    row = {
        "phy_offset": record.commit_log_offset,
        "size": record.store_size,
        "topic": record.topic,
        "queue_id": record.queue_id,
        "queue_offset": record.queue_offset,
        "store_timestamp": record.store_timestamp,
        "tags": record.tags or "",
        "keys": record.keys or "",
        "msg_id": record.msg_id,
        "body": preview(record.body),
    }
    if kind is not None:
        row = {"phy_offset": row.pop("phy_offset"), "kind": kind, **row}
    return row
