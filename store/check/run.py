"""Cross-check of a whole store: commit log, consume queues, index, checkpoint, config files.

`check_store(store)` checks an opened store (read-only or not). `check_all(config, style, store, sink)`
checks a store directory with or without an opened store: `store.tools.check_directory.check_config`
uses it to check a directory even when the engine refuses to open it (a truncated segment, a
wrong-sized index file).

Everything reads files as they are on disk (mapped read-only), never through recovery, and nothing is
written. Damaged data gives typed findings, never an exception. Work is bounded: `max_records` caps the
records walked, and separately the CQ units and index entries checked; `max_findings` caps the output.
When a cap cuts the check short, an info finding says so.

| component    | what is checked                                                                      |
|--------------|--------------------------------------------------------------------------------------|
| files        | names the store ignores, leftovers, abort/lock state, the finding cap                |
| commitlog    | segment names/sizes/gaps, magic, BODYCRC, lengths, PHYSICALOFFSET, BLANK at each end, |
|              | bytes after the end of the log, where recovery would cut                             |
| consumequeue | file names/sizes/gaps; every unit -> a record start of that size, topic, queue,      |
|              | queue offset and tagsCode; units beyond the log end; invalid units before the end;    |
|              | records the queues do not reach yet; [5.x] batch queues (store.check.batch)           |
| index        | header counts, slot chains, entries -> record starts with a matching key hash        |
| checkpoint   | 4096 bytes, no timestamp after the log's last store time (+3 s), unused bytes zero   |
| config       | config/*.json parse (with .bak fallback), unknown broker.conf keys                   |
"""

from __future__ import annotations

import os
import struct

from store.check.batch import check_batch_queues
from store.check.commitlog import LogScan, walk_commit_log
from store.check.log_view import CommitLogView
from store.check.consumequeue import (check_api_queues, check_dispatch_coverage, check_file_queues,
                                     lmq_queue_spans)
from store.check.dledger import check_dledger
from store.check.findings import COMPONENTS, SEVERITIES, Finding, Sink, utc_text
from store.check.index import check_index_dir
from store.check.index_chains import ChainVerdicts
from store.check.segments import check_segment_files
from store.check.stream_index import EntryMatcher
from store.check.stream_units import UnitMatcher, api_queue_source, open_file_queue
from store.check.timer import check_timer
from store.codec import fastjson
from store.codec.index_codec import index_file_size
from store.codec.checkpoint_codec import (CHECKPOINT_FILE_SIZE_BYTES, decode_checkpoint,
                                          used_bytes)
from store.codec.prop_crc import CRC_PROPERTY
from store.errors import StoreError

__all__ = ["COMPONENTS", "SEVERITIES", "Finding", "check_all", "check_store", "has_errors"]

CHECKPOINT_SLACK_MS = 3000        # RocketMQ's own safety margin (minTimestamp - 3 s)
# What damaged bytes can make the readers raise; anything else is a bug and propagates.
_EXPECTED = (StoreError, OSError, ValueError, struct.error, IndexError, UnicodeError, BufferError)


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def check_store(store, *, max_findings: int = 1000, max_records: int | None = None,
                progress=None) -> list[Finding]:
    """Cross-check an opened store; see the module docstring. Writes nothing. `progress`, when
    given, is called as progress(part, done, total) as the check goes (see `check_all`)."""
    sink = Sink(max_findings, store.config.store_path_root_dir)
    check_all(store.config, store.style, store, sink, max_records, progress=progress)
    return sink.result()


def _guarded(sink: Sink, component: str, what, *args, **kwargs):
    try:
        return what(*args, **kwargs)
    except _EXPECTED as exc:
        sink.add("error", component, getattr(exc, "path", None), getattr(exc, "position", None),
                 f"check stopped early on unreadable data: {exc}")
        return None


