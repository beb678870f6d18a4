"""Consume-queue part of the store cross-check (spec §4): every unit against the commit log.

File-based queues are read straight from `consumequeue/<topic>/<queueId>/` (not through the engine,
whose recovery would silently end a queue at a zeroed unit and hide what follows). RocksDB queues are
read through the store's consume-queue API, so they need an opened store.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from store.check.commitlog import LogScan
from store.check.log_view import CommitLogView, data_regions
from store.check.fast_units import EXT_ADDRESS_MAX, clean_units, run_clean
from store.check.findings import Sink
from store.codec import record_check
from store.codec.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PREFILL_SIZE
from store.codec.topic import validate_topic
from store.consumequeue.lmq import PROPERTY_INNER_MULTI_DISPATCH, lmq_requests
from store.errors import InvalidTopicError
from store.mappedfile.mapped_file import parse_file_name

UNITS_PER_API_READ = 1024
PROPERTY_INNER_NUM = "INNER_NUM"       # MessageConst


def _queue_id(name: str) -> int | None:
    body = name[1:] if name[:1] in "+-" else name
    if not body.isdigit() or len(body) > 10:
        return None
    value = int(name)
    return value if -(1 << 31) <= value < (1 << 31) else None


class UnitChecker:
    """Checks units of one queue in order; shared by the file and the RocksDB paths."""

    def __init__(self, view: CommitLogView, scan: LogScan, sink: Sink, *, unclean: bool,
                 budget: list[int]):
        self.view, self.scan, self.sink = view, scan, sink
        self.unclean = unclean
        self.budget = budget              # [units left]; shared by every queue
        self.beyond_end = 0

    def check(self, topic: str, queue_id: int, path: str | None, first_queue_offset: int,
              units: np.ndarray, previous_phy: int, position_of) -> int:
        """Check consecutive units starting at `first_queue_offset`; return the last phy_offset.
        Units that match the walk's columns exactly are passed in bulk (store.check.fast_units);
        the others one by one, in order."""
        phy = units["phy_offset"].astype(np.int64)
        size = units["size"].astype(np.int64)
        tags = units["tags_code"].astype(np.int64)
        matchable = path is None or os.path.basename(os.path.dirname(path)) == str(queue_id)
        clean = clean_units(self.scan, (topic, queue_id), first_queue_offset, units, previous_phy,
                            matchable)

        def one(index: int, previous: int) -> int:
            return self._check_unit(topic, queue_id, path, first_queue_offset + index,
                                    int(phy[index]), int(size[index]), int(tags[index]),
                                    position_of(index), previous)

        return run_clean(one, clean, self.budget, self.sink, previous_phy, phy,
                         (size == PREFILL_SIZE) & (phy == 0))

    def _check_unit(self, topic, queue_id, path, queue_offset, phy_offset, size, tags_code, where,
                    previous_phy) -> int:
        sink, scan = self.sink, self.scan
        self.budget[0] -= 1
        if size == PREFILL_SIZE and phy_offset == 0:
            return previous_phy
        if phy_offset <= previous_phy:
            sink.add("error", "consumequeue", path, where,
                     f"{topic}/{queue_id} unit {queue_offset} points at {phy_offset}, not after "
                     f"the previous unit's {previous_phy}")
        previous_phy = phy_offset
        if phy_offset < scan.min_offset:
            return previous_phy       # expired: the commit log file is gone, the CQ not yet
        if phy_offset >= scan.end_offset and not scan.capped:
            self.beyond_end += 1
            sink.add_limited(f"{topic}/{queue_id} units beyond the log end", "warning" if self.unclean else "error", "consumequeue", path, where,
                     f"{topic}/{queue_id} unit {queue_offset} points at {phy_offset}, beyond the "
                     f"end of the log ({scan.end_offset}); recovery cuts the queue there")
            return previous_phy
        self._check_target(topic, queue_id, path, where, queue_offset, phy_offset, size,
                           tags_code)
        return previous_phy

    def _in_blank_filler(self, phy_offset: int, result) -> bool:
        """Whether `phy_offset` lies in a segment's closing BLANK filler: at its start, or after the
        last record the walk found in that segment, where a BLANK stands."""
        if result.kind == record_check.CHECK_BLANK:
            return True
        starts = self.scan.starts_near(phy_offset)
        index = int(np.searchsorted(starts, phy_offset, side="right")) - 1
        if index < 0:
            return False
        previous = int(starts[index])
        segment = self.view.find(previous)
        if segment is None or segment is not self.view.find(phy_offset):
            return False
        before = self.view.check_at(previous)
        end = previous + (before.size if before.kind == record_check.CHECK_RECORD else 0)
        return end <= phy_offset and self.view.check_at(end).kind == record_check.CHECK_BLANK

    def _check_target(self, topic, queue_id, path, where, queue_offset, phy_offset, size,
                      tags_code) -> None:
        sink = self.sink
        label = f"{topic}/{queue_id} unit {queue_offset} (phy {phy_offset})"
        if self.view.find(phy_offset) is None:
            sink.add_limited(f"{topic}/{queue_id} units into missing log data", "error",
                             "consumequeue", path, where,
                             f"{label} points into a part of the commit log no segment holds "
                             f"(a truncated or deleted segment)")
            return
        start = self.scan.is_record_start(phy_offset)
        result = self.view.check_at(phy_offset)
        if start is not True and self._in_blank_filler(phy_offset, result):
            # A BLANK filler where the unit's record was: `recover --pad-truncated` closes a cut
            # segment with a filler over the records the cut destroyed. The message is gone for
            # good; the unit stays (renumbering the queue would shift every later offset).
            sink.add_limited(f"{topic}/{queue_id} units of lost messages", "warning",
                             "consumequeue", path, where,
                             f"{label}: the message is lost, a BLANK filler stands where its record "
                             f"was (a truncated segment, padded); pulls skip this unit",
                             on_restart="the unit stays; a pull skips it and serves its neighbours",
                             repair=None)
            return
        if start is False or result.kind != record_check.CHECK_RECORD or \
                result.request.commit_log_offset != phy_offset:
            sink.add_limited(f"{topic}/{queue_id} units not at record starts", "error",
                             "consumequeue", path, where,
                             f"{label} does not point at the start of a record")
            return
        request = result.request
        problems = []
        if size != result.size:
            problems.append(f"size {size} but the record is {result.size} bytes")
        # An LMQ unit: the record lists this queue and offset (store/consumequeue/lmq.py).
        lmq = (request.topic != topic or request.queue_id != queue_id) and \
            _multi_dispatched_to(request, topic, queue_id, queue_offset)
        if not lmq and (request.topic != topic or request.queue_id != queue_id):
            problems.append(f"the record belongs to {request.topic}/{request.queue_id}")
        if not lmq and request.consume_queue_offset != queue_offset:
            problems.append(f"the record's QUEUEOFFSET is {request.consume_queue_offset}")
        if tags_code != request.tags_code and tags_code > EXT_ADDRESS_MAX:
            problems.append(f"tagsCode {tags_code} but the record's tags give {request.tags_code}")
        if problems:
            sink.add_limited(f"{topic}/{queue_id} units not matching their record", "error",
                             "consumequeue", path, where, f"{label}: " + "; ".join(problems))


def _multi_dispatched_to(request, topic: str, queue_id: int, queue_offset: int) -> bool:
    """Whether the record's INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET give it a unit at
    `queue_offset` of (topic, queue_id) (with or without enableLmq's queue id 0)."""
    properties = request.properties
    if not properties or PROPERTY_INNER_MULTI_DISPATCH not in properties:
        return False
    return any((extra.topic, extra.queue_id, extra.consume_queue_offset) ==
               (topic, queue_id, queue_offset)
               for enable_lmq in (True, False)
               for extra in lmq_requests(request, properties, enable_lmq=enable_lmq))


def check_file_queues(root_dir: str, cq_file_size_bytes: int, view: CommitLogView, scan: LogScan,
                      sink: Sink, *, unclean: bool, max_units: int | None, progress=None) -> dict:
    """Check every file-based queue; return (topic, queue_id) -> queue end (next queue offset)."""
    directory = os.path.join(root_dir, "consumequeue")
    ends: dict = {}
    if not os.path.isdir(directory):
        return ends
    budget = [max_units if max_units is not None else 1 << 62]
    checker = UnitChecker(view, scan, sink, unclean=unclean, budget=budget)
    topics = sorted(os.listdir(directory))
    for topic_number, topic in enumerate(topics):
        topic_dir = os.path.join(directory, topic)
        if progress is not None and topic_number:
            progress("consumequeue", topic_number, len(topics))
        if not os.path.isdir(topic_dir):
            sink.add("warning", "files", topic_dir, None, "a file where a topic directory belongs")
            continue
        for name in sorted(os.listdir(topic_dir)):
            queue_dir = os.path.join(topic_dir, name)
            queue_id = _queue_id(name)
            if queue_id is None or not os.path.isdir(queue_dir):
                sink.add("warning", "files", queue_dir, None,
                         "not a queue directory (name is not an int): ignored by the store")
                continue
            if sink.full:
                return ends
            ends[(topic, queue_id)] = _check_queue_dir(topic, queue_id, queue_dir, cq_file_size_bytes,
                                                       checker, sink)
            sink.summarize()
    if budget[0] <= 0:
        sink.add("info", "consumequeue", None, None,
                 f"max_records={max_units} cut the consume-queue check short")
    if progress is not None:
        progress("consumequeue", len(topics), len(topics))
    return ends


def _segment_files(queue_dir: str, file_size: int, sink: Sink) -> list[tuple[str, int, bytes]]:
    files = []
    for name in sorted(os.listdir(queue_dir)):
        path = os.path.join(queue_dir, name)
        start = parse_file_name(name)
        if start is None and name.endswith(".creating"):
            sink.add("info", "files", path, None, "leftover of an interrupted CQ file creation")
            continue
        if start is None or not os.path.isfile(path):
            sink.add("warning", "files", path, None, "not a 20-digit CQ segment name: ignored")
            continue
        data = _map(path)
        if len(data) != file_size:
            sink.add("error", "consumequeue", path, len(data),
                     f"CQ file is {len(data)} bytes, expected {file_size} (mappedFileSizeConsumeQueue)")
        if start % CQ_UNIT_SIZE or start % file_size:
            sink.add("error", "consumequeue", path, None,
                     f"start offset {start} is not a multiple of the CQ file size {file_size}")
        files.append((path, start, data))
    for (_, previous, _), (path, start, _) in zip(files, files[1:]):
        if start != previous + file_size:
            sink.add("error", "consumequeue", path, None,
                     f"gap in the CQ files: expected a file starting at {previous + file_size}")
    return files


def _check_queue_dir(topic, queue_id, queue_dir, file_size, checker: UnitChecker, sink: Sink) -> int:
    files = _segment_files(queue_dir, file_size, sink)
    arrays = [np.frombuffer(data, dtype=CQ_UNIT_DTYPE, count=len(data) // CQ_UNIT_SIZE)
              for _, _, data in files]
    # The queue ends after its last written (non-zero) unit; every unit before that must be valid.
    end_file, end_index = -1, 0
    for number in range(len(arrays) - 1, -1, -1):
        units = arrays[number][:_data_units(files[number][0], len(arrays[number]))]
        written = np.nonzero((units["phy_offset"] != 0) | (units["size"] != 0) |
                             (units["tags_code"] != 0))[0]
        if len(written):
            end_file, end_index = number, int(written[-1]) + 1
            break
    if end_file < 0:
        return 0
    previous_phy = -1
    for number in range(end_file + 1):
        path, start, _ = files[number]
        units = arrays[number] if number < end_file else arrays[number][:end_index]
        first_queue_offset = start // CQ_UNIT_SIZE
        invalid = np.nonzero((units["phy_offset"] < 0) | (units["size"] <= 0))[0]
        if len(invalid):
            first_bad = int(invalid[0])
            sink.add("error", "consumequeue", path, first_bad * CQ_UNIT_SIZE,
                     f"{topic}/{queue_id} unit {first_queue_offset + first_bad} is invalid "
                     f"(phy {int(units['phy_offset'][first_bad])}, size "
                     f"{int(units['size'][first_bad])}) with {len(invalid)} invalid units in this "
                     f"file but valid ones after it: recovery ends the queue there and hides the rest")
            units = np.delete(units, invalid)
            kept = np.delete(np.arange(len(arrays[number]) if number < end_file else end_index),
                             invalid)
        else:
            kept = None
        prefill = np.nonzero((units["size"] == PREFILL_SIZE) & (units["phy_offset"] == 0))[0]
        if len(prefill) and (number != 0 or int(prefill[-1]) + 1 != len(prefill)):
            sink.add("error", "consumequeue", path, None,
                     f"{topic}/{queue_id} has pre-fill units after real ones")

        def position_of(index, kept=kept):
            return int(kept[index] if kept is not None else index) * CQ_UNIT_SIZE

        if kept is None:
            previous_phy = checker.check(topic, queue_id, path, first_queue_offset, units,
                                         previous_phy, position_of)
        else:                         # queue offsets are no longer consecutive: one unit at a time
            for index in range(len(units)):
                previous_phy = checker.check(topic, queue_id, path,
                                             first_queue_offset + int(kept[index]),
                                             units[index:index + 1], previous_phy,
                                             lambda _i, p=int(kept[index]): p * CQ_UNIT_SIZE)
    return files[end_file][1] // CQ_UNIT_SIZE + end_index


def _batch_gap_end(view: CommitLogView, units, queue_offset: int) -> int | None:
    """[5.x] A batch topic on RocksDB: its record of INNER_NUM n at key q has the next one at
    q + n (`CommitLog.getMessageNum`; store.consumequeue.batch.put), so keys q+1..q+n-1 are absent
    by design. The key after the gap that starts at `queue_offset` (the last unit read ends just
    before it), None when the last record explains no gap (then the gap is damage)."""
    if units is None or not len(units):
        return None
    result = view.check_at(int(units["phy_offset"][-1]))
    request = result.request if result.kind == record_check.CHECK_RECORD else None
    if request is None or request.properties is None:
        return None
    try:
        count = int(request.properties.get(PROPERTY_INNER_NUM, "1"))
    except ValueError:
        return None
    end = queue_offset - 1 + count
    return end if end > queue_offset else None


def check_api_queues(consume_queues, view: CommitLogView, scan: LogScan, sink: Sink, *,
                     unclean: bool, max_units: int | None, is_batch_topic=None) -> dict:
    """RocksDB (or any backend): walk every queue through the ConsumeQueueStore protocol.
    `is_batch_topic(topic)`: [5.x] batch topics, whose keys have gaps (`_batch_gap_end`)."""
    ends: dict = {}
    budget = [max_units if max_units is not None else 1 << 62]
    checker = UnitChecker(view, scan, sink, unclean=unclean, budget=budget)
    for topic, queue_id in sorted(consume_queues.queues()):
        low = consume_queues.get_min_offset(topic, queue_id)
        high = consume_queues.get_max_offset(topic, queue_id)
        ends[(topic, queue_id)] = high
        previous_phy = -1
        queue_offset = low
        batch = is_batch_topic is not None and is_batch_topic(topic)
        units = None
        while queue_offset < high and budget[0] > 0 and not sink.full:
            last_units = units
            units = consume_queues.get_units(topic, queue_id, queue_offset,
                                             min(UNITS_PER_API_READ, high - queue_offset))
            if (units is None or len(units) == 0) and batch:
                gap_end = _batch_gap_end(view, last_units, queue_offset)
                if gap_end is not None:
                    queue_offset = gap_end
                    continue
            if units is None or len(units) == 0:
                sink.add("error", "consumequeue", None, None,
                         f"{topic}/{queue_id}: no units readable at queue offset {queue_offset} "
                         f"(min {low}, max {high})")
                break
            units = np.asarray(units)
            previous_phy = checker.check(topic, queue_id, None, queue_offset, units, previous_phy,
                                         lambda _i: None)
            queue_offset += len(units)
        sink.summarize()
    if budget[0] <= 0:
        sink.add("info", "consumequeue", None, None,
                 f"max_records={max_units} cut the consume-queue check short")
    return ends


def lmq_queue_spans(scan: LogScan, *, enable_lmq: bool) -> tuple[dict, dict]:
    """The multi-dispatch queues the scanned records list (enableMultiDispatch), as
    `(ends, starts)` like `LogScan.queue_ends` / `queue_starts`: what `multiDispatchLmqQueue`
    gives each such queue (store.consumequeue.lmq.lmq_requests; names that are no legal topic get
    no unit, as in dispatch)."""
    ends: dict = {}
    starts: dict = {}
    for request in scan.multi_dispatch:
        for extra in lmq_requests(request, request.properties, enable_lmq=enable_lmq):
            key = (extra.topic, extra.queue_id)
            if key not in ends:
                try:
                    validate_topic(extra.topic, allow_v2=True)
                except InvalidTopicError:
                    continue
            ends[key] = max(ends.get(key, 0), extra.consume_queue_offset + 1)
            starts[key] = min(starts.get(key, 1 << 62), extra.consume_queue_offset)
    return ends, starts


def check_dispatch_coverage(scan: LogScan, ends: dict, sink: Sink, *, unclean: bool = False,
                            queue_dir: str | None = None, lmq: tuple[dict, dict] | None = None
                            ) -> None:
    """Records in the log that their consume queue does not reach yet (dispatch behind), and
    records before a queue's first unit (its directory deleted, then restored by a restart).

    RocketMQ never gives those units back: after a clean shutdown 4.9.7's reput starts after the
    end of the queues that exist (`DefaultMessageStore.start`), 5.3.3's `CommitLog.recoverNormally`
    dispatches only records past `maxPhyOffsetOfConsumeQueue`; after a crash `recoverAbnormally`
    re-dispatches from the checkpoint's segment only. A queue restored that way starts at its
    first re-dispatched record (`ConsumeQueue.fillPreBlank` units before it). An error after a
    clean shutdown; a warning after a crash (the restart may bring some of them back).

    `lmq`: `lmq_queue_spans` (enableMultiDispatch): the LMQ queues the records list are held to
    the same rules (their units come from the same dispatch, and go the same way)."""
    log_ends, log_starts = dict(scan.queue_ends), dict(scan.queue_starts)
    for key, end in (lmq[0] if lmq else {}).items():
        log_ends[key] = max(log_ends.get(key, 0), end)
        log_starts[key] = min(log_starts.get(key, 1 << 62), lmq[1][key])
    for (topic, queue_id), log_end in sorted(log_ends.items()):
        cq_end = ends.get((topic, queue_id))
        log_start = min(log_starts.get((topic, queue_id), 0), log_end - 1)
        path = os.path.join(queue_dir, topic, str(queue_id)) if queue_dir else None
        if cq_end is None and path and os.path.isdir(os.path.join(
                os.path.dirname(queue_dir), "batchconsumequeue", topic, str(queue_id))):
            continue                # a batch topic's records have batch units (store.check.batch)
        first_unit = _first_real_unit(path, cq_end) if cq_end is not None and path else None
        if cq_end is None or (first_unit is not None and first_unit > log_start):
            last_missing = log_end - 1 if cq_end is None else first_unit - 1
            where = "it has no consume queue" if cq_end is None else \
                f"its consume queue starts at unit {first_unit}"
            sink.add("warning" if unclean else "error", "consumequeue", path, None,
                     f"units {log_start}..{last_missing} of {topic}/{queue_id} are missing although "
                     f"the commit log still holds them ({where}): consumers never see those "
                     f"messages",
                     on_restart="RocketMQ never restores them: a restart dispatches only from its "
                                "recovery start (after a clean shutdown the end of the other "
                                "queues, after a crash the checkpoint's segment)",
                     repair=f"rmqstore recover --rebuild-cq {topic}/{queue_id} --store {{store}}")
        if cq_end is not None and cq_end < log_end:
            sink.add("warning", "consumequeue", None, None,
                     f"{topic}/{queue_id}: the commit log holds queue offsets up to {log_end - 1} but "
                     f"the consume queue ends at {cq_end} (dispatch behind; a writable open "
                     f"re-dispatches)")


def _first_real_unit(queue_path: str, cq_end: int) -> int | None:
    """The queue offset of the first unit of `queue_path` that is not a pre-fill unit (phy 0,
    size Integer.MAX_VALUE, `ConsumeQueue.fillPreBlank`); None if it cannot be read."""
    try:
        names = sorted(n for n in os.listdir(queue_path) if parse_file_name(n) is not None)
    except OSError:
        return None
    for name in names[:1]:
        try:                # pread: a fault on a map reads ahead into the file's sparse tail
            with open(os.path.join(queue_path, name), "rb", buffering=0) as handle:
                first = total = os.fstat(handle.fileno()).st_size // CQ_UNIT_SIZE
                for chunk in range(0, total, _FIRST_UNIT_CHUNK):   # pre-fill units are few
                    part = np.frombuffer(os.pread(handle.fileno(), CQ_UNIT_SIZE * min(
                        _FIRST_UNIT_CHUNK, total - chunk), chunk * CQ_UNIT_SIZE), CQ_UNIT_DTYPE)
                    real = np.flatnonzero((part["phy_offset"] != 0) |
                                          (part["size"] != PREFILL_SIZE))
                    if len(real):
                        first = chunk + int(real[0])
                        break
        except OSError:
            return None
        return parse_file_name(name) // CQ_UNIT_SIZE + first
    return cq_end


_FIRST_UNIT_CHUNK = 4096


def _map(path: str):
    """The file's bytes, mapped read-only (b"" when empty): only the pages read are read."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        return mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) if size else b""


def _data_units(path: str, units: int) -> int:
    """How many leading units of the CQ file may hold data: after the last data region of a
    sparse file there are only holes (zeros), which need no reading."""
    regions = data_regions(path, 0, units * CQ_UNIT_SIZE)
    if not regions:
        return 0
    return min(units, -(-regions[-1][1] // CQ_UNIT_SIZE))
