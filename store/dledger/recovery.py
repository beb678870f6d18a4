"""Recovery of a DLedger log at open: `DLedgerMmapFileStore.recover`, then RocketMQ's part.

1. DLedger (`recover()`): from the third-last data file back, the first whose first entry is valid
   and matches its index unit (else the first file); walk the entries with the rules of
   `store.dledger.entries`; the log ends where they break (a writable open cuts the files there and
   rewrites the index from the first unit that does not match its entry, needWriteIndex).
   `ledgerBeginIndex` is the first file's first entry; the committed index is the checkpoint's
   (capped at the last entry), or the last entry for a single-member group (see `commit_log`).
2. RocketMQ (`DLedgerCommitLog.dledgerRecoverNormally/Abnormally`): cut the consume queues past the
   write position; after a crash walk the records from the data file `isMmapFileMatchedRecover`
   picks (its first record older than the checkpoint) with `checkMessageAndReturnSize` and
   re-dispatch from there.

Readers see the log up to `committedPos` (`DLedgerCommitLog.getData` returns nothing at or past it).
Everything is reported in the `RecoveryReport` the loader passes in (duck-typed: this package ranks
below `store.recovery`).
"""

from __future__ import annotations

import numpy as np

from store.codec import message as msgcodec
from store.codec import record_check
from store.commitlog.commit_log import is_queued_transaction_type
from store.dledger.entries import BLANK, ENTRY, IndexFiles, check_entry_at, walk_entries
from store.dledger.entry_codec import ENTRY_HEADER_BYTES
from store.dledger.layout import read_long, read_properties
from store.dledger.writer import index_unit_of
from store.errors import CorruptDataError


def _choose_start(log, index_files: IndexFiles) -> int:
    """`recover()`'s start: from the third-last file back, the first whose first entry is
    valid and matches its index unit; else the first file."""
    files = log.mapped_files.files
    for number in range(max(0, len(files) - 3), -1, -1):
        mapped = files[number]
        header, _ = check_entry_at(mapped.buffer, 0, mapped.file_from_offset,
                                   mapped.file_size_bytes)
        if header is not None and index_files.matches(header):
            return number
    return 0


def recover(log, report, *, abnormal: bool, read_only: bool, check_crc: bool,
            cq_max_phy_offset: int, min_timestamp: int) -> None:
    """Fill `report` (a `RecoveryReport`) as `dledgerRecoverNormally/Abnormally` recover."""
    queue = log.mapped_files
    files = queue.files
    state = log.state
    report.max_offset_before = queue.max_wrote_offset()
    index_files = IndexFiles(log.layout.index_dir)
    state.index_file_present = index_files.present
    if not files:
        report.step("dledger", f"no data files in {log.layout.data_dir}: empty log")
        queue.set_positions(0)
        return
    start = _choose_start(log, index_files)
    report.start_file = files[start].path
    report.start_phy_offset = files[start].file_from_offset
    report.step("choose start", f"DLedger recovery walks entries from {files[start].path}"
                + ("" if index_files.present else " (no index file)"))
    try:
        process_offset, stop = _walk_for_recovery(log, start, report, index_files)
    finally:
        index_files.close()
    last = files[-1]
    if last.file_from_offset - process_offset > last.file_size_bytes:
        raise CorruptDataError(last.path, 0, f"DLedger recovery ends at {process_offset}, more "
                               f"than a file before the last data file: the broker refuses to "
                               f"start ([MONITOR] processOffset is too small)")
    report.process_offset = process_offset
    report.stop_reason = stop.reason
    report.bytes_checked = process_offset - report.start_phy_offset
    report.step("scan", f"{report.records_checked} entries valid (index {state.ledger_begin_index}"
                        f"..{state.ledger_end_index}); stopped: {stop.reason}")
    if not stop.clean:
        report.truncated_bytes = _dirty_bytes(queue.find_file(process_offset), process_offset)
    report.deleted_files = [f.path for f in files if f.file_from_offset > process_offset]
    if read_only:
        _set_positions(queue, process_offset)
    else:
        queue.truncate_dirty_files(process_offset)
        queue.set_positions(process_offset)
    state.write_pos = process_offset
    _load_committed(log, report)
    visible = log.state.committed_pos if log.state.committed_pos >= 0 else log.min_offset()
    if visible < process_offset:        # DLedgerCommitLog.getData: nothing at or past committedPos
        _set_positions(queue, visible)
        report.step("dledger", f"entries from {visible} to {process_offset} are not committed: "
                               f"readers do not see them")
    _recover_rocketmq_part(log, report, abnormal=abnormal, check_crc=check_crc,
                           cq_max_phy_offset=cq_max_phy_offset, min_timestamp=min_timestamp)


