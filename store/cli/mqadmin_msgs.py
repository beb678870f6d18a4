"""mqadmin's message verbs over a store directory: queryMsgByKey, queryMsgById, queryMsgByUniqueKey,
queryMsgByOffset, printMsg, printMsgByQueue, queryCq, decodeMessageId.

They take mqadmin's short flags (`-t` topic, `-k` key, `-i` id or queue, `-o` offset, `-c` count,
`-b` begin / broker, `-e` end). Where `rmqstore` already had a kebab-case verb (query-msg-by-key,
query-msg-by-id, query-msg-by-offset) the camelCase verb runs the same handler of
`store.cli.messages`, so both spellings give the same answer. Output shapes follow
tools/command/message/PrintMessageSubCommand, PrintMessageByQueueCommand, DecodeMessageIdCommond and
queue/QueryConsumeQueueCommand (rocketmq-all-4.9.7); store and user strings are printed as plain text.
"""

from __future__ import annotations

import base64
import time

from store.cli.common import UsageError, message_dict, open_store, parse_time_ms, print_json
from store.cli.mqadmin_status import broker_name, human_time

PULL_BATCH = 32                 # mqadmin pulls 32 at a time
PRINT_MAX_DEFAULT = 1000        # messages printMsg / printMsgByQueue print at most
QUERY_CQ_COUNT_DEFAULT = 10


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"    # Boolean.parseBoolean


# -- queries (shared handlers of store.cli.messages) -----------------------------------------------

def cmd_query_by_key(args) -> int:
    from store.cli.messages import cmd_query_by_key as run
    return run(args)


def cmd_query_by_id(args) -> int:
    from store.cli.messages import cmd_query_by_id as run
    return run(args)


def cmd_query_by_offset(args) -> int:
    from store.cli.messages import cmd_query_by_offset as run
    return run(args)


def print_message_block(record, tracks: list[dict]) -> None:
    """`QueryMsgByUniqueKeySubCommand.queryById`'s block ("%-20s %s"); the body is printed as text
    (base64 when binary) instead of being written to /tmp, and the consumer tracks come from the
    committed offsets: CONSUMED when a group's offset is past the message, else NOT_CONSUME_YET."""
    props = ", ".join(f"{k}={v}" for k, v in record.properties.items())
    for label, value in (("Topic:", record.topic), ("Tags:", f"[{record.tags}]"),
                         ("Keys:", f"[{record.keys}]"), ("Queue ID:", record.queue_id),
                         ("Queue Offset:", record.queue_offset),
                         ("CommitLog Offset:", record.commit_log_offset),
                         ("Reconsume Times:", record.reconsume_times),
                         ("Born Timestamp:", human_time(record.born_timestamp)),
                         ("Store Timestamp:", human_time(record.store_timestamp)),
                         ("Born Host:", record.born_host), ("Store Host:", record.store_host),
                         ("System Flag:", record.sys_flag), ("Properties:", "{" + props + "}"),
                         ("Message Body:", _body_text(record))):
        text = str(value).replace("\r", "\\r").replace("\n", "\\n")
        print(f"{label:<20} {text}")
    print()
    if not tracks:
        print("WARN: No Consumer")
    for track in tracks:
        print(f"MessageTrack [consumerGroup={track['consumerGroup']}, trackType={track['trackType']}]")


def _tracks(store, record) -> list[dict]:
    rows = [r for r in store.inspect.consumer_progress()
            if r["topic"] == record.topic and r["queue_id"] == record.queue_id]
    return [{"consumerGroup": r["group"],
             "trackType": "CONSUMED" if (r["consumer_offset"] or 0) > record.queue_offset
             else "NOT_CONSUME_YET"} for r in rows]


def cmd_query_by_unique_key(args) -> int:
    """Messages of `-t` whose UNIQ_KEY is `-i` (the index holds `topic#UNIQ_KEY`)."""
    with open_store(args, read_only=True) as store:
        result = store.query_message(args.topic, args.msg_id, 32, 0, 2**63 - 1)
        records = [m for m in result.messages if m.uniq_key == args.msg_id]
        tracks = [_tracks(store, m) for m in records]
    if not records:
        raise UsageError(f"no message of topic {args.topic!r} has UNIQ_KEY {args.msg_id!r}")
    if args.json:
        print_json([{**message_dict(m), "tracks": t} for m, t in zip(records, tracks)])
        return 0
    for number, (record, track) in enumerate(zip(records, tracks)):
        if number:
            print()
        print_message_block(record, track)
    return 0


