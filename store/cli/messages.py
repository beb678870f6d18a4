"""Message commands of `rmqstore`: produce, pull and the mqadmin-style queries."""

from __future__ import annotations

import os
import re
import time

from store.cli.common import (MESSAGE_COLUMNS, UsageError, format_time_ms, message_dict, message_row,
                              open_store, parse_property, parse_time_ms, print_json, print_kv,
                              print_table, validate_topic_arg)

TIME_FIELDS = ("bornTimestamp", "storeTimestamp", "indexLastUpdateTimestamp")

PRINT_MSG_MAX_DEFAULT = 100
PRINT_MSG_BATCH = 32


# -- produce --------------------------------------------------------------------------------------

def _bodies(args):
    """A callable i -> body bytes, from --body, --body-file or --size (validated before opening)."""
    if args.body_file is not None:
        path = os.path.realpath(args.body_file)
        if not os.path.isfile(path):
            raise UsageError(f"--body-file {args.body_file!r} does not exist")
        with open(path, "rb") as handle:
            data = handle.read()
        return lambda _i: data
    if args.size is not None:
        if args.size < 0:
            raise UsageError("--size must be >= 0")
        pattern = b"0123456789abcdefghijklmnopqrstuvwxyz"
        data = (pattern * (args.size // len(pattern) + 1))[:args.size]
        return lambda _i: data
    text = args.body if args.body is not None else "Hello RocketMQ {i}"
    return lambda i: text.replace("{i}", str(i)).encode("utf-8")


def cmd_produce(args) -> int:
    from store.api import Message
    from store.codec.topic import validate_topic
    from store.codec.uniq_key import UniqKeyGenerator
    validate_topic(args.topic)
    if not 0 <= args.queue <= 65535:
        raise UsageError("--queue must be in 0..65535")
    if args.count < 1 or args.batch < 1 or (args.rate is not None and args.rate <= 0):
        raise UsageError("--count and --batch must be >= 1 and --rate > 0")
    properties = dict(parse_property(p) for p in args.property or [])
    sys_flag = _TRANSACTION_SYS_FLAGS[args.transaction or "none"]
    if args.prepared_offset is not None and (args.prepared_offset < 0 or sys_flag not in (0x8, 0xC)):
        raise UsageError("--prepared-offset is the PREPARED record's commit-log offset (>= 0) and "
                         "goes with --transaction commit or rollback")
    body_of = _bodies(args)
    uniq_keys = UniqKeyGenerator()
    results = []
    started = time.monotonic()
    with open_store(args, read_only=False, must_exist=False) as store:
        sent = 0
        while sent < args.count:
            size = min(args.batch, args.count - sent)
            messages = [Message(args.topic, body_of(sent + i), queue_id=args.queue, tags=args.tags,
                                keys=args.keys or (), sys_flag=sys_flag,
                                prepared_transaction_offset=args.prepared_offset or 0,
                                properties={**properties, "UNIQ_KEY": uniq_keys.next_key()})
                        for i in range(size)]
            result = store.put_messages(messages) if size > 1 else store.put_message(messages[0])
            keys = [m.properties["UNIQ_KEY"] for m in messages]
            ids = result.msg_ids or (result.msg_id,) * size
            for i in range(size):
                results.append({"status": result.status.value, "msgId": ids[i] if i < len(ids) else None,
                                "uniqKey": keys[i], "queueOffset": result.queue_offset + i
                                if result.ok else -1,
                                "commitLogOffset": result.wrote_offset, "error": result.error})
            sent += size
            if args.rate is not None:
                delay = started + sent / args.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
    if args.json:
        print_json(results)
    else:
        print_table(results, ("status", "msgId", "uniqKey", "queueOffset", "commitLogOffset",
                              "error"))
    return 0 if all(r["status"] == "PUT_OK" for r in results) else 1


# -- pull -----------------------------------------------------------------------------------------

def cmd_pull(args) -> int:
    from store.errors import CorruptDataError
    if args.max < 1:
        raise UsageError("--max must be >= 1")
    validate_topic_arg(args.topic)
    read_only = args.read_only and not args.commit
    with open_store(args, read_only=read_only) as store:
        offset = args.offset
        if offset is None:
            committed = store.query_consumer_offset(args.group, args.topic, args.queue)
            offset = committed if committed >= 0 else store.get_min_offset_in_queue(args.topic,
                                                                                    args.queue)
        try:
            result = store.get_message(args.group, args.topic, args.queue, offset, args.max,
                                       tag_expression=args.tags, long_poll_ms=args.long_poll_ms)
        except CorruptDataError as error:
            cq_file, position = _unit_location(store, args.topic, args.queue, offset)
            raise CorruptDataError(
                error.path, error.position,
                f"{error.reason} (pulling {args.topic}/{args.queue} from queue offset {offset}: a "
                f"unit from byte {position} of {cq_file} on points at it; rmqstore check --store "
                f"{store.config.store_path_root_dir} names the unit, rmqstore recover rebuilds the "
                f"queue)") from None
        if args.commit and result.messages:
            store.commit_consumer_offset(args.group, args.topic, args.queue,
                                         result.next_begin_offset)
        summary = {"status": result.status.value, "requestOffset": offset,
                   "nextBeginOffset": result.next_begin_offset, "minOffset": result.min_offset,
                   "maxOffset": result.max_offset, "found": len(result.messages),
                   "waitedMs": result.waited_ms, "explanation": result.explanation,
                   "committed": bool(args.commit and result.messages)}
        if args.json:
            print_json({**summary, "messages": [message_dict(m) for m in result.messages]})
        else:
            print_kv(summary)
            if "Skipped" in (result.explanation or ""):
                print(f"hint             the consume queue is damaged: rmqstore check --store "
                      f"{store.config.store_path_root_dir} names the unit, rmqstore recover "
                      f"rebuilds the queue from the commit log")
            print()
            print_table([message_row(m) for m in result.messages], MESSAGE_COLUMNS)
    return 0


# -- queries --------------------------------------------------------------------------------------

def _print_messages(args, records, extra: dict | None = None) -> None:
    if args.json:
        print_json({**(extra or {}), "messages": [message_dict(m) for m in records]})
        return
    if extra:
        print_kv(_readable_times(extra))
        print()
    print_table([message_row(m) for m in records], MESSAGE_COLUMNS)


def _readable_times(values: dict) -> dict:
    """Human output: ms-since-epoch fields as `format_time_ms` text (JSON keeps the numbers)."""
    return {k: format_time_ms(v) if k in TIME_FIELDS and isinstance(v, int) else v
            for k, v in values.items()}


def cmd_query_by_key(args) -> int:
    validate_topic_arg(args.topic)
    if args.max < 1:
        raise UsageError("--max must be >= 1")
    begin = parse_time_ms(args.begin) if args.begin else 0
    end = parse_time_ms(args.end) if args.end else 2**63 - 1
    with open_store(args, read_only=args.read_only) as store:
        result = store.query_message(args.topic, args.key, args.max, begin, end)
        _warn_without_index(store)
        _print_messages(args, result.messages, {
            "found": len(result.messages), "truncated": result.truncated,
            "collisionsFiltered": result.collisions_filtered,
            "indexLastUpdateTimestamp": result.index_last_update_timestamp})
    return 0


def _warn_without_index(store) -> None:
    """An empty index/ makes every key query come back empty: say so instead of nothing."""
    import sys
    config = store.config
    index_dir = config.index_dir
    has_files = os.path.isdir(index_dir) and any(n.isdigit() for n in os.listdir(index_dir))
    if config.message_index_enable and not has_files and store.pointers()["max_phy_offset"] > 0:
        print(f"rmqstore: warning: {index_dir} holds no index files, so no key can be found; "
              f"rebuild it with: rmqstore recover --rebuild-index --store "
              f"{config.store_path_root_dir}", file=sys.stderr)


def cmd_query_by_id(args) -> int:
    """mqadmin queryMsgById: an offset msgId (store host + phy offset), else a UNIQ_KEY (the
    client-made id) looked up through the index, in --topic or in every topic of the store."""
    from store.codec.msgid import decode_message_id
    from store.errors import CorruptDataError, MessageNotFoundError
    validate_topic_arg(args.topic)
    msg_id = args.msg_id.strip()
    try:
        phy_offset = decode_message_id(msg_id)[1]
    except (ValueError, CorruptDataError):
        phy_offset = None
    if phy_offset is None and not re.fullmatch(r"[0-9A-Fa-f]{32,56}", msg_id):
        raise UsageError(f"{msg_id!r} is neither an offset msgId nor a UNIQ_KEY (32 to 56 hex "
                         f"digits)")
    with open_store(args, read_only=args.read_only) as store:
        record = None
        if phy_offset is not None:
            try:
                record = store.look_message_by_offset(phy_offset)
            except MessageNotFoundError:
                record = None
            if record is not None and record.msg_id.upper() != msg_id.upper():
                record = None           # a UNIQ_KEY that happens to decode as an offset msgId
        if record is None:
            topics = [args.topic] if args.topic else sorted({t for t, _ in store.queues()})
            for topic in topics:
                found = [m for m in store.query_message(topic, msg_id, 32).messages
                         if (m.uniq_key or "").upper() == msg_id.upper()]
                if found:
                    record = found[0]
                    break
        if record is None:
            where = f"topic {args.topic}" if args.topic else "any topic"
            offset_part = (f"no record with this msgId starts at physical offset {phy_offset}"
                           if phy_offset is not None else "not an offset msgId")
            raise MessageNotFoundError(f"{msg_id}: {offset_part}, and no message of {where} has "
                                       f"it as UNIQ_KEY in the index")
        _print_one(args, record)
    return 0


def _print_one(args, record) -> None:
    if args.json:
        print_json(message_dict(record))
        return
    values = _readable_times(message_dict(record))
    properties = values.pop("properties")
    print_kv({**values, **{f"property {k}": v for k, v in properties.items()}})


def cmd_query_by_offset(args) -> int:
    from store.errors import MessageNotFoundError
    if args.phy_offset is None and None in (args.topic, args.queue, args.offset):
        raise UsageError("give TOPIC QUEUE OFFSET, or --phy-offset N")
    validate_topic_arg(args.topic)
    with open_store(args, read_only=args.read_only) as store:
        phy_offset = args.phy_offset
        if phy_offset is None:
            # [5.x] on a batch topic: the unit of the record holding that message (a pull there)
            unit = store.inspect.served_unit(args.topic, args.queue, args.offset)
            if unit is None:
                raise UsageError(f"{args.topic}/{args.queue} has no unit at queue offset "
                                 f"{args.offset} (min {store.get_min_offset_in_queue(args.topic, args.queue)}, "
                                 f"max {store.get_max_offset_in_queue(args.topic, args.queue)})")
            phy_offset = unit.phy_offset
            try:
                record = store.look_message_by_offset(phy_offset)
            except MessageNotFoundError as error:
                cq_file, position = _unit_location(store, args.topic, args.queue, args.offset)
                raise MessageNotFoundError(
                    f"{error}: the unit at byte {position} of {cq_file} points there, so the "
                    f"consume queue is damaged; rmqstore recover --store "
                    f"{store.config.store_path_root_dir} rebuilds it from the commit log") from None
        else:
            record = store.look_message_by_offset(phy_offset)
        _print_one(args, record)
    return 0


def _unit_location(store, topic: str, queue_id: int, queue_offset: int) -> tuple[str, int]:
    """(file, byte position) of the unit: a file consume queue's (20 bytes a unit), or [5.x] the
    batch queue's unit holding that message."""
    config = store.config
    if store.inspect.is_batch_queue(topic, queue_id):
        unit = store.inspect.batch_units(topic, queue_id, queue_offset, 1).units[0]
        return os.path.join(config.batch_consume_queue_dir, topic, str(queue_id),
                            unit.file_name), unit.position
    file_size = config.mapped_file_size_consume_queue
    byte = queue_offset * 20
    start = byte - byte % file_size
    return os.path.join(config.consume_queue_dir, topic, str(queue_id), f"{start:020d}"), \
        byte - start


def cmd_print_msg(args) -> int:
    """Messages of a topic stored in [begin, end], every queue, at most --max (mqadmin printMsg)."""
    begin = parse_time_ms(args.begin) if args.begin else 0
    end = parse_time_ms(args.end) if args.end else 2**63 - 1
    if args.max < 1:
        raise UsageError("--max must be >= 1")
    validate_topic_arg(args.topic)
    found = []
    truncated = False
    with open_store(args, read_only=args.read_only) as store:
        queues = [q for t, q in store.inspect.served_queue_keys() if t == args.topic]   # [5.x] batch
        for queue_id in queues:
            offset = store.get_offset_in_queue_by_time(args.topic, queue_id, begin, "lower") \
                if begin > 0 else store.get_min_offset_in_queue(args.topic, queue_id)
            high = store.get_max_offset_in_queue(args.topic, queue_id)
            while offset < high and not truncated:
                result = store.get_message("rmqstore-print", args.topic, queue_id, offset,
                                           PRINT_MSG_BATCH)
                if not result.messages:
                    break
                for record in result.messages:
                    if begin <= record.store_timestamp <= end:
                        if len(found) >= args.max:
                            truncated = True
                            break
                        found.append(record)
                if result.messages[-1].store_timestamp > end:
                    break
                offset = result.next_begin_offset
    found.sort(key=lambda r: r.commit_log_offset)
    if args.json:
        print_json({"truncated": truncated, "messages": [message_dict(m) for m in found]})
    else:
        for record in found:
            body = message_dict(record)
            print(f"{record.msg_id}  {record.topic}/{record.queue_id}@{record.queue_offset}  "
                  f"store={format_time_ms(record.store_timestamp)}  tags={record.tags}  keys={record.keys}  "
                  f"body={body.get('body', '<binary ' + str(len(record.body)) + ' bytes>')!r}")
        if truncated:
            print(f"(stopped at --max {args.max}; narrow the time range for more)")
    return 0


# MessageSysFlag's transaction bits: a PREPARED (half) or ROLLBACK record gets no queue offset and no
# consume-queue unit; a COMMIT record does (spec §2.8).
_TRANSACTION_SYS_FLAGS = {"none": 0x0, "prepared": 0x4, "commit": 0x8, "rollback": 0xC}


def add_message_commands(subparsers, common) -> None:
    p = subparsers.add_parser("produce", parents=[common], help="append messages (writable)")
    p.add_argument("topic")
    p.add_argument("--queue", type=int, default=0)
    p.add_argument("--tags")
    p.add_argument("--keys", help="space-separated business keys")
    p.add_argument("--property", action="append", metavar="K=V")
    body = p.add_mutually_exclusive_group()
    body.add_argument("--body", help="body text; {i} becomes the message number")
    body.add_argument("--body-file")
    body.add_argument("--size", type=int, help="generated body of this many bytes")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--rate", type=float, help="messages per second")
    p.add_argument("--batch", type=int, default=1, help="messages per put (one batch)")
    p.add_argument("--transaction", choices=("prepared", "commit", "rollback"),
                   help="write transaction records (sysFlag 0x4 / 0x8 / 0xC)")
    p.add_argument("--prepared-offset", type=int, metavar="PHY_OFFSET",
                   help="with --transaction commit/rollback: the PREPARED record's commit-log offset, "
                        "written to PREPARED TRANSACTION OFFSET as a broker's EndTransactionProcessor does")
    p.set_defaults(handler=cmd_produce, read_only_default=False, writes=True)

    p = subparsers.add_parser("pull", parents=[common], help="pull messages of one queue")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("queue", type=int)
    p.add_argument("--offset", type=int, help="default: the group's committed offset")
    p.add_argument("--max", type=int, default=32)
    p.add_argument("--tags", help="tag expression, e.g. 'TagA || TagB' or '*'")
    p.add_argument("--long-poll-ms", type=int, default=0)
    p.add_argument("--commit", action="store_true", help="commit the next offset (writable)")
    p.set_defaults(handler=cmd_pull)

    p = subparsers.add_parser("print-msg", parents=[common], help="messages of a topic in a time range")
    p.add_argument("topic")
    p.add_argument("--begin")
    p.add_argument("--end")
    p.add_argument("--max", type=int, default=PRINT_MSG_MAX_DEFAULT)
    p.set_defaults(handler=cmd_print_msg)