def check_all(config, style: str, store, sink: Sink, max_records: int | None, *,
              progress=None) -> None:
    """Check the directory `config` names into `sink`; `store` is the opened store, or None when the
    engine could not open it (then what needs the engine, RocksDB queues and recovery, is skipped).

    `progress(part, done, total)`, when given, is called after each commit-log segment ("commitlog",
    segments walked of those holding data), each consume queue ("consumequeue", queue directories)
    and each index file ("index"); it must not raise."""
    root = config.store_path_root_dir
    if sink.store_root is None:
        sink.store_root = root
    unclean = os.path.exists(os.path.join(root, "abort"))
    _guarded(sink, "files", _check_files, root, unclean, sink)
    delay_levels = _delay_levels(config)
    from store.dledger.layout import find_dledger
    dledger = _guarded(sink, "commitlog", find_dledger, config)   # enableDLegerCommitLog
    view = _guarded(sink, "commitlog", CommitLogView, [dledger.data_dir] if dledger else
                    config.commit_log_dirs, config.mapped_file_size_commit_log, delay_levels,
                    force_verify_prop_crc=config.recovery_crc_mode(style) == CRC_PROPERTY,
                    multi_dispatch=bool(config.enable_multi_dispatch))
    if view is None:
        return
    chains = None
    try:
        if dledger is not None:
            scan = _guarded(sink, "commitlog", check_dledger, dledger, view, sink,
                            max_records=max_records, unclean=unclean) or LogScan()
        else:
            check_segment_files(view, sink)
            matchers = _matchers(config, store)
            scan = _guarded(sink, "commitlog", walk_commit_log, view, sink,
                            max_records=max_records, unclean=unclean, progress=progress,
                            matchers=matchers) or LogScan()
        if config.message_index_enable and not sink.full:     # overlaps the queues' check
            chains = _guarded(sink, "index", ChainVerdicts, config.index_dir,
                              config.max_hash_slot_num, config.max_index_num)
        if store is not None and not sink.full and dledger is None:
            _guarded(sink, "commitlog", _compare_recovery, store, scan, sink)
        if config.store_type == "default":
            ends = _guarded(sink, "consumequeue", check_file_queues, root,
                            config.mapped_file_size_consume_queue, view, scan, sink,
                            unclean=unclean, max_units=max_records, progress=progress)
        elif store is not None:
            ends = _guarded(sink, "consumequeue", check_api_queues, store.consume_queues, view,
                            scan, sink, unclean=unclean, max_units=max_records,
                            is_batch_topic=store.topics.is_batch_topic)
        else:
            ends = None
            sink.add("info", "consumequeue", None, None,
                     "RocksDB consume queues are only checked on a store the engine can open")
        if ends is not None and not sink.full:
            lmq = lmq_queue_spans(scan, enable_lmq=config.enable_lmq) \
                if config.enable_multi_dispatch else None       # [5.x] LMQ units
            check_dispatch_coverage(scan, ends, sink, unclean=unclean,
                                    queue_dir=os.path.join(root, "consumequeue")
                                    if config.store_type == "default" else None, lmq=lmq)
        if not sink.full:       # [5.x] batchconsumequeue/ (BatchConsumeQueue), when present
            _guarded(sink, "consumequeue", check_batch_queues, root,
                     config.mapper_file_size_batch_consume_queue, view, scan, sink,
                     max_units=max_records)
        if config.message_index_enable:
            _guarded(sink, "index", check_index_dir, config.index_dir, config.max_hash_slot_num,
                     config.max_index_num, view, scan, sink, unclean=unclean,
                     max_entries=max_records, progress=progress, chains=chains)
        _guarded(sink, "checkpoint", _check_checkpoint, config.checkpoint_path, style, scan, sink)
        _guarded(sink, "config", _check_config_files, config, sink)
        _guarded(sink, "timer", check_timer, config, style, store, view, scan, sink,
                 max_units=max_records)
    finally:
        if chains is not None:
            chains.close()
        view.close()


def _matchers(config, store) -> list:
    """What the walk compares each window of records with (store.check.stream_units,
    stream_index): the consume queues (files, or the opened store's), the index files."""
    matchers = []
    try:
        _add_matchers(matchers, config, store)
    except _EXPECTED:
        pass                          # then the record-by-record code decides everything
    return matchers


def _add_matchers(matchers: list, config, store) -> None:
    if config.store_type == "default":
        matchers.append(UnitMatcher(open_file_queue(config.store_path_root_dir,
                                                    config.mapped_file_size_consume_queue)))
    elif store is not None:
        matchers.append(UnitMatcher(api_queue_source(store.consume_queues,
                                                     store.topics.is_batch_topic)))
    if config.message_index_enable:
        matchers.append(EntryMatcher(config.index_dir, config.max_hash_slot_num,
                                     config.max_index_num, index_file_size(
                                         config.max_hash_slot_num, config.max_index_num)))


def _delay_levels(config):
    from store.commitlog.put_path import parse_delay_levels
    try:
        return parse_delay_levels(config.message_delay_level)
    except ValueError:
        return None


def _check_files(root: str, unclean: bool, sink: Sink) -> None:
    from store.meta.lockfile import probe_lock
    if unclean:
        sink.add("info", "files", os.path.join(root, "abort"), None,
                 "abort file present: the last run did not shut down cleanly (a writable open runs "
                 "abnormal recovery)",
                 on_restart="DefaultMessageStore.recover runs CommitLog.recoverAbnormally (from the "
                            "checkpoint, re-dispatching) and deletes abort at a clean shutdown",
                 repair="rmqstore recover --store {store}")
    holder = probe_lock(root)
    if holder is not None and holder != os.getpid():
        sink.add("info", "files", os.path.join(root, "lock"), None,
                 f"process {holder} holds the store lock: a live writer may change files while "
                 f"they are checked")


