"""Recovery of the commit log at open (spec §11), returning what it checked and what it cut.

Normal recovery (no `abort` file) verifies the newest segments and trusts older ones. Abnormal recovery
(the `abort` file is present: the last run did not shut down cleanly) picks a segment whose first record
is older than what the checkpoint says was durable, verifies everything from there, and has every valid
record dispatched again (consume queues and index ignore what they already hold). Both cut the log at
the first invalid record, and the consume queues at the same physical offset.

A read-only open computes the same end of log but changes nothing on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from store import kernel
from store.codec import message as msgcodec
from store.codec import record_check
from store.commitlog.commit_log import CommitLog, is_queued_transaction_type, queued_transaction_mask
from store.kernel.scan_groups import queue_groups
from store.mappedfile.mapped_file import MappedFile
from store.recovery.segment_reader import SegmentReader


@dataclass
class RecoveryStep:
    what: str
    detail: str


@dataclass
class RecoveryReport:
    """What recovery did, for the caller, the CLI and the dashboard's recovery lab."""

    mode: str                       # "normal" | "abnormal" | "read-only"
    start_file: str | None = None
    start_phy_offset: int = 0
    records_checked: int = 0
    bytes_checked: int = 0
    process_offset: int = 0          # end of the last valid record
    last_record_offset: int = 0      # start of the last valid record (5.x confirm offset)
    max_offset_before: int = 0       # end of the files (write position) before cutting
    truncated_bytes: int = 0         # bytes between process_offset and the first zero byte after it
    stop_reason: str = ""
    deleted_files: list[str] = field(default_factory=list)
    consume_queues_truncated: bool = False
    cq_max_phy_offset: int = -1
    dispatch_from: int = 0
    # Queues rebuilt from the log's first record because the open was asked to
    # (`rmqstore recover --rebuild-cq`; see store.recovery.loader._plan_dispatch).
    rebuilt_queues: list[tuple[str, int]] = field(default_factory=list)
    # Queues whose records appear in the verified part of the log but whose consume queue is
    # missing or shorter: like RocketMQ, only what dispatch_from re-dispatches comes back.
    incomplete_queues: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # (topic, queue_id) -> highest queue offset among the verified records. Not a field:
        # the report is serialized (CLI --json, dashboard), this is recovery's working state.
        self.scanned_queue_max: dict[tuple[str, int], int] = {}
    redispatched_records: int = 0
    redispatched_bytes: int = 0
    steps: list[RecoveryStep] = field(default_factory=list)

    def step(self, what: str, detail: str) -> None:
        self.steps.append(RecoveryStep(what, detail))


def _first_record_store_timestamp(mapped: MappedFile) -> tuple[int, int] | None:
    """(magic, store timestamp) of the first record of a segment, None if it cannot be read."""
    head = mapped.read(0, 40, unchecked=True)
    if head is None:
        return None
    magic = int.from_bytes(head[4:8], "big", signed=True)
    sys_flag = int.from_bytes(head[36:40], "big", signed=True)
    position = msgcodec.store_timestamp_position(sys_flag)
    raw = mapped.read(position, 8, unchecked=True)
    if raw is None:
        return None
    return magic, int.from_bytes(raw, "big", signed=True)


def choose_abnormal_start(files: list[MappedFile], *, min_timestamp: int,
                          max_phy_offset_in_cq: int | None = None) -> int:
    """Index of the segment abnormal recovery starts from (spec §11.3).

    RocksDB mode: RocketMQ 5.x starts at the last segment whose first record lies at or below
    the consume queue's max physical offset. We start at the earlier of that one and the one the
    checkpoint's timestamps give: RocksDB's WAL can survive a power cut that the commit log's
    unflushed pages did not, and a start from the queue's end alone would never see the lost
    bytes before it (the recovered log would keep a hole, and units pointing into it)."""
    by_time = _start_by_timestamp(files, min_timestamp)
    if max_phy_offset_in_cq is None:
        return by_time
    for index in range(len(files) - 1, -1, -1):
        head = files[index].read(0, 36, unchecked=True)
        magic = int.from_bytes(head[4:8], "big", signed=True)
        phy = int.from_bytes(head[28:36], "big", signed=True)
        if magic in (msgcodec.MESSAGE_MAGIC_V1, msgcodec.MESSAGE_MAGIC_V2) and \
                phy <= max_phy_offset_in_cq:
            return min(index, by_time)
    return 0


def _start_by_timestamp(files: list[MappedFile], min_timestamp: int) -> int:
    """The last segment whose first record is at or before `min_timestamp` (RocketMQ 4.9.7's
    `isMappedFileMatchedRecover`), else 0."""
    for index in range(len(files) - 1, -1, -1):
        mapped = files[index]
        first = _first_record_store_timestamp(mapped)
        if first is None:
            continue
        magic, store_timestamp = first
        if magic not in (msgcodec.MESSAGE_MAGIC_V1, msgcodec.MESSAGE_MAGIC_V2):
            continue
        if store_timestamp != 0 and store_timestamp <= min_timestamp:
            return index
    return 0


