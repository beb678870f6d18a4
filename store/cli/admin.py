"""Operator commands of `rmqstore`: dump, check, recover (and index rebuild), clean."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict

from store.cli.common import (UsageError, format_time_ms, open_store, print_json, print_kv,
                              print_table, resolve_config, validate_topic_arg)
from store.dledger.dump import dump_dledger_records
from store.dledger.layout import find_dledger
from store.inspect.raw import (DUMP_LIMIT_DEFAULT, PROP_CRC_PROBLEM, dump_index_entries,
                               dump_queue_units, dump_records, record_hex_views)


# -- dump -----------------------------------------------------------------------------------------

def cmd_dump(args) -> int:
    """Raw files, like Kafka's dump-log tool: works on stores the engine refuses to open."""
    if args.limit < 1:
        raise UsageError("--limit must be >= 1")
    validate_topic_arg(args.topic)
    config = resolve_config(args)
    wanted = args.limit + 1                 # one more than shown: tells whether --limit cut it
    dledger = find_dledger(config)          # enableDLegerCommitLog: entries wrap the records
    if args.kind == "records" and dledger is not None:
        rows = dump_dledger_records(dledger, start_phy_offset=args.start or 0, limit=wanted,
                                    verify=args.verify)
    elif args.kind == "records":
        rows = dump_records(config, start_phy_offset=args.start or 0, limit=wanted,
                            verify=args.verify)
    elif args.kind == "batch-consume-queue":     # [5.x] store.inspect.batch_raw
        if args.topic is None or args.queue is None:
            raise UsageError("dump batch-consume-queue needs --topic and --queue")
        from store.inspect.batch_raw import dump_batch_units
        rows = dump_batch_units(config, args.topic, args.queue, start_queue_offset=args.start or 0,
                                limit=wanted, verify=args.verify)
    elif args.kind == "consume-queue":
        if args.topic is None or args.queue is None:
            raise UsageError("dump consume-queue needs --topic and --queue")
        rows = dump_queue_units(config, args.topic, args.queue, start_queue_offset=args.start or 0,
                                limit=wanted, verify=args.verify)
    else:
        rows = dump_index_entries(config, file_name=args.file, start_entry=args.start or 0,
                                  limit=wanted, verify=args.verify)
    truncated = len(rows) > args.limit
    rows = rows[:args.limit]
    # [5.x] #9852: the bytes of (the first 3) records whose __CRC32# fails, the CRC field marked.
    crc_failed = [row["phyOffset"] for row in rows if args.kind == "records" and dledger is None
                  and str(row.get("problem") or "").count(PROP_CRC_PROBLEM)]
    hex_views = record_hex_views(config, crc_failed) if crc_failed else []
    if args.json:
        document = {"kind": args.kind, "rows": rows, "truncated": truncated}
        if hex_views:
            document["crcFailures"] = [view.as_dict() for view in hex_views]
        print_json(document)
    else:
        columns = list(dict.fromkeys(c for row in rows for c in row))
        print_table([_readable_row(row) for row in rows], columns, wrap=("problem",))
        if truncated:
            print(f"(stopped at --limit {args.limit}; --start and --limit show more)")
        for view in hex_views:
            print(f"\nRecord at {view.phy_offset} ({len(view.raw)} bytes): {view.reason}")
            print("\n".join(view.as_dict()["hex"]))
        if len(crc_failed) > len(hex_views):
            print(f"({len(crc_failed) - len(hex_views)} more records fail the property CRC; "
                  f"--start shows them)")
    if args.verify and any(row.get("valid") is False for row in rows):
        return 1
    return 0


def _readable_row(row: dict) -> dict:
    return {k: format_time_ms(v) if k in ("storeTimestamp", "storeTimeMs") and isinstance(v, int)
            else v for k, v in row.items()}


# -- check ----------------------------------------------------------------------------------------

FINDING_COLUMNS = ("severity", "component", "path", "position", "message", "on_restart", "repair")


def _progress_line(part: str, done: int, total: int) -> None:
    """The check's progress on one terminal line (stderr): part, done/total and a bar."""
    width = 30
    filled = width * done // total if total else width
    sys.stderr.write(f"\r\033[Kchecking {part:<12} [{'#' * filled}{'.' * (width - filled)}] "
                     f"{done}/{total}")
    sys.stderr.flush()


def cmd_check(args) -> int:
    from store.check.findings import NO_REPAIR
    from store.check.run import check_store, has_errors
    from store.tools.check_directory import check_config
    if args.max_findings < 1 or (args.max_records is not None and args.max_records < 1):
        raise UsageError("--max-findings and --max-records must be >= 1")
    config = resolve_config(args)
    progress = _progress_line if sys.stderr.isatty() else None
    if args.read_only:
        findings = check_config(config, max_findings=args.max_findings,
                                max_records=args.max_records, progress=progress)
    else:
        with open_store(args, read_only=False, start_services=False) as store:
            findings = check_store(store, max_findings=args.max_findings,
                                   max_records=args.max_records, progress=progress)
    if progress is not None:
        sys.stderr.write("\r\033[K")
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    rows = [_finding_row(f, args) for f in findings]
    if args.json:
        print_json({"counts": counts, "findings": rows})
    else:
        table = [{**row, "repair": row["repair"] or (NO_REPAIR if row["severity"] == "error"
                                                     else "-")} for row in rows]
        print_table(table, FINDING_COLUMNS, wrap=("message", "on_restart"))   # a command stays whole
        print(f"\n{counts['error']} errors, {counts['warning']} warnings, {counts['info']} info")
    return 1 if has_errors(findings) else 0


