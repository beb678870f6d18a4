"""Cross-check of a DLedger commit log (`enableDLegerCommitLog=true`, `store.dledger`).

Reads the data files as they are on disk (the checker's read-only maps) and never goes through
recovery. Checks, with the class behind each rule:

| what                 | rule                                                                      |
|----------------------|---------------------------------------------------------------------------|
| data files           | names, sizes (`MmapFileList.load` refuses a wrong size), gaps (`checkSelf`) |
| entries              | `DLedgerMmapFileStore.recover`'s rules: pos, size = bodySize + 48, magic 1, |
|                      | index = previous + 1, term never lower; where recovery would cut the log   |
| CRC fields           | bodyCrc and chainCrc: no DLedger release writes them (0); non-zero = damage |
| record inside        | the body is one whole RocketMQ record (`DLedgerCommitLog.checkMessageAnd-  |
|                      | ReturnSize`): its size fills the entry, PHYSICALOFFSET = pos + 48 (the     |
|                      | append hook), BODYCRC                                                      |
| BLANK                | magic -1, size = the bytes left in the file (`MmapFileList.preAppend`)     |
| index file           | one unit per entry (`encodeIndex`), equal to the entry; zeros after; size  |
| checkpoint, currterm | committedIndex/endIndex <= the last entry; currTerm >= the last term        |

The result is a `LogScan` in RocketMQ offsets (record starts = pos + 48), so the consume-queue, index
and checkpoint checks run unchanged on top of it.
"""

from __future__ import annotations

import dataclasses
import mmap
from array import array

import numpy as np

from store.check.commitlog import LogScan
from store.check.log_view import body_crc_matches, is_all_zero
from store.check.segments import check_segment_files
from store.check.findings import Sink
from store.codec import record_check
from store.dledger.entries import BLANK, ENTRY, IndexFiles, walk_entries
from store.dledger.entry_codec import ENTRY_HEADER_BYTES, INDEX_UNIT_BYTES
from store.dledger.layout import DLedgerLayout, read_long, read_properties

_C = "commitlog"
_CUT = ("DLedgerMmapFileStore.recover stops at the first entry that breaks its rules and truncates "
        "the data files there (the entries after it are lost)")


def check_dledger(layout: DLedgerLayout, view, sink: Sink, *, max_records: int | None,
                  unclean: bool) -> LogScan:
    """Check the DLedger log in `view` (a `CommitLogView` over `layout.data_dir`)."""
    before = len(sink.findings)
    check_segment_files(view, sink)
    for number in range(before, len(sink.findings)):   # `recover --pad-truncated` pads commitlog/
        finding = sink.findings[number]
        if finding.repair and "--pad-truncated" in finding.repair:
            sink.findings[number] = dataclasses.replace(
                finding, repair=None, message=finding.message.split("; rmqstore recover")[0])
    scan = LogScan()
    if not view.segments:
        sink.add("info", _C, layout.data_dir, None, "no DLedger data files: an empty log",
                 repair=None)
        return scan
    files = [(s.file_from_offset, s.buffer, s.size_bytes, s.path) for s in view.segments]
    scan.min_offset = files[0][0]
    starts = array("q")
    entries = []                      # (index, term, pos, size, magic) for the index-file check
    last = None
    end_offset = scan.min_offset
    stop = None
    for step, number, position, what in walk_entries(files, 0, max_entries=max_records):
        path = files[number][3]
        if step == ENTRY:
            _check_entry(files[number], position, what, sink)
            starts.append(what.body_pos)
            entries.append((what.index, what.term, what.pos, what.size, what.magic))
            _note_record(files[number][1], position, what, scan)
            last = what
            end_offset = what.pos + what.size
        elif step == BLANK:
            declared = int.from_bytes(files[number][1][position + 4:position + 8], "big",
                                      signed=True)
            if declared != what:
                sink.add("warning", _C, path, position + 4,
                         f"DLedger BLANK says {declared} bytes but {what} remain in the file",
                         repair=None)
            end_offset = files[number][0] + files[number][2]
        else:
            stop = (number, position, what)
    if max_records is not None and len(entries) >= max_records:
        scan.capped = True
        sink.add("info", _C, None, None, f"max_records={max_records} cut the DLedger walk short at "
                                         f"entry {last.index}; later entries were not checked")
    elif stop is not None:
        end_offset = _check_stop(files, stop, end_offset, sink, unclean)
    scan.starts = np.frombuffer(starts, dtype=np.int64).copy() if starts else scan.starts
    scan.end_offset = end_offset
    scan.walked_to = int(scan.starts[-1]) + 1 if scan.capped else max(end_offset, scan.min_offset)
    if not scan.capped:
        _check_index_file(layout, entries, sink)
    _check_state_files(layout, last, sink)
    return scan


def _note_record(buffer, position: int, header, scan: LogScan) -> None:
    result = record_check.check_message(buffer, position + ENTRY_HEADER_BYTES, check_crc=False,
                                        limit=position + header.size)
    scan.records += 1
    if result.kind != record_check.CHECK_RECORD:
        return
    request = result.request
    scan.last_store_timestamp = max(scan.last_store_timestamp, request.store_timestamp)
    if request.sys_flag & 0x0C in (0x00, 0x08):
        scan.note_queued(request)


