"""Operator commands of `rmqstore`: dump, check, recover (and index rebuild), clean."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict

from store.cli.common import (UsageError, open_store, print_json, print_kv, print_table,
                              resolve_config)

DUMP_LIMIT_DEFAULT = 100
REBUILD_BATCH = 256


# -- dump -----------------------------------------------------------------------------------------

def cmd_dump(args) -> int:
    """Raw files, like Kafka's dump-log tool: works on stores the engine refuses to open."""
    if args.limit < 1:
        raise UsageError("--limit must be >= 1")
    config = resolve_config(args)
    rows = {"records": _dump_records, "consume-queue": _dump_cq, "index": _dump_index}[args.kind](
        args, config)
    columns = list(rows[0]) if rows else []
    if args.json:
        print_json(rows)
    else:
        print_table(rows, columns)
    if args.verify and any(row.get("valid") is False for row in rows):
        return 1
    return 0


def _dump_records(args, config) -> list[dict]:
    from store.check.commitlog import CommitLogView, body_crc_matches, iter_records
    from store.codec import message as msgcodec
    rows = []
    with CommitLogView(config.commit_log_dirs, config.mapped_file_size_commit_log) as view:
        for phy_offset, result in iter_records(view, args.start or 0):
            if len(rows) >= args.limit:
                break
            segment = view.find(phy_offset)
            position = phy_offset - segment.file_from_offset
            row = {"phyOffset": phy_offset, "file": os.path.basename(segment.path),
                   "position": position, "kind": result.kind, "size": result.size}
            if result.kind == msgcodec.CHECK_RECORD:
                r = result.request
                row.update(topic=r.topic, queueId=r.queue_id, queueOffset=r.consume_queue_offset,
                           storeTimestamp=r.store_timestamp, tagsCode=r.tags_code, keys=r.keys,
                           uniqKey=r.uniq_key, sysFlag=r.sys_flag)
                if args.verify:
                    row["valid"] = body_crc_matches(segment.buffer, position) and \
                        r.commit_log_offset == phy_offset
            elif result.kind == msgcodec.CHECK_INVALID and args.verify:
                row["valid"] = False
            rows.append(row)
    return rows


def _dump_cq(args, config) -> list[dict]:
    import numpy as np

    from store.check.commitlog import CommitLogView
    from store.codec import message as msgcodec
    from store.codec.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE
    if args.topic is None or args.queue is None:
        raise UsageError("dump consume-queue needs --topic and --queue")
    queue_dir = os.path.join(config.consume_queue_dir, args.topic, str(args.queue))
    if not os.path.isdir(queue_dir):
        raise UsageError(f"no consume queue directory {queue_dir}")
    start = args.start or 0
    rows = []
    view = CommitLogView(config.commit_log_dirs, config.mapped_file_size_commit_log) \
        if args.verify else None
    try:
        for name in sorted(n for n in os.listdir(queue_dir) if n.isdigit() and len(n) == 20):
            with open(os.path.join(queue_dir, name), "rb") as handle:
                data = handle.read()
            units = np.frombuffer(data, dtype=CQ_UNIT_DTYPE, count=len(data) // CQ_UNIT_SIZE)
            first = int(name) // CQ_UNIT_SIZE
            for index in range(max(0, start - first), len(units)):
                if len(rows) >= args.limit:
                    return rows
                phy, size, tags = (int(v) for v in units[index])
                if phy == 0 and size == 0 and tags == 0:
                    break            # end of the queue
                row = {"queueOffset": first + index, "file": name, "position": index * CQ_UNIT_SIZE,
                       "phyOffset": phy, "size": size, "tagsCode": tags}
                if view is not None:
                    result = view.check_at(phy)
                    row["valid"] = result.kind == msgcodec.CHECK_RECORD and result.size == size \
                        and result.request.topic == args.topic \
                        and result.request.consume_queue_offset == first + index
                rows.append(row)
    finally:
        if view is not None:
            view.close()
    return rows


def _dump_index(args, config) -> list[dict]:
    import mmap

    from store.codec.index_codec import ENTRY_STRUCT, decode_header, entry_position, index_file_size
    directory = config.index_dir
    names = sorted(n for n in os.listdir(directory) if n.isdigit()) if os.path.isdir(directory) else []
    if args.file:
        if args.file not in names:
            raise UsageError(f"no index file {args.file!r} in {directory}")
        names = [args.file]
    slots, entries = config.max_hash_slot_num, config.max_index_num
    rows = []
    for name in names:
        path = os.path.join(directory, name)
        size = os.path.getsize(path)
        if size != index_file_size(slots, entries):
            rows.append({"file": name, "entry": None, "error": f"size {size} does not match config"})
            continue
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), size,
                                                   access=mmap.ACCESS_READ) as buffer:
            header = decode_header(buffer)
            count = min(max(header.index_count, 1), entries)
            for number in range(max(1, args.start or 0), count):
                if len(rows) >= args.limit:
                    return rows
                key_hash, phy, diff, prev = ENTRY_STRUCT.unpack_from(
                    buffer, entry_position(slots, number))
                rows.append({"file": name, "entry": number, "keyHash": key_hash, "slot":
                             key_hash % slots, "phyOffset": phy, "timeDiffS": diff, "prevIndex": prev,
                             "storeTimeMs": header.begin_timestamp + diff * 1000})
    return rows


