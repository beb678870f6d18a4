"""[5.x] Batch consume queues on the command line (`BatchConsumeQueue`, rocketmq-all-5.3.3).

| verb            | what                                                                          |
|-----------------|-------------------------------------------------------------------------------|
| `queryCq`       | on a batch topic (topics.json `queue.type=BatchCQ`) `mqadmin_msgs.cmd_query_cq` hands over to `query_batch_cq`: min/max in messages, then the units from the one holding `-i` |
| `batch-queues`  | every batch queue: files, units, min / max offset in messages, store times; `--check` adds the store check's findings per queue (exit 1 on errors, like `check`) |

5.3.3's `queryCq` on a batch queue (`AdminBrokerProcessor.queryConsumeQueue` + `BatchConsumeQueue
.iterateFrom`): units from the one holding message `index` to the end of that file, while
`unit.queueOffset - index < count`, so `-c` counts messages (queue offsets), not units; a unit's
queueOffset is its msgBaseOffset. Here the units also follow into the next files (mqadmin stops at a
file's end), the `idx:` line shows the unit's msgBaseOffset (mqadmin's counter adds one per unit,
which is not a queue offset on a batch queue), and each unit's fields and record follow
`ConsumeQueueData`'s line. Data comes from `store.inspect` (`batch_units`, `batch_queues`,
`batch_findings`).
"""

from __future__ import annotations

from store.cli.common import format_time_ms, open_store, print_json, print_table
from store.inspect.batch_view import MAX_UNITS_PER_PAGE

RULE = "======================================"


def query_batch_cq(args, store, committed) -> int:
    """`queryCq` on a batch queue of the opened `store` (see the module docstring)."""
    page = store.inspect.batch_units(args.topic, args.queue, args.index,
                                     min(args.count, MAX_UNITS_PER_PAGE))
    units = [unit for unit in page.units if unit.msg_base_offset - args.index < args.count]
    capped = page.more and len(units) == len(page.units)
    queue = page.queue
    if args.json:
        print_json({"max": queue.max_offset, "min": queue.min_offset, "consumerOffset": committed,
                    "batch": True, "units": [unit.as_row() for unit in units],
                    "truncated": capped})
        return 0
    if committed is not None:
        print(f"Consumer offset of {args.group}: {committed}")
        print(RULE)
    print(f"Queue data (batch consume queue {queue.directory}, offsets in messages): \n"
          f"max: {queue.max_offset}, min: {queue.min_offset}")
    print(RULE)
    for unit in units:
        print(f"idx: {unit.msg_base_offset}")
        print(f"BatchConsumeQueueData{{physicOffset={unit.phy_offset}, physicSize={unit.size}, "
              f"tagsCode={unit.tags_code}, storeTime={unit.store_timestamp} "
              f"({unit.store_time_text}), msgBaseOffset={unit.msg_base_offset}, "
              f"batchSize={unit.batch_size}, compactedOffset={unit.compacted_offset}, "
              f"queueOffsets={unit.msg_base_offset}..{unit.last_queue_offset}}}")
        print(f"unit: {unit.file_name} at byte {unit.position}: {unit.raw.hex()}")
        print(f"record: {_record_line(unit)}")
        print(RULE)
    if capped:
        print(f"(stopped after {MAX_UNITS_PER_PAGE} units)")
    return 0


def _record_line(unit) -> str:
    where = "no commit-log file holds it" if unit.record_file is None else \
        f"{unit.record_file} at byte {unit.record_position}"
    if unit.record_topic is None:
        return f"phy {unit.phy_offset} ({where}): INVALID: {'; '.join(unit.problems)}"
    fields = (f"{unit.record_topic}/{unit.record_queue_id} QUEUEOFFSET {unit.record_queue_offset}, "
              f"INNER_BASE {_absent(unit.record_inner_base)}, "
              f"INNER_NUM {_absent(unit.record_inner_num)}, stored "
              f"{format_time_ms(unit.record_store_timestamp)}")
    verdict = "OK" if unit.valid else "INVALID: " + "; ".join(unit.problems)
    return f"phy {unit.phy_offset} ({where}): {fields}: {verdict}"


def _absent(value: str | None) -> str:
    return "(absent)" if value is None else value


def cmd_batch_queues(args) -> int:
    with open_store(args, read_only=True) as store:
        views = [view for view in store.inspect.batch_queues()
                 if args.topic is None or view.topic == args.topic]
        findings = {(view.topic, view.queue_id): store.inspect.batch_findings(view.topic, view.queue_id)
                    for view in views} if args.check else {}
    errors = sum(1 for items in findings.values() for f in items if f.severity == "error")
    if args.json:
        rows = []
        for view in views:
            row = view.as_row()
            if args.check:
                row["findings"] = [{"severity": f.severity, "path": f.path, "position": f.position,
                                    "message": f.message} for f in findings[(view.topic, view.queue_id)]]
            rows.append(row)
        print_json(rows)
        return 1 if errors else 0
    if not views:
        print("no batch consume queues in this store" +
              (f" for topic {args.topic}" if args.topic is not None else ""))
        return 0
    print_table([{"topic": view.topic, "queue": view.queue_id, "files": len(view.files),
                  "units": view.units, "min offset": view.min_offset, "max offset": view.max_offset,
                  "messages": view.messages, "batch topic": view.batch_topic,
                  "first stored": _time(view.first_store_ms), "last stored": _time(view.last_store_ms)}
                 for view in views],
                ["topic", "queue", "files", "units", "min offset", "max offset", "messages",
                 "batch topic", "first stored", "last stored"])
    if any(not view.batch_topic for view in views):
        print("batch topic False: topics.json does not make the topic a batch topic "
              "(queue.type=BatchCQ), so a broker does not serve these units")
    for view in views if args.check else []:
        items = findings[(view.topic, view.queue_id)]
        print(f"\ncheck {view.topic}/{view.queue_id}: " +
              ("no findings" if not items else f"{len(items)} findings"))
        for f in items:
            where = "" if f.position is None else f" @{f.position}"
            print(f"  {f.severity}: {f.path}{where}: {f.message}")
    return 1 if errors else 0


def _time(value_ms: int) -> str:
    return "-" if value_ms is None or value_ms <= 0 else format_time_ms(value_ms)


def add_batch_commands(subparsers, common) -> None:
    from store.cli.mqadmin_status import checked_topic
    p = subparsers.add_parser("batch-queues", parents=[common],
                              help="[5.x] batch consume queues: files, units, min/max in messages")
    p.add_argument("-t", "--topic", help="this topic only")
    p.add_argument("--check", action="store_true",
                   help="also the store check's findings per queue (exit 1 on errors)")
    p.set_defaults(handler=checked_topic(cmd_batch_queues))
