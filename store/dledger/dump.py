"""`rmqstore dump records` on a DLedger log: one row per entry with the RocketMQ record inside.

Rows follow `store.inspect.raw.dump_records` (phyOffset is RocketMQ's offset of the record, pos +
48; `position` its place in the file; `kind` RECORD, BLANK, INVALID or END) and add the entry's
`dledgerIndex`, `term`, `entryPos` and `entrySize`. The walk is `DLedgerMmapFileStore.recover`'s
(`store.dledger.entries`); files are mapped read-only and nothing is written.
"""

from __future__ import annotations

import mmap
import os

from store.codec import record_check
from store.dledger.entries import BLANK, ENTRY, walk_entries
from store.dledger.entry_codec import ENTRY_HEADER_BYTES
from store.dledger.layout import DLedgerLayout
from store.mappedfile.mapped_file import parse_file_name

END_OF_DATA = "END"


def _map_files(data_dir: str) -> list[tuple]:
    files = []
    try:
        names = sorted(os.listdir(data_dir))
    except OSError:
        return files
    for name in names:
        path = os.path.join(data_dir, name)
        start = parse_file_name(name)
        if start is None or not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        buffer = b""
        if size:
            with open(path, "rb") as handle:
                buffer = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
        files.append((start, buffer, size, path))
    return files


def dump_dledger_records(layout: DLedgerLayout, *, start_phy_offset: int = 0, limit: int = 100,
                         verify: bool = False) -> list[dict]:
    """Up to `limit` rows from the entry at or after `start_phy_offset` (an entry pos or a record
    offset). `verify` adds `valid`: BODYCRC matches and PHYSICALOFFSET = pos + 48."""
    files = _map_files(layout.data_dir)
    rows: list[dict] = []
    try:
        first = 0
        for number, (start, _buffer, size, _path) in enumerate(files):
            if start <= start_phy_offset < start + size:
                first = number
        for step, number, position, what in walk_entries(files, first):
            if len(rows) >= limit:
                break
            base, buffer, size, path = files[number]
            name = os.path.basename(path)
            if step == ENTRY:
                if what.pos < start_phy_offset and what.body_pos != start_phy_offset:
                    continue
                body = position + ENTRY_HEADER_BYTES
                result = record_check.check_message(buffer, body, check_crc=False,
                                                    limit=position + what.size)
                row = {"phyOffset": what.body_pos, "file": name, "position": body,
                       "kind": result.kind, "size": result.size, "dledgerIndex": what.index,
                       "term": what.term, "entryPos": what.pos, "entrySize": what.size}
                if result.kind == record_check.CHECK_RECORD:
                    r = result.request
                    row.update(topic=r.topic, queueId=r.queue_id, queueOffset=r.consume_queue_offset,
                               storeTimestamp=r.store_timestamp, tagsCode=r.tags_code, keys=r.keys,
                               uniqKey=r.uniq_key, sysFlag=r.sys_flag)
                    if verify:
                        checked = record_check.check_message(buffer, body, check_crc=True,
                                                             limit=position + what.size)
                        row["valid"] = checked.kind == record_check.CHECK_RECORD and \
                            r.commit_log_offset == what.body_pos and result.size == what.body_size
                elif verify:
                    row["valid"] = False
                rows.append(row)
            elif step == BLANK:
                if base + position >= start_phy_offset:
                    rows.append({"phyOffset": base + position, "file": name, "position": position,
                                 "kind": record_check.CHECK_BLANK, "size": what})
            else:
                clean = what.clean
                row = {"phyOffset": what.phy_offset, "file": name, "position": position,
                       "kind": END_OF_DATA if clean else record_check.CHECK_INVALID,
                       "size": 0 if clean else -1, "problem": what.reason}
                if verify and not clean:
                    row["valid"] = False
                if what.phy_offset >= start_phy_offset:
                    rows.append(row)
    finally:
        for file in files:
            if isinstance(file[1], mmap.mmap):
                file[1].close()
    return rows


def iter_dledger_records(layout: DLedgerLayout, *, check_crc: bool = False):
    """Yield (phy_offset, CheckResult) of the record inside every entry, in log order, up to
    where `DLedgerMmapFileStore.recover` ends the log (`store.check.log_view.iter_records`' contract
    for a DLedger log: tools that re-read every record, such as the index rebuild)."""
    files = _map_files(layout.data_dir)
    try:
        for step, number, position, what in walk_entries(files):
            if step != ENTRY:
                continue
            yield what.body_pos, record_check.check_message(
                files[number][1], position + ENTRY_HEADER_BYTES, check_crc=check_crc,
                limit=position + what.size)
    finally:
        for file in files:
            if isinstance(file[1], mmap.mmap):
                file[1].close()