# -- check ----------------------------------------------------------------------------------------

def cmd_check(args) -> int:
    from store.check.run import check_store, has_errors
    from store.tools.check_directory import check_config
    if args.max_findings < 1 or (args.max_records is not None and args.max_records < 1):
        raise UsageError("--max-findings and --max-records must be >= 1")
    if args.read_only:
        findings = check_config(resolve_config(args), max_findings=args.max_findings,
                                max_records=args.max_records)
    else:
        with open_store(args, read_only=False, start_services=False) as store:
            findings = check_store(store, max_findings=args.max_findings,
                                   max_records=args.max_records)
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    if args.json:
        print_json({"counts": counts, "findings": [f.to_dict() for f in findings]})
    else:
        print_table([f.to_dict() for f in findings],
                    ("severity", "component", "path", "position", "message"))
        print(f"\n{counts['error']} errors, {counts['warning']} warnings, {counts['info']} info")
    return 1 if has_errors(findings) else 0


# -- recover --------------------------------------------------------------------------------------

def _report_dict(report) -> dict:
    values = asdict(report)
    values["steps"] = [f"{s['what']}: {s['detail']}" for s in values["steps"]]
    return values


def cmd_recover(args) -> int:
    if args.rebuild_index and args.read_only:
        raise UsageError("--rebuild-index writes index/; it cannot be combined with --read-only")
    config = resolve_config(args)
    old_index = None
    if args.rebuild_index:
        old_index = _set_index_aside(config)
    from store.message_store import MessageStore
    with MessageStore.open(config, read_only=args.read_only) as store:
        report = _report_dict(store.recovery_report)
        pointers = store.pointers()
    out = {"recovery": report, "pointers": pointers}
    if args.rebuild_index:
        out["rebuildIndex"] = _rebuild_index(config)
        if old_index is not None:
            shutil.rmtree(old_index, ignore_errors=True)
    if args.json:
        print_json(out)
    else:
        steps = report.pop("steps")
        print_kv(report)
        print("\nsteps:")
        for step in steps:
            print(f"  - {step}")
        print("\npointers:")
        print_kv(pointers)
        if "rebuildIndex" in out:
            print("\nindex rebuilt:")
            print_kv(out["rebuildIndex"])
    return 0


def _set_index_aside(config) -> str | None:
    """Move index/ out of the way so a damaged index cannot stop the open; None if there is none."""
    from store.meta.lockfile import probe_lock
    holder = probe_lock(config.store_path_root_dir)
    if holder is not None:
        raise UsageError(f"process {holder} holds the store lock; stop it before rebuilding")
    if not os.path.isdir(config.index_dir):
        return None
    aside = f"{config.index_dir}.old-{time.time_ns() // 1_000_000}"
    os.replace(config.index_dir, aside)
    return aside