def _finding_row(finding, args) -> dict:
    """The finding as a dict; the repair command carries this run's --config."""
    row = finding.to_dict()
    if row["repair"] and args.config:
        row["repair"] += f" --config {os.path.realpath(args.config)}"
    return row


# -- recover --------------------------------------------------------------------------------------

def _report_dict(report) -> dict:
    values = asdict(report)
    values["steps"] = [f"{s['what']}: {s['detail']}" for s in values["steps"]]
    return values


def cmd_recover(args) -> int:
    """Read-only: the recovery the engine would run, changing nothing. Writable: that recovery,
    plus the repairs of what `check` finds (store.tools.repair), each printed as a step."""
    if (args.rebuild_index or args.pad_truncated or args.rebuild_cq) and args.read_only:
        raise UsageError("--rebuild-index, --rebuild-cq and --pad-truncated write; they cannot be "
                         "combined with --read-only")
    config = resolve_config(args)
    if args.read_only:
        from store.message_store import MessageStore
        with MessageStore.open(config, read_only=True) as store:
            out = {"recovery": _report_dict(store.recovery_report), "pointers": store.pointers()}
    else:
        from store.tools.repair import repair_store
        repaired = repair_store(config, pad_truncated=args.pad_truncated,
                                rebuild_index_always=args.rebuild_index,
                                rebuild_queues=_queue_args(args.rebuild_cq or []))
        out = {"recovery": _report_dict(repaired.recovery), "pointers": repaired.pointers,
               "repairs": repaired.steps, "backupDir": repaired.backup_dir}
        if repaired.index_rebuilt is not None:
            out["rebuildIndex"] = repaired.index_rebuilt
    if args.json:
        print_json(out)
        return 0
    report = dict(out["recovery"])
    steps = report.pop("steps")
    print_kv(report)
    print("\nsteps:")
    for step in steps:
        print(f"  - {step}")
    if not args.read_only:
        print("\nrepairs:")
        for step in out["repairs"] or ["none needed (check found nothing to repair)"]:
            print(f"  - {step}")
        if out["backupDir"]:
            print(f"  (the replaced files are kept in {out['backupDir']})")
    print("\npointers:")
    print_kv(out["pointers"])
    if "rebuildIndex" in out:
        print("\nindex rebuilt:")
        print_kv(out["rebuildIndex"])
    return 0


def _queue_args(values: list[str]) -> list[tuple[str, int]]:
    """`TOPIC/QUEUE` arguments of --rebuild-cq (the topic may hold '/': the last one splits)."""
    queues = []
    for value in values:
        topic, _, queue = value.rpartition("/")
        if not topic or not queue.lstrip("-").isdigit():
            raise UsageError(f"--rebuild-cq {value!r}: expected TOPIC/QUEUE_ID, e.g. TopicA/0")
        validate_topic_arg(topic)
        queues.append((topic, int(queue)))
    return queues


# -- clean ----------------------------------------------------------------------------------------

def cmd_clean(args) -> int:
    if getattr(args, "explain", False):
        from store.cli.mqadmin_status import cmd_clean_explain
        return cmd_clean_explain(args)
    # Services off: cleaning must not deliver due delay-level / timer messages on the side.
    with open_store(args, read_only=False, start_services=False) as store:
        while store.dispatch_pending():
            pass
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
    p.add_argument("kind", choices=("records", "consume-queue", "batch-consume-queue", "index"))
    p.add_argument("--topic")
    p.add_argument("--queue", type=int)
    p.add_argument("--file", help="index file name (default: every file)")
    p.add_argument("--start", type=int, help="phy offset / queue offset (batch: message offset) / "
                                              "entry number to start at")
    p.add_argument("--limit", type=int, default=DUMP_LIMIT_DEFAULT)
    p.add_argument("--verify", action="store_true",
                   help="records: BODYCRC, PHYSICALOFFSET and [5.x] the __CRC32# property CRC "
                        "(a failing record's bytes are printed, its CRC field marked); consume-queue: units point at their "
                        "records ([5.x] batch-consume-queue: size, topic/queue, INNER_BASE/INNER_NUM); index: entries point at records with that key hash, prevIndex "
                        "links stay in the slot (adds valid/problem; exit 1 if any is invalid)")
    p.set_defaults(handler=cmd_dump)

    p = subparsers.add_parser("check", parents=[common], help="cross-check the store (exit 1 on errors)")
    p.add_argument("--max-findings", type=int, default=1000)
    p.add_argument("--max-records", type=int)
    p.set_defaults(handler=cmd_check)

    p = subparsers.add_parser("recover", parents=[common],
                              help="recover like a broker restart, repair what check finds, print "
                                   "what was done (--read-only: only show the recovery)")
    p.add_argument("--rebuild-index", action="store_true",
                   help="rebuild index/ from the whole commit log even when check finds it sound "
                        "(RocketMQ never does; done anyway when it has errors or no files)")
    p.add_argument("--pad-truncated", action="store_true",
                   help="pad commit-log segments shorter than mappedFileSizeCommitLog to full size "
                        "(a record the cut tore becomes a BLANK filler; complete records are kept)")
    p.add_argument("--rebuild-cq", action="append", metavar="TOPIC/QUEUE",
                   help="rebuild this file consume queue from the whole commit log (repeatable; "
                        "RocketMQ's restart re-dispatches only from its recovery start, so units "
                        "of a deleted queue's older records never come back by themselves)")
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
