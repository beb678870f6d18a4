"""`get_message`: the pull path and its status table (spec §10.1, 4.9.7 rules; §10.2 size cap).

Statuses, checked in this order: no such queue -> NO_MATCHED_LOGIC_QUEUE; max 0 -> NO_MESSAGE_IN_QUEUE;
below min -> OFFSET_TOO_SMALL; equal to max -> OFFSET_OVERFLOW_ONE; above max ->
OFFSET_OVERFLOW_BADLY; CQ file gone -> OFFSET_FOUND_NULL; else a scan that gives FOUND,
NO_MATCHED_MESSAGE or MESSAGE_WAS_REMOVING. A scan never crosses a consume-queue file and looks at no
more than max(16000, max_msg_nums x 20) bytes of units.

How it is fast (one pull of 32 costs a few dozen Python operations, not a few per message): the
queue's min, max and window of units come in one call (`pull_window`, file queues), as bytes; the
scan is planned on the whole window at once (store/commitlog/read_plan.py: `_plan_unfiltered` on tuples for the common
unfiltered pull, `_plan_window` with numpy for tag filters; a filtered pull reads 4 x max_msg_nums
+ 1 units first and the rest of the window only if the scan goes past them); the records are
sliced from one segment in one list comprehension (`_slice_records`). With the compiled kernel,
the common unfiltered pull does all of that in one C call (`_pull_native`: plan, slice as bytes,
memoryviews or decoded MessageRecords, record check), which answers only when it is sure to give
this Python path's answer (tests/test_kernel_pull.py); decoded records are built in one C call per
batch either way (`decode_messages`). Whenever a shortcut cannot
prove it gives RocketMQ's answer (units on both sides of the in-memory line, a byte limit that may
fire, records in several segments or expired), the general numpy plan or the unit-by-unit loop
decides; tests/test_read_path.py checks all of them against that loop.

The last line against a wrong message (store/commitlog/record_match.py): a unit whose record
is not the one it names is never served; units this process's dispatch wrote at their
record's own queue offset are trusted (the file queue's `trusted_from`), others are checked
(`_carries`; in C with the planning and slicing, `pull_unfiltered`), and when that fails the
unit-by-unit loop reads the window again checking each record in full (`_wrong_record`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from store.api import GetMessageResult, GetMessageStatus
from store.codec.cq_unit import CQ_UNIT_DTYPE
from store.codec.javahash import java_string_hash
from store.codec.message import decode_messages
from store.commitlog.record_match import _carries, _wrong_record
from store.kernel.pull import pull_unfiltered
# pull_unfiltered_fast: re-exported for the facade
from store.commitlog.read_fast import SMALL_WINDOW_UNITS, _pull_native, pull_unfiltered_fast  # noqa: F401
from store.commitlog.read_plan import (
    TransferLimits, _is_batch_full, _plan_scan, _plan_unfiltered, _plan_window, _unit_struct,
)

CQ_UNIT_SIZE = 20
FILTER_WINDOW_BYTES_MIN = 16000
PROBE_FACTOR = 4            # a filtered pull first reads 4 x max_msg_nums + 1 units
_FILTERS: dict = {}   # expression -> TagFilter (parsed once; instances are immutable)


def total_physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


@dataclass(frozen=True)
class TagFilter:
    """A subscription expression: "*" (everything) or "TagA || TagB" (by tag hash, as the broker)."""

    expression: str
    hash_codes: frozenset[int] | None   # None = accept all

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        cached = _FILTERS.get(expression)
        if cached is not None and type(cached) is cls:
            return cached
        parsed = cls._parse(expression)
        if len(_FILTERS) >= 1024:   # a consumer normally keeps its expression: keep the cache small
            _FILTERS.clear()
        _FILTERS[expression] = parsed
        return parsed

    @classmethod
    def _parse(cls, expression: str | None) -> TagFilter:
        text = (expression or "*").strip()
        if text in ("", "*"):
            return cls("*", None)
        tags = [t.strip() for t in text.split("||") if t.strip()]
        return cls(text, frozenset(java_string_hash(t) for t in tags))

    def accepts(self, tags_code: int) -> bool:
        if self.hash_codes is None:
            return True
        as_int = ((tags_code + 2**31) % 2**32) - 2**31   # Java's (int) cast
        return as_int in self.hash_codes


def get_message(commit_log, consume_queues, topic: str, queue_id: int, queue_offset: int,
                max_msg_nums: int, *, tag_filter: TagFilter, limits: TransferLimits,
                known_queue, units_per_cq_file: int, max_total_msg_size: int | None = None,
                decode: bool | str = True) -> GetMessageResult:
    """Pull up to `max_msg_nums` messages of one queue from `queue_offset` (see module docstring).

    `decode`: True gives MessageRecords, False raw record bytes, "view" zero-copy memoryviews of
    the mapped segments (valid until the segment expires; for bulk readers).
    `known_queue`: a bool, or a callable (topic, queue_id) -> bool asked only when the queue has
    no units (a queue with units is always known).
    """
    # Over 60 lines on purpose: every pull runs this; helpers for the hot steps cost 1-3% a pull.
    if max_msg_nums <= 0:
        raise ValueError("max_msg_nums must be positive")
    hash_codes = tag_filter.hash_codes
    window_units = full_units = max(FILTER_WINDOW_BYTES_MIN, max_msg_nums * CQ_UNIT_SIZE) // CQ_UNIT_SIZE
    if hash_codes is None and window_units > max_msg_nums:
        # Without a filter a scan of readable units stops at the unit after max_msg_nums: fetch
        # no more at first (past unreadable units, the sequential loop reads the full window).
        window_units = max_msg_nums + 1
    probe_units = window_units
    if hash_codes is not None and PROBE_FACTOR * max_msg_nums + 1 < window_units:
        # Filters mostly match often enough: read the first units, the rest only if needed.
        probe_units = PROBE_FACTOR * max_msg_nums + 1
    pull_window = getattr(consume_queues, "pull_window", None)
    if pull_window is not None:
        # One call under the queue store's lock: min, max and the window's units (bytes).
        window = pull_window(topic, queue_id, queue_offset, probe_units)
        if window is not None:
            min_offset, max_offset, data = window[0], window[1], window[2]
            # Units written by this process's dispatch name their records: no check needed.
            trusted = len(window) > 3 and queue_offset >= window[3]
        else:
            min_offset = max_offset = 0
            data, trusted = None, False
    else:
        min_offset = consume_queues.get_min_offset(topic, queue_id)
        max_offset = consume_queues.get_max_offset(topic, queue_id)
        data, trusted = None, False
    checked_topic = None if trusted else topic
    if max_offset == 0 or not min_offset <= queue_offset < max_offset:
        return _outside_queue(known_queue, topic, queue_id, queue_offset, min_offset, max_offset)
    if pull_window is None:
        data = _get_units(consume_queues, topic, queue_id, queue_offset,
                          min(probe_units, max_offset - queue_offset))
    commit_log_max = commit_log.max_offset()
    in_memory_bytes = limits.physical_memory_bytes * limits.access_message_in_memory_max_ratio // 100
    view = decode == "view"
    if probe_units < window_units and data is not None and \
            len(data) == probe_units * CQ_UNIT_SIZE:
        # The probe is enough if the scan ends inside it (the units after the one that ends a
        # scan are never looked at); otherwise read the whole window.
        plan = _plan_window(data, probe_units, max_msg_nums, hash_codes, limits,
                            max_total_msg_size, commit_log_max, in_memory_bytes)
        if plan is not None and plan[2] < probe_units:
            records = _slice_records(commit_log, plan[0], plan[1], view)
            if records is not None and (
                    trusted or _carries(records, queue_id, queue_offset, plan[4], topic, decode)):
                found = _found(records, decode, queue_offset + plan[2], min_offset, max_offset,
                               (commit_log_max - plan[3]) > in_memory_bytes, checked_topic)
                if found is not None:
                    return found
        data = _more_units(pull_window, consume_queues, topic, queue_id, queue_offset,
                           window_units, max_offset)
    if data is None:
        # rollNextFile: the next CQ file's first offset; RocksDB (units_per_cq_file 0): 0 (5.3.3)
        next_file_offset = units_per_cq_file and \
            queue_offset + units_per_cq_file - queue_offset % units_per_cq_file
        return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, next_file_offset, min_offset, max_offset)
    count = len(data) // CQ_UNIT_SIZE
    if hash_codes is None and 0 < count <= SMALL_WINDOW_UNITS and pull_unfiltered is not None:
        found = _pull_native(commit_log, data, max_msg_nums, limits, max_total_msg_size,
                             commit_log_max, in_memory_bytes, decode, trusted, topic,
                             queue_id, queue_offset, min_offset, max_offset)
        if found is not None:
            return found
    more = (lambda: _more_units(pull_window, consume_queues, topic, queue_id, queue_offset,
                                full_units, max_offset)) if full_units > window_units else None
    if hash_codes is None and 0 < count <= SMALL_WINDOW_UNITS:
        # The common pull (no filter, a few dozen units): plain tuples beat numpy's per-call cost.
        values = _unit_struct(count).unpack(data)
        phys, sizes = values[0::3], values[1::3]
        taken_count = _plan_unfiltered(phys, sizes, max_msg_nums, limits, max_total_msg_size,
                                       commit_log_max, in_memory_bytes)
        if taken_count is not None:
            if taken_count < count:
                phys, sizes = phys[:taken_count], sizes[:taken_count]
            records = _slice_records(commit_log, phys, sizes, view)
            if records is not None and (
                    trusted or _carries(records, queue_id, queue_offset, None, topic, decode)):
                found = _found(records, decode, queue_offset + taken_count, min_offset,
                               max_offset, (commit_log_max - phys[-1]) > in_memory_bytes,
                               checked_topic)
                if found is not None:
                    return found
            data = (more() or data) if more is not None else data   # past unreadable units
            return _scan_sequentially(
                commit_log, np.frombuffer(data, CQ_UNIT_DTYPE), queue_offset, max_msg_nums,
                tag_filter, limits, max_total_msg_size, min_offset, max_offset, decode,
                commit_log_max, in_memory_bytes, verify=(topic, queue_id))
    return _pull_planned(commit_log, data, count, topic, queue_id, queue_offset, max_msg_nums,
                         tag_filter, limits, max_total_msg_size, min_offset, max_offset, decode,
                         commit_log_max, in_memory_bytes, trusted, more)


def _more_units(pull_window, consume_queues, topic: str, queue_id: int, queue_offset: int,
                units: int, max_offset: int) -> bytes | None:
    """The bytes of up to `units` units from `queue_offset`, once a filtered pull's probe (its
    first units) did not hold the whole scan."""
    if pull_window is not None:
        window = pull_window(topic, queue_id, queue_offset, units)
        return window[2] if window is not None else None
    return _get_units(consume_queues, topic, queue_id, queue_offset,
                      min(units, max_offset - queue_offset))


def _outside_queue(known_queue, topic: str, queue_id: int, queue_offset: int, min_offset: int,
                   max_offset: int) -> GetMessageResult:
    """The status of a pull from an empty or unknown queue or from outside [min, max)."""
    if max_offset == 0:
        if not (known_queue(topic, queue_id) if callable(known_queue) else known_queue):
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
    if queue_offset < min_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
    if queue_offset == max_offset:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, queue_offset, min_offset,
                                max_offset)
    return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset,
                            max_offset)


def _pull_planned(commit_log, data, count, topic, queue_id, queue_offset, max_msg_nums, tag_filter,
                  limits, max_total_msg_size, min_offset, max_offset, decode, commit_log_max,
                  in_memory_bytes, trusted, more=None) -> GetMessageResult:
    """A pull the tuple shortcut does not take (a filter, a large window, a byte limit that may
    fire): `_plan_window`'s numpy plan, else `_plan_scan`; the unit-by-unit loop when a taken
    record is gone."""
    plan = _plan_window(data, count, max_msg_nums, tag_filter.hash_codes, limits,
                        max_total_msg_size, commit_log_max, in_memory_bytes)
    if plan is None:
        units = np.frombuffer(data, CQ_UNIT_DTYPE)
        taken, scanned = _plan_scan(units, max_msg_nums, tag_filter, limits,
                                    max_total_msg_size, commit_log_max, in_memory_bytes)
        phys, sizes = units["phy_offset"][taken].tolist(), units["size"][taken].tolist()
        max_phy_pulling = int(units["phy_offset"][scanned - 1]) if scanned else 0
    else:
        phys, sizes, scanned, max_phy_pulling, taken = plan
    records = _slice_records(commit_log, phys, sizes, view=decode == "view")
    if records is not None and (
            trusted or _carries(records, queue_id, queue_offset, taken, topic, decode)):
        found = _found(records, decode, queue_offset + scanned, min_offset, max_offset,
                       (commit_log_max - max_phy_pulling) > in_memory_bytes,
                       None if trusted else topic)
        if found is not None:
            return found
    # Some units point at expired commit log data, or at a record that is not theirs:
    # RocketMQ's sequential rules decide, checking each record, over the whole window (`more`).
    if more is not None:
        data = more() or data
    return _scan_sequentially(commit_log, np.frombuffer(data, CQ_UNIT_DTYPE), queue_offset,
                              max_msg_nums, tag_filter, limits, max_total_msg_size,
                              min_offset, max_offset, decode, commit_log_max,
                              in_memory_bytes, verify=(topic, queue_id))


def _found(records, decode, next_begin_offset, min_offset, max_offset, suggest_slave, topic):
    """The result of a scan that read every unit it took; None if a decoded message is not of
    `topic` (None: not checked, trusted units) (then the unit-by-unit loop decides)."""
    status = GetMessageStatus.FOUND if records else GetMessageStatus.NO_MATCHED_MESSAGE
    if decode is True:
        records = decode_messages(records)
        if topic is not None and \
                [message.topic for message in records].count(topic) != len(records):
            return None
    return GetMessageResult(status, next_begin_offset, min_offset, max_offset, records,
                            suggest_slave)


def _get_units(consume_queues, topic, queue_id, queue_offset, count) -> bytes | None:
    """The units of a consume-queue store without `pull_window` (RocksDB), as bytes."""
    units = consume_queues.get_units(topic, queue_id, queue_offset, count)
    return None if units is None else np.ascontiguousarray(units, CQ_UNIT_DTYPE).tobytes()


def _slice_records(commit_log, phys: list, sizes: list, view: bool) -> list | None:
    """The records at (phys, sizes): copies, or zero-copy views; None if one is unreadable.

    When they all lie in the readable part of one segment (the common case), one list
    comprehension slices them; otherwise segment by segment.
    """
    if not phys:
        return []
    low = min(phys)
    mapped = commit_log.mapped_files.find_file(low)
    if mapped is None or mapped.destroyed:
        return None
    base = mapped.file_from_offset
    if max(phys) + max(sizes) > base + mapped.read_position:
        return _read_records(commit_log, phys, sizes, view=view)
    buffer = memoryview(mapped.buffer) if view else mapped.buffer
    if base:
        return [buffer[p - base:p - base + s] for p, s in zip(phys, sizes)]
    return [buffer[p:p + s] for p, s in zip(phys, sizes)]


def _read_records(commit_log, phys: list, sizes: list, *, view: bool) -> list | None:
    """The records at (phys, sizes), segment by segment (copies, or zero-copy views); None if one
    is unreadable. Consecutive units mostly live in the same segment, so the segment is looked up
    once per run.
    """
    records = []
    base = end = 0
    buffer = None
    for phy_offset, size in zip(phys, sizes):
        if buffer is None or not base <= phy_offset or phy_offset + size > end:
            mapped = commit_log.mapped_files.find_file(phy_offset)
            if mapped is None or mapped.destroyed:
                return None
            base = mapped.file_from_offset
            end = base + mapped.read_position
            buffer = memoryview(mapped.buffer) if view else mapped.buffer
            if phy_offset + size > end:
                return None
        position = phy_offset - base
        records.append(buffer[position:position + size])
    return records


def _scan_sequentially(commit_log, units, queue_offset, max_msg_nums, tag_filter, limits,
                       max_total_msg_size, min_offset, max_offset, decode, commit_log_max,
                       in_memory_bytes, *, verify: tuple[str, int] | None = None
                       ) -> GetMessageResult:
    """The 4.9.7 loop unit by unit: needed when some units point at deleted commit log data.

    `verify` = (topic, queue_id): each record is checked against its unit first; a wrong one is
    skipped like an unreadable one (but the units after it in its segment are still read).
    """
    status = GetMessageStatus.NO_MATCHED_MESSAGE
    next_phy_file_start = None
    buffer_total = 0
    records = []
    skipped = []
    scanned = 0
    phy_offsets = units["phy_offset"].tolist()
    sizes = units["size"].tolist()
    tags_codes = units["tags_code"].tolist()
    max_phy_pulling = 0
    read = commit_log.view if decode == "view" else commit_log.read
    for index in range(len(phy_offsets)):
        phy_offset, size, tags_code = phy_offsets[index], sizes[index], tags_codes[index]
        max_phy_pulling = phy_offset
        if next_phy_file_start is not None and phy_offset < next_phy_file_start:
            scanned = index + 1
            continue
        in_disk = (commit_log_max - phy_offset) > in_memory_bytes
        if _is_batch_full(size, max_msg_nums, buffer_total, len(records), in_disk, limits,
                          max_total_msg_size):
            break
        scanned = index + 1
        if not tag_filter.accepts(tags_code):
            continue
        raw = read(phy_offset, size)
        if raw is None:
            if buffer_total == 0:
                status = GetMessageStatus.MESSAGE_WAS_REMOVING
            next_phy_file_start = commit_log.next_file_start(phy_offset)
            continue
        if verify is not None:
            reason = _wrong_record(raw, verify[0], verify[1], queue_offset + index, phy_offset)
            if reason is not None:
                skipped.append(reason)
                if buffer_total == 0:
                    status = GetMessageStatus.MESSAGE_WAS_REMOVING
                continue
        records.append(raw)
        buffer_total += size
        status = GetMessageStatus.FOUND
        next_phy_file_start = None
    messages = decode_messages(records) if decode is True else records
    suggest_slave = (commit_log_max - max_phy_pulling) > in_memory_bytes
    return GetMessageResult(status, queue_offset + scanned, min_offset, max_offset, messages,
                            suggest_pulling_from_slave=suggest_slave, skipped=tuple(skipped))