def _rebuild_index(config) -> dict:
    """Index every record of the (recovered, closed) store into a fresh index/ (spec §5.6).

    RocketMQ never rebuilds a deleted index/: dispatch resumes from the consume queues, so old
    messages stay unfindable by key. Here the whole log is read again, under the store lock.
    """
    from store.check.commitlog import CommitLogView, iter_records
    from store.meta.checkpoint import CheckpointFile
    from store.codec import message as msgcodec
    from store.index.index_service import IndexService
    from store.meta.lockfile import StoreLock
    from store.recovery.loader import detect_store_format
    root = config.store_path_root_dir
    staging = config.index_dir + ".rebuild"
    shutil.rmtree(staging, ignore_errors=True)
    full_file_end_ms = [0]
    records = 0
    with StoreLock(root):
        service = IndexService(staging, config.max_hash_slot_num, config.max_index_num,
                               read_only=False, on_file_full=lambda ts: full_file_end_ms.__setitem__(
                                   0, max(full_file_end_ms[0], ts)))
        try:
            with CommitLogView(config.commit_log_dirs, config.mapped_file_size_commit_log) as view:
                batch = []
                for _phy, result in iter_records(view, check_crc=config.check_crc_on_recover):
                    if result.kind != msgcodec.CHECK_RECORD:
                        continue
                    batch.append(result.request)
                    records += 1
                    if len(batch) >= REBUILD_BATCH:
                        service.build_index(batch)
                        batch = []
                if batch:
                    service.build_index(batch)
            files = len(service.files)
            service.flush()
        finally:
            service.close()
        shutil.rmtree(config.index_dir, ignore_errors=True)
        if os.path.isdir(staging):
            os.replace(staging, config.index_dir)
        style = config.store_format if config.store_format != "auto" else \
            detect_store_format(root, config.commit_log_dir)
        checkpoint = CheckpointFile(config.checkpoint_path, read_only=False, style=style)
        checkpoint.load()
        checkpoint.index_msg_timestamp = full_file_end_ms[0]
        checkpoint.flush()
    return {"records": records, "indexFiles": files, "indexMsgTimestamp": full_file_end_ms[0]}


# -- clean ----------------------------------------------------------------------------------------

def cmd_clean(args) -> int:
    with open_store(args, read_only=False) as store:
        result = asdict(store.clean_expired_files(force=args.force))
        result["minPhyOffsetAfter"] = store.commit_log.min_offset()
    if args.json:
        print_json(result)
    else:
        print_kv(result)
    return 0


def cmd_convert_cq(args) -> int:
    from store.tools.convert_cq import convert_consume_queues
    config = resolve_config(args)
    report = asdict(convert_consume_queues(config, args.to))
    if args.json:
        print_json(report)
    else:
        print_kv(report)
        print(f"\nThe old consume queues are kept in {report['backup_dir']}.")
        print(f"Set {report['store_type_line']} in the store's config before opening it again.")
    return 0


def add_admin_commands(subparsers, common) -> None:
    p = subparsers.add_parser("dump", parents=[common], help="raw records / CQ units / index entries")
    p.add_argument("kind", choices=("records", "consume-queue", "index"))
    p.add_argument("--topic")
    p.add_argument("--queue", type=int)
    p.add_argument("--file", help="index file name (default: every file)")
    p.add_argument("--start", type=int, help="phy offset / queue offset / entry number to start at")
    p.add_argument("--limit", type=int, default=DUMP_LIMIT_DEFAULT)
    p.add_argument("--verify", action="store_true", help="check CRCs / that units point at records")
    p.set_defaults(handler=cmd_dump)

    p = subparsers.add_parser("check", parents=[common], help="cross-check the store (exit 1 on errors)")
    p.add_argument("--max-findings", type=int, default=1000)
    p.add_argument("--max-records", type=int)
    p.set_defaults(handler=cmd_check)

    p = subparsers.add_parser("recover", parents=[common],
                              help="open writable (recovering) and print the recovery report")
    p.add_argument("--rebuild-index", action="store_true",
                   help="rebuild index/ from the whole commit log (RocketMQ does not)")
    p.set_defaults(handler=cmd_recover, read_only_default=False)

    p = subparsers.add_parser("convert-cq", parents=[common],
                              help="convert consume queues between files and RocksDB (offline)")
    p.add_argument("--to", required=True, choices=("rocksdb", "file"))
    p.set_defaults(handler=cmd_convert_cq, read_only_default=False, writes=True)

    p = subparsers.add_parser("clean", parents=[common], help="run expiry cleanup once (writable)")
    p.add_argument("--force", action="store_true", help="delete old segments regardless of age")
    p.set_defaults(handler=cmd_clean, read_only_default=False, writes=True)
