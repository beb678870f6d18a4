"""mqadmin's status verbs over a store directory: topicList, topicStatus, consumerProgress,
brokerStatus, statsAll, and `clean --explain`.

The numbers come from the inspection API (`store.inspect`'s `topics`, `topic_status`,
`consumer_progress`, `broker_status`, `cleanup_explain`), the same methods the dashboard's pages use.
Human output follows mqadmin's tables (tools/command/topic/TopicStatusSubCommand,
consumer/ConsumerProgressSubCommand, broker/BrokerStatusSubCommand, stats/StatsAllSubCommand at
rocketmq-all-4.9.7), with what an offline store cannot know (client IPs, TPS of the last minute)
shown as "NA"/"OFFLINE"; `--json` prints the raw values (ms, fractions, bytes).
"""

from __future__ import annotations

from store.cli.common import UsageError, format_time_ms, open_store, print_json


def human_time(value_ms) -> str:
    """A time for humans (the CLI's one format, with its zone); "" for None / unset."""
    return "" if value_ms is None or value_ms <= 0 else format_time_ms(value_ms)


def checked_topic(handler):
    """The handler, after the topic argument (if any) passed RocketMQ's topic rule: a topic becomes
    a directory name under consumequeue/, so `..` or `/` must never reach the store."""
    def run(args) -> int:
        from store.codec.topic import validate_topic
        if getattr(args, "topic", None) is not None:
            validate_topic(args.topic, allow_v2=True)
        return handler(args)
    return run


def broker_name(config) -> str:
    """brokerName from the config file if it has one (BrokerConfig, not a store setting)."""
    return config.unknown.get("brokerName", "-") if hasattr(config, "unknown") else "-"


def _pct(value) -> str:
    return "" if value is None else ("unknown" if value < 0 else f"{value * 100:.1f}%")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


# -- topics ---------------------------------------------------------------------------------------

def cmd_topic_list(args) -> int:
    with open_store(args, read_only=True) as store:
        topics = store.inspect.topics()
    if args.json:
        print_json(topics)
    else:
        for row in topics:          # mqadmin topicList prints one name a line
            print(row["topic"])
    return 0


def cmd_topic_status(args) -> int:
    with open_store(args, read_only=True) as store:
        rows = store.inspect.topic_status(args.topic)
        name = broker_name(store.config)
    if not rows:
        raise UsageError(f"topic {args.topic!r} has no consume queue in this store")
    if args.json:
        print_json(rows)
        return 0
    print(f"{'#Broker Name':<32}  {'#QID':<4}  {'#Min Offset':<20}  {'#Max Offset':<20}    #Last Updated")
    for row in rows:
        print(f"{name:<32}  {row['queue_id']:<4}  {row['min_offset']:<20}  {row['max_offset']:<20}    "
              f"{human_time(row['last_updated_ms'])}")
    return 0


# -- consumers ------------------------------------------------------------------------------------

def cmd_consumer_progress(args) -> int:
    with open_store(args, read_only=True) as store:
        rows = store.inspect.consumer_progress(args.group)
        groups = store.inspect.consumer_groups()
        name = broker_name(store.config)
    if args.group is not None and not rows:
        raise UsageError(f"group {args.group!r} has no committed offset in this store")
    if args.json:
        print_json(rows)
        return 0
    if args.group is None:
        _print_groups(rows, groups)
        return 0
    print(f"{'#Topic':<32}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
          f"{'#Consumer Offset':<20}  {'#Client IP':<20} {'#Diff':<20}  #LastTime")
    for row in rows:
        consumer = "-" if row["consumer_offset"] is None else row["consumer_offset"]
        print(f"{row['topic']:<32}  {name:<32}  {row['queue_id']:<4}  {row['broker_offset']:<20}  "
              f"{consumer:<20}  {'NA':<20} {row['lag']:<20}  {human_time(row['last_store_ms'])}")
    print()
    print("Consume TPS: NA (an offline store keeps no consume rate)")
    print(f"Diff Total: {sum(r['lag'] for r in rows)}")
    _print_notes(rows)
    return 0


def _print_groups(rows: list[dict], groups: list[str]) -> None:
    totals: dict[str, int] = dict.fromkeys(groups, 0)
    for row in rows:
        totals[row["group"]] = totals.get(row["group"], 0) + row["lag"]
    print(f"{'#Group':<32}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  "
          f"{'#TPS':<7}  #Diff Total")
    for group in sorted(totals):
        print(f"{group:<32}  {0:<6}  {'OFFLINE':<24} {'':<5}  {'':<14}  {0:<7}  {totals[group]}")
    _print_notes(rows)


def _print_notes(rows: list[dict]) -> None:
    notes = [r for r in rows if r["note"]]
    if notes:
        print()
        print("Notes:")
        for r in notes:
            print(f"  {r['group']} {r['topic']}/{r['queue_id']}: {r['note']}")


# -- broker ---------------------------------------------------------------------------------------

_TIME_KEYS = ("earliest_message_time_ms", "checkpoint_physic_msg_timestamp_ms",
              "checkpoint_logics_msg_timestamp_ms", "checkpoint_index_msg_timestamp_ms",
              "oldest_file_mtime_ms", "now_ms")