def _walk_for_recovery(log, start: int, report, index_files: IndexFiles):
    """The entry walk; a writable open also rewrites the index from the first unit that does
    not match its entry (`recover()`'s needWriteIndex)."""
    state = log.state
    files = log._files()
    writer = log.index_writer
    rewrite_from = None
    process_offset = files[start][0]
    first = None
    stop = None
    ends = log._entry_ends
    for step, number, position, what in walk_entries(files, start):
        base = files[number][0]
        if step == ENTRY:
            first = first or what
            ends[what.index] = what.pos + what.size
            state.ledger_end_index, state.ledger_end_term = what.index, what.term
            report.records_checked += 1
            report.last_record_offset = what.body_pos
            process_offset = what.pos + what.size
            _note_queue(report, files[number][1], position, what)
            if writer is not None:
                if rewrite_from is None and not index_files.matches(what):
                    rewrite_from = what.index
                if rewrite_from is not None:
                    writer.write(what.index, index_unit_of(what))
        elif step == BLANK:
            process_offset = base + files[number][2]
        else:
            stop = what
            if not what.clean or "zeros" in what.reason:
                process_offset = what.phy_offset
    if rewrite_from is not None:
        report.step("dledger index", f"index units rewritten from entry {rewrite_from} "
                                     f"(they did not match the data, or no index file)")
    if first is not None:
        head, _ = check_entry_at(files[0][1], 0, files[0][0], files[0][2])
        state.ledger_begin_index = (head or first).index if start else first.index
    return process_offset, stop


def _load_committed(log, report) -> None:
    state = log.state
    state.current_term = read_long(read_properties(log.layout.currterm_path), "currTerm") or 0
    checkpoint = read_properties(log.layout.checkpoint_path)
    state.checkpoint_committed_index = read_long(checkpoint, "committedIndex")
    state.checkpoint_end_index = read_long(checkpoint, "endIndex")
    committed = state.checkpoint_committed_index
    if log.layout.peers == 1 and state.ledger_end_index >= 0:
        committed = state.ledger_end_index
        why = "a single-member group commits its whole log when it leads"
    else:
        why = f"checkpoint committedIndex={committed}"
    if committed is None or committed < 0 or state.ledger_end_index < 0 or \
            committed < state.ledger_begin_index:
        report.step("dledger", f"no committed entry ({why}): the log reads as empty")
        return
    committed = min(committed, state.ledger_end_index)
    end = log._entry_ends.get(committed)
    if end is None:
        for header, _number, _position in log.entries(log.min_offset()):
            if header.index == committed:
                end = header.pos + header.size
                break
    if end is None:
        report.step("dledger", f"committed entry {committed} not found: the log reads as empty")
        return
    state.committed_index, state.committed_pos = committed, end
    report.step("dledger", f"committed index {committed} ({why}), committedPos {end}")


