"""Operator commands of `rmqstore`: dump, check, recover (and index rebuild), clean."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict

from store.cli.common import (UsageError, open_store, print_json, print_kv, print_table,
                              resolve_config)
from store.inspect.raw import DUMP_LIMIT_DEFAULT, dump_index_entries, dump_queue_units, dump_records
from store.tools.rebuild_index import rebuild_index


# -- dump -----------------------------------------------------------------------------------------

def cmd_dump(args) -> int:
    """Raw files, like Kafka's dump-log tool: works on stores the engine refuses to open."""
    if args.limit < 1:
        raise UsageError("--limit must be >= 1")
    config = resolve_config(args)
    if args.kind == "records":
        rows = dump_records(config, start_phy_offset=args.start or 0, limit=args.limit,
                            verify=args.verify)
    elif args.kind == "consume-queue":
        if args.topic is None or args.queue is None:
            raise UsageError("dump consume-queue needs --topic and --queue")
        rows = dump_queue_units(config, args.topic, args.queue, start_queue_offset=args.start or 0,
                                limit=args.limit, verify=args.verify)
    else:
        rows = dump_index_entries(config, file_name=args.file, start_entry=args.start or 0,
                                  limit=args.limit)
    columns = list(rows[0]) if rows else []
    if args.json:
        print_json(rows)
    else:
        print_table(rows, columns)
    if args.verify and any(row.get("valid") is False for row in rows):
        return 1
    return 0


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
        out["rebuildIndex"] = rebuild_index(config)
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


# -- clean ----------------------------------------------------------------------------------------

def cmd_clean(args) -> int:
    if getattr(args, "explain", False):
        from store.cli.mqadmin_status import cmd_clean_explain
        return cmd_clean_explain(args)
    with open_store(args, read_only=False) as store:
        result = asdict(store.clean_expired_files(force=args.force))
        result["minPhyOffsetAfter"] = store.pointers()["min_phy_offset"]
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
    p.add_argument("--explain", action="store_true",
                   help="say what cleanup would delete now and why (read-only, no change to disk)")
    p.set_defaults(handler=cmd_clean, read_only_default=False, writes=True)