def _compare_recovery(store, scan: LogScan, sink: Sink) -> None:
    """Where the engine's recovery ends the log, against where the raw walk found valid data."""
    recovered_end = store.commit_log.max_offset()
    if not scan.capped and scan.end_offset > recovered_end:
        report = store.recovery_report
        sink.add("error", "commitlog", report.start_file, None,
                 f"recovery ends the log at {recovered_end} ({report.stop_reason}) but records "
                 f"continue to {scan.end_offset}: {scan.end_offset - recovered_end} bytes would be "
                 f"cut by a writable open")


def _check_checkpoint(path: str, style: str, scan: LogScan, sink: Sink) -> None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(CHECKPOINT_FILE_SIZE_BYTES + 1)
    except FileNotFoundError:
        sink.add("warning", "checkpoint", path, None,
                 "no checkpoint file (a writable open creates a zero one; abnormal recovery then "
                 "starts at the first segment)")
        return
    if len(data) != CHECKPOINT_FILE_SIZE_BYTES:
        sink.add("error", "checkpoint", path, None,
                 f"checkpoint is {os.path.getsize(path)} bytes, expected {CHECKPOINT_FILE_SIZE_BYTES}")
    padded = data[:CHECKPOINT_FILE_SIZE_BYTES].ljust(CHECKPOINT_FILE_SIZE_BYTES, b"\0")
    cp = decode_checkpoint(padded)
    used = used_bytes(style)
    if padded[used:].count(0) != CHECKPOINT_FILE_SIZE_BYTES - used:
        sink.add("warning", "checkpoint", path, used,
                 f"bytes after the {used} a {style} broker uses are not zero")
    fields = (("physicMsgTimestamp", cp.physic_msg_timestamp, 0),
              ("logicsMsgTimestamp", cp.logics_msg_timestamp, 8),
              ("indexMsgTimestamp", cp.index_msg_timestamp, 16))
    for name, value, position in fields:
        if value < 0:
            sink.add("error", "checkpoint", path, position, f"{name} is negative ({value})")
        elif scan.records and not scan.capped and \
                value > scan.last_store_timestamp + CHECKPOINT_SLACK_MS:
            sink.add("warning", "checkpoint", path, position,
                     f"{name} {value} ({utc_text(value)}) is {value - scan.last_store_timestamp} "
                     f"ms after the last store time in the log ({scan.last_store_timestamp}, "
                     f"{utc_text(scan.last_store_timestamp)}): the log lost data the "
                     f"checkpoint says was durable, or clocks jumped")
    if style == "5.x" and cp.confirm_phy_offset > scan.end_offset and not scan.capped:
        sink.add("warning", "checkpoint", path, 32,
                 f"confirmPhyOffset {cp.confirm_phy_offset} is beyond the end of the log "
                 f"({scan.end_offset})")


def _check_config_files(config, sink: Sink) -> None:
    import difflib

    from store.config_table import PROPERTIES
    known = [rocketmq for rocketmq, _ in PROPERTIES.values()]
    for key in config.unknown_keys():
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
        sink.add("warning" if close else "info", "config", None, None,
                 f"config key {key!r} is not a store setting this engine knows (kept, unused)"
                 + (f"; did you mean {close[0]!r}?" if close else ""),
                 on_restart="the broker ignores unknown keys (MixAll.properties2Object): the "
                            "setting keeps its default", repair=None)
    directory = config.config_dir
    if not os.path.isdir(directory):
        return
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith(".tmp"):
            sink.add("info", "config", path, None, "leftover temporary file of an interrupted write")
            continue
        if not name.endswith(".json") or not os.path.isfile(path):
            continue
        problem = _parse_problem(path)
        if problem is None:
            continue
        backup_problem = _parse_problem(path + ".bak")
        if backup_problem is None:
            sink.add("warning", "config", path, None, f"{problem}; the store falls back to .bak")
        else:
            sink.add("error", "config", path, None,
                     f"{problem}; .bak does not load either ({backup_problem}): the store starts "
                     f"with an empty table")


def _parse_problem(path: str) -> str | None:
    """None if `path` parses as broker JSON, else a sentence saying why not."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return "missing"
    if not raw.strip():
        return "empty"
    try:
        fastjson.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"not UTF-8 at byte {exc.start}"
    except StoreError as exc:
        return f"does not parse: {exc}"
    return None