def _recover_rocketmq_part(log, report, *, abnormal: bool, check_crc: bool,
                           cq_max_phy_offset: int, min_timestamp: int) -> None:
    """`dledgerRecoverNormally` cuts the queues past the write position; `...Abnormally` walks
    the records from the file `isMmapFileMatchedRecover` picks and re-dispatches them."""
    process_offset = log.state.write_pos
    if abnormal:
        start = _abnormal_start(log, min_timestamp)
        mapped = log.mapped_files.files[start] if log.mapped_files.files else None
        start_offset = mapped.file_from_offset if mapped else 0
        end = start_offset
        for header, number, position in log.entries(start_offset):
            buffer = log.mapped_files.files[number].buffer
            result = record_check.check_message(buffer, position + ENTRY_HEADER_BYTES,
                                                check_crc=check_crc,
                                                limit=position + header.size)
            if result.kind != record_check.CHECK_RECORD:
                report.step("abnormal", f"invalid record in entry {header.index} at "
                                        f"{header.body_pos}: queues end before it")
                break
            end = header.pos + header.size
        process_offset = end
        report.dispatch_from = start_offset
        report.step("abnormal", f"re-dispatch from {start_offset}; records valid to {end}")
    else:
        report.dispatch_from = max(log.min_offset(),
                                   min(max(cq_max_phy_offset, 0), log.state.write_pos))
    report.consume_queues_truncated = cq_max_phy_offset > process_offset
    if report.consume_queues_truncated:
        report.process_offset = min(report.process_offset, process_offset)


def _abnormal_start(log, min_timestamp: int) -> int:
    """`isMmapFileMatchedRecover`: from the last file back, the first whose first record (at
    BODY_OFFSET) has the v1 magic and a store time <= the checkpoint's min timestamp."""
    files = log.mapped_files.files
    for number in range(len(files) - 1, -1, -1):
        head = files[number].read(ENTRY_HEADER_BYTES, 64, unchecked=True)
        if head is None or int.from_bytes(head[4:8], "big", signed=True) != \
                msgcodec.MESSAGE_MAGIC_V1:
            continue
        sys_flag = int.from_bytes(head[36:40], "big", signed=True)
        raw = files[number].read(ENTRY_HEADER_BYTES + msgcodec.store_timestamp_position(sys_flag),
                                 8, unchecked=True)
        store_timestamp = int.from_bytes(raw, "big", signed=True) if raw else 0
        if store_timestamp != 0 and store_timestamp <= min_timestamp:
            return number
    return 0


def _note_queue(report, buffer, position: int, header) -> None:
    """The highest queue offset per queue among the walked records (the loader plans the rebuild
    of a missing consume queue from it, `RecoveryReport.scanned_queue_max`)."""
    result = record_check.check_message(buffer, position + ENTRY_HEADER_BYTES, check_crc=False,
                                        limit=position + header.size)
    if result.kind != record_check.CHECK_RECORD:
        return
    request = result.request
    if is_queued_transaction_type(request.sys_flag):
        key = (request.topic, request.queue_id)
        if request.consume_queue_offset >= report.scanned_queue_max.get(key, -1):
            report.scanned_queue_max[key] = request.consume_queue_offset


def _set_positions(queue, process_offset: int) -> None:
    for mapped in queue.files:
        if mapped.file_end_offset <= process_offset:
            mapped.set_positions(mapped.file_size_bytes)
        elif mapped.file_from_offset <= process_offset:
            mapped.set_positions(process_offset - mapped.file_from_offset)
        else:
            mapped.set_positions(0)
    queue.set_positions(process_offset)


def _dirty_bytes(mapped, process_offset: int) -> int:
    """Non-zero bytes' span after `process_offset` in its file (what a cut drops)."""
    if mapped is None:
        return 0
    position = process_offset - mapped.file_from_offset
    tail = np.frombuffer(mapped.buffer, dtype=np.uint8, offset=position,
                         count=mapped.file_size_bytes - position)
    nonzero = np.flatnonzero(tail)
    return int(nonzero[-1]) + 1 if len(nonzero) else 0