# -- printMsg / printMsgByQueue --------------------------------------------------------------------

def _body_text(record) -> str:
    try:
        return record.body.decode("utf-8")
    except UnicodeDecodeError:
        return f"<binary {len(record.body)} bytes, base64 {base64.b64encode(record.body).decode()}>"


def message_ext_text(record) -> str:
    """A plain-text `MessageExt.toString()` (without the body bytes, which BODY: shows)."""
    props = ", ".join(f"{k}={v}" for k, v in record.properties.items())
    return (f"MessageExt [queueId={record.queue_id}, storeSize={record.store_size}, "
            f"queueOffset={record.queue_offset}, sysFlag={record.sys_flag}, "
            f"bornTimestamp={record.born_timestamp}, bornHost=/{record.born_host}, "
            f"storeTimestamp={record.store_timestamp}, storeHost=/{record.store_host}, "
            f"msgId={record.msg_id}, commitLogOffset={record.commit_log_offset}, "
            f"bodyCRC={record.body_crc}, reconsumeTimes={record.reconsume_times}, "
            f"preparedTransactionOffset={record.prepared_transaction_offset}, "
            f"toString()=Message{{topic='{record.topic}', flag={record.flag}, "
            f"properties={{{props}}}, bodyLength={len(record.body)}}}]")


def print_message_line(record, print_body: bool) -> None:
    body = _body_text(record) if print_body else "NOT PRINT BODY"
    text = f"MSGID: {record.msg_id} {message_ext_text(record)} BODY: {body}"
    print(text.replace("\r", "\\r").replace("\n", "\\n"))


def _read_queue(store, topic: str, queue_id: int, low: int, high: int, tags: str | None,
                room: int) -> tuple[list, bool]:
    """Messages of [low, high) (tag-filtered), at most `room`; (messages, truncated)."""
    found = []
    offset = low
    while offset < high:                     # bounded: each pull moves offset on, or we stop
        result = store.get_message("TOOLS_CONSUMER", topic, queue_id, offset, PULL_BATCH,
                                   tag_expression=tags)
        if result.next_begin_offset <= offset and not result.messages:
            break
        for record in result.messages:
            if record.queue_offset >= high:
                return found, False
            if len(found) >= room:
                return found, True
            found.append(record)
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
    return found, False


def _window(store, topic: str, queue_id: int, begin: str | None, end: str | None):
    low = store.get_min_offset_in_queue(topic, queue_id)
    high = store.get_max_offset_in_queue(topic, queue_id)
    if begin:   # consumer.searchOffset(mq, time)
        low = store.get_offset_in_queue_by_time(topic, queue_id, parse_time_ms(begin))
    if end:
        high = store.get_offset_in_queue_by_time(topic, queue_id, parse_time_ms(end))
    return low, high


def cmd_print_msg(args) -> int:
    """Every queue of `-t`, from `-b` to `-e` (searchOffset on each queue), as mqadmin printMsg."""
    if args.max < 1:
        raise UsageError("--max must be >= 1")
    out, truncated = [], False
    with open_store(args, read_only=True) as store:
        queues = [q for t, q in store.inspect.served_queue_keys() if t == args.topic]   # [5.x] batch
        if not queues:
            raise UsageError(f"topic {args.topic!r} has no consume queue in this store")
        for queue_id in queues:
            low, high = _window(store, args.topic, queue_id, args.begin, args.end)
            if not args.json:
                print(f"minOffset={low}, maxOffset={high}, MessageQueue [topic={args.topic}, "
                      f"brokerName={broker_name(store.config)}, queueId={queue_id}]")
            found, cut = _read_queue(store, args.topic, queue_id, low, high, args.sub_expression,
                                     args.max - len(out))
            out.extend(found)
            if not args.json:
                for record in found:
                    print_message_line(record, args.print_body)
            if cut:
                truncated = True
                break
    if args.json:
        print_json({"truncated": truncated, "messages": [message_dict(m) for m in out]})
    elif truncated:
        print(f"(stopped at --max {args.max})")
    return 0