def choose_normal_start(files: list[MappedFile], *, style: str, cq_max_phy_offset: int) -> int:
    if style == "5.x":
        for index in range(len(files) - 1, -1, -1):
            if files[index].file_from_offset <= cq_max_phy_offset:
                return index
        return 0
    return max(0, len(files) - 3)


# Rows per kernel scan call: large enough that the per-call work (one numpy pass over the rows) is
# negligible, small enough (26 int64s a row: 1.7 MiB) to stay in cache.
SCAN_BATCH_ROWS = 8192
_SCHEDULE_TOPIC_BYTES = msgcodec.SCHEDULE_TOPIC.encode()
_C = kernel.COL
_POS, _SIZE, _QUEUE_ID, _QUEUE_OFFSET, _SYS_FLAG, _TOPIC_POS, _TOPIC_LEN = (
    _C["pos"], _C["size"], _C["queue_id"], _C["queue_offset"], _C["sys_flag"], _C["topic_pos"],
    _C["topic_len"])


WALK_ROWS, WALK_RECORD, WALK_BLANK, WALK_INVALID = "rows", "record", "blank", "invalid"


def walk_log(commit_log: CommitLog, start_phy_offset: int, *, check_crc: bool,
             whole_segments: bool = False, by_reads: bool = False):
    """Walk the log from `start_phy_offset` the way `CommitLog.scan` + `check_message` do record by
    record, in batches of `kernel.scan` rows (field checks and CRC in C). Yields:

    - (WALK_ROWS, where, rows): valid records (rows of kernel.SCAN_COLUMNS); `where` has the
      `buffer` the rows' positions are relative to and the log offset of its first byte
      (`file_from_offset`): the segment (a MappedFile) or, with `by_reads`, a `Window` of it. The
      rows and the window's buffer are reused: use them before the next step;
    - (WALK_RECORD, phy_offset, CheckResult): one valid record found by `check_message`;
    - (WALK_BLANK, phy_offset, mapped): a BLANK; the walk goes on with the next segment;
    - (WALK_INVALID, phy_offset, CheckResult): the first invalid record; the walk ends.

    It ends at the end of the segment files too. Reads stop at each segment's read position, or at
    its size with `whole_segments`. The kernel's rows are records `check_message` accepts, except
    that it leaves a SCHEDULE_TOPIC_XXXX record's DELAY unjudged: those rows go through
    `check_message`. Wherever the kernel stops short of a segment's end (a BLANK, an invalid or torn
    record, the read limit), `check_message` decides what is there, on the segment's map.

    `by_reads` (recovery's walk) reads the segments with pread into one buffer instead of through
    their maps (`store.recovery.segment_reader`): the same bytes, the same answers. The kernel runs
    on a window the way it runs on the segment, except where the window ends before the read limit:
    a record it stops at there is read again at the start of the next window, and one that does not
    fit in a whole window is checked on the map.
    """
    queue = commit_log.mapped_files
    out = kernel.scan_buffer(SCAN_BATCH_ROWS)
    reader = SegmentReader() if by_reads else None
    use_map = False          # the next step checks one record on the map (see above)
    phy_offset = start_phy_offset
    try:
        while True:
            mapped = queue.find_file(phy_offset)
            if mapped is None:
                return
            base = mapped.file_from_offset
            limit = mapped.file_size_bytes if whole_segments else mapped.read_position
            where = None if reader is None or use_map else \
                reader.read(mapped, phy_offset - base, limit)
            if where is None:
                where, buf_limit, rows_out, exact = mapped, limit, out[:1] if use_map else out, True
                use_map = False
            else:
                buf_limit, rows_out = len(where.buffer), out
                exact = phy_offset - base + buf_limit >= limit   # the window reaches the limit
            buf, buf_base = where.buffer, where.file_from_offset
            started = phy_offset - buf_base
            count, stop, kind, _ = kernel.scan(buf, started, buf_limit, check_crc, rows_out)
            if count:
                rows = rows_out[:count]
                rejected = _first_rejected_schedule_row(buf, rows, mapped, buf_base - base, limit,
                                                        check_crc)
                if rejected is not None:
                    index, result = rejected
                    if index:
                        yield WALK_ROWS, where, rows[:index]
                    yield WALK_INVALID, buf_base + int(rows[index, _POS]), result
                    return
                yield WALK_ROWS, where, rows
            phy_offset = buf_base + stop
            if kind == kernel.STOP_FULL or (
                    kind == kernel.STOP_END and phy_offset - base >= mapped.file_size_bytes):
                continue      # more rows to read, or the next segment (a record ended the file exactly)
            if not exact and kind != kernel.STOP_BLANK:
                # The window ended before the read limit: read on from where the kernel stopped.
                use_map = kind != kernel.STOP_END and stop == started
                continue
            result = record_check.check_message(mapped.buffer, phy_offset - base,
                                                check_crc=check_crc, limit=limit)
            if result.kind == record_check.CHECK_RECORD:    # not expected: the kernel stopped short
                yield WALK_RECORD, phy_offset, result
                phy_offset += result.size
            elif result.kind == record_check.CHECK_BLANK:
                yield WALK_BLANK, phy_offset, mapped
                phy_offset = mapped.file_end_offset
            else:
                yield WALK_INVALID, phy_offset, result
                return
    finally:
        if reader is not None:
            reader.close()


