"""Commit-log views: the segment map (fill level, BLANK filler) and a paged record browser.

Only reads through the facade's commit log (`store.commit_log`: segment list, `scan`, `read_record`).
Scans are bounded; a full segment's layout is cached because it can no longer change.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.bodies import preview
from store import kernel
from store.codec import message as msgcodec
from store.errors import CorruptDataError

MAX_SCAN_RECORDS_PER_SEGMENT = 200_000        # the record browser's cap per segment
SCAN_ROWS = 8192                               # rows per compiled scan call
MAX_SCAN_BATCHES_PER_SEGMENT = 1 << 16         # a 1 GiB segment of the smallest records is 12 M
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


def _scan_segment(commit_log, mapped) -> tuple[int, int, int]:
    """(data bytes, filler bytes, records) of one segment, walking its records with the compiled
    scan (about 0.1 us a record; the active segment is walked again on every refresh). Counts the
    records RocketMQ's check accepts; a SCHEDULE_TOPIC_XXXX record whose DELAY Java cannot parse is
    counted too (recovery would stop there: `check()` reports it)."""
    out = kernel.scan_buffer(SCAN_ROWS)
    limit = min(mapped.read_position, mapped.file_size_bytes)
    position = 0
    records = 0
    for _ in range(MAX_SCAN_BATCHES_PER_SEGMENT):   # bounded: each batch moves on by its records
        count, position, kind, _ = kernel.scan(mapped.buffer, position, limit, False, out)
        records += count
        if kind != kernel.STOP_FULL:
            break
    else:
        return position, 0, -1
    filler = mapped.file_size_bytes - position if kind == kernel.STOP_BLANK else 0
    return position, filler, records


def segment_map(store, cache: dict | None = None) -> list[SegmentInfo]:
    """One row per commit-log segment, oldest first."""
    cache = cache if cache is not None else {}
    commit_log = store.commit_log
    files = list(commit_log.mapped_files.files)
    infos = []
    for index, mapped in enumerate(files):
        name = mapped.path.rsplit("/", 1)[-1]
        last = index == len(files) - 1
        read_position = mapped.read_position
        if read_position == 0:
            infos.append(SegmentInfo(name, mapped.file_from_offset, mapped.file_size_bytes, 0, 0, 0,
                                     "empty"))
            continue
        full = read_position >= mapped.file_size_bytes
        key = (name, mapped.file_size_bytes)
        if full and key in cache:
            infos.append(cache[key])
            continue
        data, filler, records = _scan_segment(commit_log, mapped)
        if not full:
            data, filler = read_position, 0
        info = SegmentInfo(name, mapped.file_from_offset, mapped.file_size_bytes, data, filler, records,
                           "full" if full else ("active" if last or read_position else "empty"))
        if full:
            cache[key] = info
        infos.append(info)
    return infos


def snap_to_record(store, phy_offset: int) -> int:
    """The start of the record that holds `phy_offset` (or the next record boundary)."""
    commit_log = store.commit_log
    phy_offset = max(phy_offset, commit_log.min_offset())
    mapped = commit_log.mapped_files.find_file(phy_offset)
    if mapped is None:
        return min(phy_offset, commit_log.max_offset())
    previous = mapped.file_from_offset
    for offset, result in commit_log.scan(mapped.file_from_offset, check_crc=False,
                                          limit_offset=mapped.file_end_offset,
                                          max_records=MAX_SCAN_RECORDS_PER_SEGMENT):
        if offset > phy_offset:
            return previous
        previous = offset
        if result.kind != msgcodec.CHECK_RECORD:
            break
    return previous


def browse_records(store, start_phy_offset: int, count: int) -> tuple[list[dict], int]:
    """Up to `count` rows (records, BLANK fillers, the first invalid spot) from `start_phy_offset`;
    returns (rows, the phy_offset where the next page starts)."""
    count = max(1, min(count, MAX_PAGE_RECORDS))
    commit_log = store.commit_log
    rows: list[dict] = []
    next_offset = start_phy_offset
    for phy_offset, result in commit_log.scan(start_phy_offset, check_crc=True,
                                              limit_offset=commit_log.max_offset()):
        if len(rows) >= count:
            break
        if result.kind == msgcodec.CHECK_RECORD:
            rows.append(record_row(store, phy_offset))
            next_offset = phy_offset + result.size
        elif result.kind == msgcodec.CHECK_BLANK:
            mapped = commit_log.mapped_files.find_file(phy_offset)
            end = mapped.file_end_offset if mapped is not None else phy_offset
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
    raw = store.commit_log.read_record(phy_offset)
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
