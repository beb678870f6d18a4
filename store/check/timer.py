"""The 5.x timer store against itself and the commit log (component "timer").

What is checked, on the files as they are (read-only, `store.timer`), with RocketMQ's
`TimerMessageStore.recover()` replayed in memory to know what a restarted broker would use:

| what                | finding                                                                      |
|---------------------|------------------------------------------------------------------------------|
| files               | wheel missing / empty (info: RocketMQ starts from zero slots), wrong size      |
|                     | (error: the broker does not start), timercheck missing or not 4096 bytes,     |
|                     | a timer-log file of the wrong size, files after the log's end                 |
| timer log           | an invalid unit before the end (error: recovery cuts the log there)           |
| timercheck          | lastTimerLogFlushPos past the log's end (error: flushed units were lost)      |
| units               | prev_pos to no unit or to a unit of another slot (broken chain; into a file   |
|                     | deleted as expired is not); a record                                          |
|                     | past the commit log's end (apache/rocketmq#10668: dequeue waits on it); a      |
|                     | record that is not a `rmq_sys_wheel_timer` record of size sizePy               |
| slots               | a slot at the wrong index, last_pos not a unit of its time, a chain that does |
|                     | not end at first_pos, num against the chain (corrupted slot)                  |
| unreachable units   | a unit due after the read time that no slot chain reaches (orphaned: never    |
|                     | delivered)                                                                    |

The commit log's end is the recovered one when the store is open, else where the raw walk ends.
Every walk is bounded by `max_units`.
"""

from __future__ import annotations

import os

import numpy as np

from store.check.findings import Sink
from store.codec import record_check
from store.timer.codec import MAGIC_DELETE, TIMER_TOPIC, slot_index
from store.timer.timer_store import STATE_ABSENT, STATE_LOG_UNREADABLE, open_timer_files

COMPONENT = "timer"
MAX_UNITS_CHECKED = 2_000_000


def check_timer(config, style: str, store, view, scan, sink: Sink, *,
                max_units: int | None = None, now_ms: int | None = None) -> None:
    """Check the timer files of `config`'s store into `sink` (see the module docstring)."""
    if style != "5.x" or not config.timer_wheel_enable:
        return
    import time
    now_ms = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    root = config.store_path_root_dir
    files = open_timer_files(root, file_size_bytes=config.mapped_file_size_timer_log,
                             precision_ms=config.timer_precision_ms, now_ms=now_ms,
                             read_message=_message_reader(view), tolerate_errors=True)
    if files.state == STATE_ABSENT:
        return
    log_end = store.commit_log.max_offset() if store is not None else scan.end_offset
    log_min = store.commit_log.min_offset() if store is not None else scan.min_offset
    _check_files(files, sink)
    if files.state == STATE_LOG_UNREADABLE or files.log is None:
        return
    limit = max_units or MAX_UNITS_CHECKED
    if len(files.log.pos) > limit:
        sink.add("info", COMPONENT, files.timer_log_dir, None,
                 f"only the first {limit} of {len(files.log.pos)} timer-log units were checked")
    _check_units(files, view, log_min, log_end, sink, limit)
    _check_slots(files, sink, limit)
    sink.summarize()


def _message_reader(view):
    def read(offset_py: int, size_py: int):
        result = view.check_at(offset_py)
        if result.kind != record_check.CHECK_RECORD or result.size != size_py:
            return None
        return result.request.queue_id, result.request.consume_queue_offset
    return read


def _check_files(files, sink: Sink) -> None:
    if files.state in ("wheel missing", "wheel empty"):
        # Info only: the units this loses are reported one by one as unreachable below.
        begin = files.recovery.begin_offset if files.recovery is not None else 0
        sink.add("info", COMPONENT, files.wheel_path, None,
                 f"{files.state}: RocketMQ starts from an all-zero wheel that recovery refills from "
                 f"the timer-log file holding {begin} on (lastTimerLogFlushPos - file size); "
                 f"units of earlier files are reachable from no slot")
    elif files.state == "wheel wrong size":
        sink.add("error", COMPONENT, files.wheel_path, None,
                 f"timer wheel is {files.wheel_size_bytes} bytes, expected 38707200: the broker "
                 f"does not start (TimerWheel: Timer wheel length != expected)")
    elif files.state == STATE_LOG_UNREADABLE:
        sink.add("error", COMPONENT, files.timer_log_dir, None, "; ".join(files.problems))
    if files.checkpoint_size_bytes is None:
        sink.add("warning", COMPONENT, files.timercheck_path, None,
                 "no timercheck: RocketMQ starts the timer from zero (read time, queue offset)")
    elif files.checkpoint_size_bytes != 4096:
        sink.add("warning", COMPONENT, files.timercheck_path, None,
                 f"timercheck is {files.checkpoint_size_bytes} bytes, RocketMQ writes 4096")
    if files.checkpoint_nonzero_tail is not None:
        sink.add("warning", COMPONENT, files.timercheck_path, files.checkpoint_nonzero_tail,
                 "bytes after the 56 RocketMQ writes are not zero")
    log = files.log
    if log is None:
        return
    for name in log.ignored_names:
        sink.add("info", COMPONENT, os.path.join(files.timer_log_dir, name), None,
                 "not a timer-log file name: ignored")
    for expected, found in log.gaps:
        sink.add("error", COMPONENT, files.timer_log_dir, None,
                 f"timer-log files skip from {expected} to {found}")
    if log.stop_reason.startswith("invalid unit") or "too few" in log.stop_reason:
        sink.add("error", COMPONENT, os.path.join(files.timer_log_dir, log.file_name_of(log.end_offset)),
                 log.end_offset % log.file_size_bytes,
                 f"timer log ends on an {log.stop_reason}: recovery cuts the log there")
    if files.recovery is not None and files.recovery.timer_log_files_after < log.file_count:
        sink.add("warning", COMPONENT, files.timer_log_dir, None,
                 f"{log.file_count - files.recovery.timer_log_files_after} timer-log file(s) after "
                 f"the log's end at {files.recovery.process_offset}: a writable broker deletes them")
    flush_pos = files.checkpoint.last_timer_log_flush_pos
    if flush_pos > log.end_offset:
        sink.add("error", COMPONENT, files.timercheck_path, 8,
                 f"lastTimerLogFlushPos {flush_pos} is past the timer log's end {log.end_offset}: "
                 f"units the checkpoint says were flushed are gone")