def rows_end(where, rows: np.ndarray) -> int:
    """The log offset just past the last record of `rows` (rows of `where`, see `walk_log`)."""
    return where.file_from_offset + int(rows[-1, _POS]) + int(rows[-1, _SIZE])


def scan_valid_end(commit_log: CommitLog, start_index: int, *, check_crc: bool,
                   report: RecoveryReport) -> int:
    """Walk records from the start of files[start_index]; return the end of the last valid one."""
    files = commit_log.mapped_files.files
    start = files[start_index].file_from_offset
    process_offset = start
    last_file_start = files[-1].file_from_offset
    for step, where, what in walk_log(commit_log, start, check_crc=check_crc, by_reads=True):
        if step == WALK_ROWS:
            _note_rows(report, where.buffer, what, where.file_from_offset)
            process_offset = rows_end(where, what)
        elif step == WALK_RECORD:
            _note_record(report, where, what)
            process_offset = where + what.size
        elif step == WALK_BLANK:
            if where >= last_file_start:
                process_offset = where
                report.stop_reason = f"BLANK record in the last segment at {where}"
                break
            process_offset = commit_log.next_file_start(where)
        else:
            process_offset = where
            report.stop_reason = _describe_invalid(commit_log, where, what)
            break
    else:
        report.stop_reason = report.stop_reason or "end of the segment files"
    report.bytes_checked = process_offset - start
    return process_offset


def _first_rejected_schedule_row(buf, rows, mapped: MappedFile, shift: int, limit: int,
                                 check_crc: bool):
    """(row index, CheckResult) of the first SCHEDULE_TOPIC_XXXX row `check_message` rejects (a
    DELAY Java cannot parse), None if there is none. `buf` holds the rows' bytes, `buf[0]` being
    the segment's byte `shift`; `check_message` reads the record on the segment's map."""
    candidates = np.flatnonzero(rows[:, _TOPIC_LEN] == len(_SCHEDULE_TOPIC_BYTES))
    for index in candidates.tolist():
        topic_pos = int(rows[index, _TOPIC_POS])
        if buf[topic_pos:topic_pos + len(_SCHEDULE_TOPIC_BYTES)] != _SCHEDULE_TOPIC_BYTES:
            continue
        result = record_check.check_message(mapped.buffer, shift + int(rows[index, _POS]),
                                            check_crc=check_crc, limit=limit)
        if result.kind != record_check.CHECK_RECORD:
            return index, result
    return None


def _note_record(report: RecoveryReport, phy_offset: int, result) -> None:
    """One valid record found by `check_message`: count it and note its queue offset."""
    report.last_record_offset = phy_offset
    report.records_checked += 1
    request = result.request
    if is_queued_transaction_type(request.sys_flag):   # NOT / COMMIT: has a CQ unit
        key = (request.topic, request.queue_id)
        if request.consume_queue_offset >= report.scanned_queue_max.get(key, -1):
            report.scanned_queue_max[key] = request.consume_queue_offset