def _check_entry(file, position: int, header, sink: Sink) -> None:
    base, buffer, _size, path = file
    where = f"entry {header.index} (term {header.term}) at {header.pos}"
    for name, value, offset in (("chainCrc", header.chain_crc, 36),
                                ("bodyCrc", header.body_crc, 40)):
        if value != 0:
            sink.add_limited(("crc", name), "warning", _C, path, position + offset,
                             f"{where}: {name} is {value:#010x}; no DLedger release writes it "
                             f"(always 0): the header was changed after it was written",
                             repair=None)
    body = position + ENTRY_HEADER_BYTES
    result = record_check.check_message(buffer, body, check_crc=False,
                                        limit=position + header.size)
    if result.kind != record_check.CHECK_RECORD:
        sink.add_limited("record", "error", _C, path, body,
                         f"{where}: the body is not a valid RocketMQ record ({result.kind}, size "
                         f"{result.size}); dispatch skips it and pulls of its unit fail",
                         repair=None)
        return
    if result.size != header.body_size:
        sink.add_limited("record-size", "error", _C, path, body,
                         f"{where}: the record is {result.size} bytes but the entry body is "
                         f"{header.body_size}", repair=None)
    if result.request.commit_log_offset != header.body_pos:
        sink.add_limited("phy", "error", _C, path, body + 28,
                         f"{where}: PHYSICALOFFSET says {result.request.commit_log_offset}, "
                         f"expected entry pos + 48 = {header.body_pos}", repair=None)
    if not body_crc_matches(buffer, body):
        sink.add_limited("bodycrc", "error", _C, path, body + 8,
                         f"{where}: BODYCRC does not match the record's body (recovery after a "
                         f"crash with checkCRCOnRecover stops the queues before it)", repair=None)


def _check_stop(files, stop, end_offset: int, sink: Sink, unclean: bool) -> int:
    """Report where the walk ended; returns the end of the valid log."""
    number, position, what = stop
    base, buffer, size, path = files[number]
    later_data = any(not is_all_zero(f[1], 0, f[2], f[3]) for f in files[number + 1:])
    if what.clean and what.reason.startswith("zeros"):
        if not is_all_zero(buffer, position, size, path) or later_data:
            sink.add("error", _C, path, position,
                     f"the log ends at {what.phy_offset} (a zero size) but data follows: "
                     f"recovery drops it", on_restart=_CUT, repair=None)
        return what.phy_offset
    if what.clean:
        return end_offset
    torn = number == len(files) - 1 and not later_data
    severity = "warning" if unclean and torn else "error"
    sink.add(severity, _C, path, position,
             f"invalid DLedger entry at {what.phy_offset}: {what.reason}"
             + ("; later files hold data that is dropped with it" if later_data else ""),
             on_restart=_CUT, repair=None)
    return what.phy_offset


def _check_index_file(layout: DLedgerLayout, entries: list, sink: Sink) -> None:
    index_files = IndexFiles(layout.index_dir)
    if not index_files.present:
        sink.add("info", _C, layout.index_dir, None,
                 "no DLedger index file: the broker rebuilds it from the data files on load "
                 "(DLedgerMmapFileStore.recover writes a unit for every entry it walks)",
                 repair=None)
        return
    for start, path, size in index_files.files:
        if size != layout.index_file_bytes:
            sink.add("error", _C, path, size,
                     f"DLedger index file is {size} bytes, expected {layout.index_file_bytes} "
                     f"(mappedFileSizeForEntryIndex): MmapFileList.load refuses it and the broker "
                     f"exits", repair=None)
    for index, term, pos, size, magic in entries:
        unit = index_files.unit(index)
        if unit is None or (unit.magic, unit.pos, unit.size, unit.index, unit.term) != (
                magic, pos, size, index, term):
            got = "missing" if unit is None else \
                f"magic={unit.magic} pos={unit.pos} size={unit.size} index={unit.index} " \
                f"term={unit.term}"
            sink.add_limited("index-unit", "warning", _C, layout.index_dir, index * INDEX_UNIT_BYTES,
                             f"index unit {index} does not match its entry (pos={pos} size={size} "
                             f"term={term}): {got}",
                             on_restart="recover() rewrites the index from the first mismatch",
                             repair=None)
    after = (entries[-1][0] + 1) * INDEX_UNIT_BYTES if entries else 0
    for start, path, size in index_files.files:
        if start + size <= after:
            continue
        if size == 0:
            continue
        with open(path, "rb") as handle:
            buffer = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
        try:
            if not is_all_zero(buffer, max(0, after - start), size, path):
                sink.add("info", _C, path, max(0, after - start),
                         "DLedger index units after the last entry (left by a cut; recover() "
                         "truncates the index there)", repair=None)
        finally:
            buffer.close()


def _check_state_files(layout: DLedgerLayout, last, sink: Sink) -> None:
    end_index = -1 if last is None else last.index
    checkpoint = read_properties(layout.checkpoint_path)
    if checkpoint is None:
        sink.add("info", _C, layout.checkpoint_path, None,
                 "no DLedger checkpoint: the committed index is unknown until the node leads",
                 repair=None)
    else:
        for key in ("committedIndex", "endIndex"):
            value = read_long(checkpoint, key)
            if value is not None and value > end_index:
                sink.add("warning", _C, layout.checkpoint_path, None,
                         f"DLedger checkpoint {key}={value} but the last entry is {end_index}: "
                         f"entries the node had written are gone", repair=None)
    currterm = read_properties(layout.currterm_path)
    term = read_long(currterm, "currTerm")
    if term is not None and last is not None and term < last.term:
        sink.add("warning", _C, layout.currterm_path, None,
                 f"currTerm={term} is lower than the last entry's term {last.term}", repair=None)