def _check_units(files, view, log_min: int, log_end: int, sink: Sink, limit: int) -> None:
    log = files.log
    precision = files.precision_ms
    units = log.units[:limit]
    due_slot = (units["curr_write_time_ms"].astype(np.int64) + units["delay_ms"]) // precision
    for i in range(len(units)):
        pos = int(log.pos[i])
        path = os.path.join(files.timer_log_dir, log.file_name_of(pos))
        position = pos % log.file_size_bytes
        prev = int(units["prev_pos"][i])
        if prev != -1 and prev < _first_offset(log):
            pass        # into a file deleted as expired (deleteExpiredFileByOffsetForTimerLog)
        elif prev != -1:
            j = log.index_of(prev)
            if j < 0 or prev >= pos:
                sink.add_limited("timer broken chain", "error", COMPONENT, path, position + 4,
                                 f"unit {pos}: prev_pos {prev} is not an earlier timer-log unit "
                                 f"(broken slot chain: dequeue stops there)")
            elif int(due_slot[j]) != int(due_slot[i]):
                sink.add_limited("timer broken chain", "error", COMPONENT, path, position + 4,
                                 f"unit {pos}: prev_pos {prev} is a unit due in another slot "
                                 f"({int(due_slot[j]) * precision} ms, not "
                                 f"{int(due_slot[i]) * precision} ms)")
        offset_py, size_py = int(units["offset_py"][i]), int(units["size_py"][i])
        if offset_py + size_py > log_end:
            sink.add_limited("timer past log end", "error", COMPONENT, path, position + 28,
                             f"unit {pos} points to commit-log offset {offset_py} (+{size_py}), past "
                             f"the commit log's end {log_end}: an orphaned entry (apache/rocketmq"
                             f"#10668: dequeue retries it)")
            continue
        if offset_py < log_min:
            sink.add_limited("timer expired record", "info", COMPONENT, path, position + 28,
                             f"unit {pos} points to commit-log offset {offset_py}, before the log's "
                             f"first offset {log_min} (its record expired)")
            continue
        result = view.check_at(offset_py)
        if result.kind != record_check.CHECK_RECORD or result.size != size_py or \
                result.request.topic != TIMER_TOPIC:
            what = (f"a {result.size}-byte {result.request.topic} record"
                    if result.kind == record_check.CHECK_RECORD else "no record")
            sink.add_limited("timer wrong record", "error", COMPONENT, path, position + 28,
                             f"unit {pos} points to commit-log offset {offset_py} ({size_py} bytes "
                             f"of {TIMER_TOPIC}) but finds {what}")


def _first_offset(log) -> int:
    """Where the timer log's first file starts: units before it were in files deleted as expired."""
    return log.files[0].file_from_offset if log.files else 0


def _chain(log, last_pos: int, bound: int):
    """Positions from `last_pos` back along prev_pos: (positions, end), end = "ok", "expired" (the
    rest of the chain was in timer-log files deleted as expired), "not a unit" (the position reached
    is not a unit) or "loop"."""
    seen, pos = [], last_pos
    for _ in range(bound + 1):
        if pos == -1:
            return seen, "ok"
        if pos < _first_offset(log):
            return seen, "expired"
        i = log.index_of(pos)
        if i < 0:
            return seen, "not a unit"
        if seen and pos >= seen[-1]:
            return seen, "loop"
        seen.append(pos)
        pos = int(log.units["prev_pos"][i])
    return seen, "loop"