def cmd_print_msg_by_queue(args) -> int:
    if args.max < 1:
        raise UsageError("--max must be >= 1")
    with open_store(args, read_only=True) as store:
        low, high = _window(store, args.topic, args.queue, args.begin, args.end)
        found, truncated = _read_queue(store, args.topic, args.queue, low, high,
                                       args.sub_expression, args.max)
    tags: dict[str, int] = {}
    for record in found:
        if record.tags and record.tags.strip():
            tags[record.tags] = tags.get(record.tags, 0) + 1
    by_count = sorted(tags.items(), key=lambda kv: -kv[1])
    if args.json:
        print_json({"minOffset": low, "maxOffset": high, "truncated": truncated,
                    "tagCounts": dict(by_count), "messages": [message_dict(m) for m in found]})
        return 0
    if args.print_msg:
        for record in found:
            print_message_line(record, args.print_body)
    if args.calculate:
        for tag, count in by_count:
            print(f"Tag: {tag:<30} Count: {count}")
    if not args.print_msg and not args.calculate:
        print(f"{len(found)} messages in [{low}, {high}) (-p true prints them, -f true counts tags)")
    if truncated:
        print(f"(stopped at --max {args.max})")
    return 0


# -- queryCq --------------------------------------------------------------------------------------

def cmd_query_cq(args) -> int:
    if args.count < 1:
        raise UsageError("-c must be >= 1")
    with open_store(args, read_only=True) as store:
        if store.inspect.is_batch_queue(args.topic, args.queue):    # [5.x] store/cli/batch.py
            from store.cli.batch import query_batch_cq
            committed = None if args.group is None else \
                store.query_consumer_offset(args.group, args.topic, args.queue)
            return query_batch_cq(args, store, committed)
        low = store.get_min_offset_in_queue(args.topic, args.queue)
        high = store.get_max_offset_in_queue(args.topic, args.queue)
        units = []
        offset = args.index
        while len(units) < args.count and low <= offset < high:
            got = store.inspect.queue_units(args.topic, args.queue, offset, args.count - len(units))
            if got is None or len(got) == 0:
                break
            for unit in got:
                units.append({"queueOffset": offset, "physicOffset": int(unit["phy_offset"]),
                              "physicSize": int(unit["size"]), "tagsCode": int(unit["tags_code"])})
                offset += 1
        committed = None if args.group is None else \
            store.query_consumer_offset(args.group, args.topic, args.queue)
    if args.json:
        print_json({"max": high, "min": low, "consumerOffset": committed, "units": units})
        return 0
    if committed is not None:
        print(f"Consumer offset of {args.group}: {committed}")
        print("======================================")
    print(f"Queue data: \nmax: {high}, min: {low}")
    print("======================================")
    for unit in units:
        print(f"idx: {unit['queueOffset']}")
        print(f"ConsumeQueueData{{physicOffset={unit['physicOffset']}, physicSize={unit['physicSize']}, "
              f"tagsCode={unit['tagsCode']}, extendDataJson='null', bitMap='null', eval=false, "
              f"msg='null'}}")
        print("======================================")
    return 0


# -- decodeMessageId ------------------------------------------------------------------------------

def cmd_decode_message_id(args) -> int:
    """An offset msgId: store host, port, commit-log offset. The same hex read as a UNIQ_KEY (what
    mqadmin's decodeMessageId decodes): client ip and creation time."""
    from store.codec.msgid import decode_message_id
    from store.codec.uniq_key import decode_uniq_key, nearly_time_from_key
    from store.errors import CorruptDataError
    text = args.msg_id.strip()
    try:
        host, phy_offset = decode_message_id(text)
    except (ValueError, CorruptDataError) as error:
        raise UsageError(f"{text!r} is not a message id: {error}") from None
    address, _, port = host.rpartition(":")
    out = {"msgId": text, "host": address.strip("[]"), "port": int(port), "commitLogOffset": phy_offset}
    try:
        fields = decode_uniq_key(text)
        created = nearly_time_from_key(text, time.time_ns() // 1_000_000)
        out["asUniqKey"] = {"ip": fields.ip, "pid": fields.pid, "createdMs": created}
    except ValueError:
        out["asUniqKey"] = None
    if args.json:
        print_json(out)
        return 0
    print(f"host={out['host']}")
    print(f"port={out['port']}")
    print(f"offset={phy_offset}")
    if out["asUniqKey"] is not None:
        print(f"(read as a UNIQ_KEY, as mqadmin does: ip={fields.ip} "
              f"date={human_time(out['asUniqKey']['createdMs'])})")
    return 0