def _status_lines(values: dict) -> dict[str, str]:
    lines = {}
    for key, value in values.items():
        if key in ("reasons", "earliest_message_time_note"):
            continue
        label = key
        if key == "earliest_message_time_ms" and values.get("earliest_message_time_note"):
            # 5.3.3 throws here (IPv6 born host): say so in words, with the first record's time.
            text, label = values["earliest_message_time_note"], key.removesuffix("_ms")
        elif key in _TIME_KEYS:
            text, label = human_time(value) or "-", key.removesuffix("_ms")
        elif key.endswith("_ratio") and isinstance(value, float):
            text = _pct(value)
        elif key.endswith("_age_ms") and value is not None:
            text, label = f"{value / 3_600_000:.1f} h", key.removesuffix("_ms")
        elif isinstance(value, list):
            text = ", ".join(value) if value else "(none)"
        else:
            text = "-" if value is None else str(value)
        lines[_camel(label)] = text
    return lines


def cmd_broker_status(args) -> int:
    with open_store(args, read_only=True) as store:
        runtime = store.inspect.broker_status()
        cleanup = store.inspect.cleanup_explain()
    if args.json:
        print_json({"runtime": runtime, "cleanup": cleanup})
        return 0
    merged = {**_status_lines(runtime), **_status_lines(cleanup)}
    for key in sorted(merged):                # BrokerStatusSubCommand: sorted "%-32s: %s"
        print(f"{key:<32}: {merged[key]}")
    print()
    print("Cleanup:")
    for reason in cleanup["reasons"]:
        print(f"  - {reason}")
    return 0


def cmd_clean_explain(args) -> int:
    """`rmqstore clean --explain`: what cleanup would do now and why; opens read-only."""
    with open_store(args, read_only=True) as store:
        explain = store.inspect.cleanup_explain()
    if args.json:
        print_json(explain)
        return 0
    lines = _status_lines(explain)
    for key, text in lines.items():
        print(f"{key:<32}: {text}")
    print()
    for reason in explain["reasons"]:
        print(f"- {reason}")
    return 0


# -- stats ----------------------------------------------------------------------------------------

def cmd_stats_all(args) -> int:
    with open_store(args, read_only=True) as store:
        topics = store.inspect.topics()
        progress = store.inspect.consumer_progress()
    rows = []
    for topic in topics:
        if args.topic is not None:
            if topic["topic"] != args.topic:
                continue
        elif topic["kind"] in ("retry", "dlq"):
            continue                                  # statsAll skips %RETRY% and %DLQ% topics
        if args.active and topic["messages"] == 0:
            continue
        groups: dict[str, int] = {}
        for row in progress:
            if row["topic"] == topic["topic"]:
                groups[row["group"]] = groups.get(row["group"], 0) + row["lag"]
        for group in sorted(groups) or [None]:
            rows.append({**topic, "group": group, "accumulation": groups.get(group, 0)})
    if args.topic is not None and not rows:
        raise UsageError(f"topic {args.topic!r} is not in this store")
    if args.json:
        print_json(rows)
        return 0
    print(f"{'#Topic':<32}  {'#Consumer Group':<32} {'#Accumulation':>13} {'#InTPS':>11} "
          f"{'#Messages':>11} {'#Bytes':>14}  #Stored From .. To")
    for row in rows:
        rate = "" if row["put_rate_per_s"] is None else f"{row['put_rate_per_s']:.2f}"
        group = "NO_CONSUMER" if row["group"] is None else row["group"]
        print(f"{row['topic']:<32}  {group:<32} {row['accumulation']:>13} {rate:>11} "
              f"{row['messages']:>11} {row['bytes']:>14}  {human_time(row['first_store_ms'])} .. "
              f"{human_time(row['last_store_ms'])}")
    print()
    print("#InTPS is messages / stored span (first to last store time), not the last minute's rate.")
    return 0


def add_status_commands(subparsers, common) -> None:
    p = subparsers.add_parser("topicList", parents=[common], help="topics of the store (mqadmin)")
    p.set_defaults(handler=cmd_topic_list)

    p = subparsers.add_parser("topicStatus", parents=[common],
                              help="per queue: min, max, last updated (mqadmin)")
    p.add_argument("-t", "--topic", required=True)
    p.set_defaults(handler=checked_topic(cmd_topic_status))

    p = subparsers.add_parser("consumerProgress", parents=[common],
                              help="per queue: broker/consumer offset, diff, last time (mqadmin)")
    p.add_argument("-g", "--group", help="consumer group (default: a line per group)")
    p.set_defaults(handler=cmd_consumer_progress)

    p = subparsers.add_parser("brokerStatus", parents=[common],
                              help="the store's runtime figures and cleanup state (mqadmin)")
    p.add_argument("-b", "--broker", help="ignored (the store is given by --store)")
    p.set_defaults(handler=cmd_broker_status)

    p = subparsers.add_parser("statsAll", parents=[common],
                              help="per topic: messages, bytes, rate, accumulation (mqadmin)")
    p.add_argument("-t", "--topic", help="this topic only")
    p.add_argument("-a", "--active", action="store_true", help="topics with messages only")
    p.set_defaults(handler=checked_topic(cmd_stats_all))