def _note_rows(report: RecoveryReport, buf, rows: np.ndarray, base: int) -> None:
    """Valid records found by the kernel: count them and note the highest queue offset of every
    (topic, queue id) among the NOT / COMMIT ones (those with a consume-queue unit)."""
    report.records_checked += len(rows)
    report.last_record_offset = base + int(rows[-1, _POS])
    queued = rows[queued_transaction_mask(rows[:, _SYS_FLAG])]
    if not len(queued):
        return
    seen = report.scanned_queue_max
    keys, inverse = queue_groups(buf, queued)
    best = np.full(len(keys), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(best, inverse, queued[:, _QUEUE_OFFSET])
    for key, queue_offset in zip(keys, best.tolist()):
        if queue_offset >= seen.get(key, -1):
            seen[key] = queue_offset


def _describe_invalid(commit_log: CommitLog, phy_offset: int, result) -> str:
    head = commit_log.mapped_files.find_file(phy_offset)
    if head is None:
        return f"no segment holds {phy_offset}"
    raw = head.read(phy_offset - head.file_from_offset, 8, unchecked=True) or b""
    if raw[:8] == bytes(8) or len(raw) < 8:
        return f"zeros at {phy_offset}: end of the written data"
    reason = getattr(result, "reason", "") or "invalid record"
    return f"invalid record at {phy_offset}: {reason}"


def find_queues_to_rebuild(report: RecoveryReport, consume_queues) -> list[tuple[str, int]]:
    """Queues that the verified records say must hold a unit their consume queue lacks."""
    missing = []
    for (topic, queue_id), max_queue_offset in report.scanned_queue_max.items():
        if consume_queues.get_max_offset(topic, queue_id) <= max_queue_offset:
            missing.append((topic, queue_id))
    return sorted(missing)


def measure_dirty_tail(commit_log: CommitLog, process_offset: int) -> int:
    """Bytes of non-zero data between `process_offset` and the end of its segment (a torn tail)."""
    mapped = commit_log.mapped_files.find_file(process_offset)
    if mapped is None:
        return 0
    position = process_offset - mapped.file_from_offset
    view = mapped.buffer
    end = mapped.file_size_bytes
    chunk = 1 << 16
    last_nonzero = position
    cursor = position
    zero_run = 0
    while cursor < end and zero_run < (1 << 20):
        block = view[cursor:min(cursor + chunk, end)]
        stripped = block.rstrip(b"\x00")
        if stripped:
            last_nonzero = cursor + len(stripped)
            zero_run = len(block) - len(stripped)
        else:
            zero_run += len(block)
        cursor += len(block)
    return last_nonzero - position


def recover_commit_log(commit_log: CommitLog, *, abnormal: bool, read_only: bool, style: str,
                       check_crc: bool, cq_max_phy_offset: int, min_timestamp: int,
                       rocksdb_mode: bool = False) -> RecoveryReport:
    """Find the end of the valid log and cut what lies beyond (not in read-only mode).

    Returns the report; `report.dispatch_from` is where re-dispatch must start.
    """
    mode = "read-only" if read_only else ("abnormal" if abnormal else "normal")
    report = RecoveryReport(mode=mode, cq_max_phy_offset=cq_max_phy_offset)
    queue = commit_log.mapped_files
    files = queue.files
    report.max_offset_before = queue.max_wrote_offset()
    if not files:
        report.step("commit log", "no segment files: empty store")
        queue.set_positions(0)
        report.dispatch_from = 0
        return report
    if abnormal:
        start_index = choose_abnormal_start(
            files, min_timestamp=min_timestamp,
            max_phy_offset_in_cq=cq_max_phy_offset if rocksdb_mode else None)
        report.step("choose start", f"abnormal shutdown: first segment whose first record is older than "
                                    f"the checkpoint ({min_timestamp} ms) is {files[start_index].path}")
    else:
        start_index = choose_normal_start(files, style=style, cq_max_phy_offset=cq_max_phy_offset)
        report.step("choose start", f"normal recovery verifies from {files[start_index].path}")
    report.start_file = files[start_index].path
    report.start_phy_offset = files[start_index].file_from_offset
    process_offset = scan_valid_end(commit_log, start_index, check_crc=check_crc, report=report)
    report.process_offset = process_offset
    report.step("scan", f"{report.records_checked} records ({report.bytes_checked} bytes) valid; "
                        f"stopped: {report.stop_reason}")
    report.truncated_bytes = measure_dirty_tail(commit_log, process_offset)
    deleted = [f.path for f in files if f.file_from_offset > process_offset]
    report.deleted_files = deleted
    if read_only:
        _set_read_only_positions(commit_log, process_offset)
    else:
        queue.truncate_dirty_files(process_offset)
        queue.set_positions(process_offset)
        if report.truncated_bytes or deleted:
            report.step("truncate", f"cut the commit log at {process_offset}: "
                                    f"{report.truncated_bytes} dirty bytes, files deleted: {deleted or 'none'}")
    # RocketMQ calls truncateDirtyLogicFiles when the queues' max phy end is >= processOffset; at
    # equality it cuts nothing (every unit ends at or before the log's end), so only a larger end
    # means the queues are really cut (and the report says so).
    report.consume_queues_truncated = cq_max_phy_offset > process_offset
    report.dispatch_from = report.start_phy_offset if abnormal else \
        max(commit_log.min_offset(), min(max(cq_max_phy_offset, 0), process_offset))
    return report


def _set_read_only_positions(commit_log: CommitLog, process_offset: int) -> None:
    for mapped in commit_log.mapped_files.files:
        if mapped.file_end_offset <= process_offset:
            mapped.set_positions(mapped.file_size_bytes)
        elif mapped.file_from_offset <= process_offset:
            mapped.set_positions(process_offset - mapped.file_from_offset)
        else:
            mapped.set_positions(0)
    commit_log.mapped_files.set_positions(process_offset)