def _check_slots(files, sink: Sink, limit: int) -> None:
    log = files.log
    precision = files.precision_ms
    recovered = files.recovery.slots if files.recovery is not None else files.slots
    read_time_ms = files.recovery.curr_read_time_ms if files.recovery is not None else 0
    bound = min(len(log.pos), limit)
    reached: set[int] = set()
    for index in sorted(set(files.slots) | set(recovered)):
        disk = files.slots.get(index)
        slot = recovered.get(index, disk)
        position = index * 32
        if disk is not None and slot_index(disk.time_ms, precision) != index:
            sink.add_limited("timer slot", "error", COMPONENT, files.wheel_path, position,
                             f"slot {index} holds time {disk.time_ms} which belongs in slot "
                             f"{slot_index(disk.time_ms, precision)} (corrupted slot)")
            continue
        chain, end = _chain(log, slot.last_pos, bound)
        reached.update(chain)
        where = f"slot {index} ({slot.time_ms} ms)"
        repaired = disk is not None and (disk.first_pos, disk.last_pos) != (slot.first_pos,
                                                                            slot.last_pos)
        if repaired:
            disk_chain, disk_end = _chain(log, disk.last_pos, bound)
            if disk_end not in ("ok", "expired") or not set(disk_chain) <= set(chain):
                sink.add_limited("timer slot", "error", COMPONENT, files.wheel_path, position + 8,
                                 f"{where} on disk: first_pos {disk.first_pos}, last_pos "
                                 f"{disk.last_pos} do not match its chain in the log (corrupted "
                                 f"slot; recovery rewrites it to {slot.first_pos}..{slot.last_pos})")
        if end == "expired":
            continue    # the slot's older units went with an expired file: RocketMQ reads what is left
        if end != "ok":
            sink.add_limited("timer slot", "error", COMPONENT, files.wheel_path, position + 16,
                             f"{where}: its chain from last_pos {slot.last_pos} reaches {end} after "
                             f"{len(chain)} unit(s) (broken chain: dequeue delivers only those)")
            continue
        if chain and chain[-1] != slot.first_pos:
            sink.add_limited("timer slot", "error", COMPONENT, files.wheel_path, position + 8,
                             f"{where}: its chain ends at {chain[-1]} but first_pos is "
                             f"{slot.first_pos} (broken chain or corrupted slot)")
        due = [(int(log.units["curr_write_time_ms"][log.index_of(p)]) +
                int(log.units["delay_ms"][log.index_of(p)])) // precision for p in chain]
        if any(d != slot.time_ms // precision for d in due):
            sink.add_limited("timer slot", "error", COMPONENT, files.wheel_path, position + 16,
                             f"{where}: its chain holds units due in other slots (corrupted slot)")
        count = sum(-1 if int(log.units["magic"][log.index_of(p)]) & MAGIC_DELETE else 1
                    for p in chain)
        if disk is not None and disk.num != count:
            # After a crash the wheel (flushed once a second) may miss the last enqueues, and a
            # missing wheel is rebuilt from the log: recovery revises first/last_pos but never num
            # (only metrics and flow control read it), and a hosting broker later flushes the
            # revised slot with its old num. A num below the chain is therefore no damage.
            lagging = disk.num < count
            sink.add_limited("timer slot num", "info" if lagging else "error", COMPONENT,
                             files.wheel_path, position + 24,
                             f"{where}: num is {disk.num} but its chain holds {count} unit(s)"
                             + (" (the wheel was flushed before the last enqueues, or rebuilt by "
                                "recovery; recovery does not fix num)" if lagging
                                else " (corrupted slot)"))
    _check_unreachable(files, reached, read_time_ms, bound, sink)


def _check_unreachable(files, reached: set[int], read_time_ms: int, bound: int, sink: Sink) -> None:
    log = files.log
    units = log.units[:bound]
    due = units["curr_write_time_ms"].astype(np.int64) + units["delay_ms"]
    live = np.flatnonzero(due // files.precision_ms * files.precision_ms >= read_time_ms)
    lost = [i for i in live.tolist() if int(log.pos[i]) not in reached]
    if lost and files.state in ("wheel missing", "wheel empty"):
        # One cause, one finding: RocketMQ would start from an empty wheel (see _check_files).
        sink.add("info", COMPONENT, files.wheel_path, None,
                 f"with the wheel {files.state.split()[-1]}, {len(lost)} unit(s) due after the read "
                 f"time are in no slot chain (first at timer-log offset {int(log.pos[lost[0]])}): "
                 f"RocketMQ would not deliver them")
        return
    for i in lost:
        pos = int(log.pos[i])
        sink.add_limited("timer unreachable", "error", COMPONENT,
                         os.path.join(files.timer_log_dir, log.file_name_of(pos)),
                         pos % log.file_size_bytes,
                         f"unit {pos} (due {int(due[i])} ms, slot "
                         f"{slot_index(int(due[i]), files.precision_ms)}) is in no slot chain: an "
                         f"orphaned entry, never delivered")
