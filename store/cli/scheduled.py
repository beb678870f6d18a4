"""`rmqstore queryTimerMsg`: the 5.x timer store's messages with their state (apache/rocketmq#8534).

| flag                 | meaning                                                            |
|----------------------|--------------------------------------------------------------------|
| `-t, --topic`        | the real topic (REAL_TOPIC)                                        |
| `-k, --key`          | a message key                                                      |
| `-i, --msgId`        | UNIQ_KEY (the client's msgId) or an offset msgId of either record  |
| `--state`            | pending, due, delivered, orphaned or cancelled                     |
| `-b, --begin`, `-e, --end` | due-time window (ms, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS)   |
| `--now`              | the time `due` is judged against (default: the clock)              |
| `-c, --max`          | at most this many rows (default 1000)                              |

Human output: the timer store's state, then one row per message, times in UTC with the zone; `--json`
keeps raw epoch ms. Read-only: the timer files and the commit log are only read.
"""

from __future__ import annotations

from store.cli.common import UsageError, open_store, parse_time_ms, print_json, print_kv, print_table
from store.cli.mqadmin_status import checked_topic, human_time
from store.inspect.timer import STATES

COLUMNS = ("state", "due", "topic", "queueId", "uniqKey", "keys", "tags", "timer", "wheelOffset",
           "timerLogPos", "deliveredOffset", "reason")


def add_scheduled_commands(subparsers, common) -> None:
    p = subparsers.add_parser("queryTimerMsg", parents=[common],
                              help="5.x timer messages (TIMER_DELIVER_MS / _DELAY_SEC / _DELAY_MS) "
                                   "and their state")
    p.add_argument("-t", "--topic", help="real topic")
    p.add_argument("-k", "--key", help="message key")
    p.add_argument("-i", "--msgId", dest="msg_id", help="UNIQ_KEY or offset msgId")
    p.add_argument("--state", choices=STATES)
    p.add_argument("-b", "--begin", help="due time from")
    p.add_argument("-e", "--end", help="due time to (exclusive)")
    p.add_argument("--now", help="judge 'due' against this time (default: now)")
    p.add_argument("-c", "--max", type=int, default=1000, help="at most this many rows")
    p.set_defaults(handler=checked_topic(cmd_query_timer_msg))


def cmd_query_timer_msg(args) -> int:
    if args.max <= 0:
        raise UsageError("--max must be positive")
    start_ms = parse_time_ms(args.begin) if args.begin else None
    end_ms = parse_time_ms(args.end) if args.end else None
    now_ms = parse_time_ms(args.now) if args.now else None
    with open_store(args, read_only=args.read_only) as store:
        inspect = store.inspect
        state = inspect.timer_state()
        checkpoint = inspect.timer_checkpoint()
        rows = inspect.scheduled_messages(state=args.state, topic=args.topic, key=args.key,
                                          msg_id=args.msg_id, start_ms=start_ms, end_ms=end_ms,
                                          now_ms=now_ms)
    shown = rows[:args.max]
    if args.json:
        print_json({"timer": state,
                    "checkpoint": checkpoint.to_dict() if checkpoint is not None else None,
                    "total": len(rows), "truncated": len(rows) > len(shown),
                    "commit_log_walk_capped_at": rows.walked_to if rows.capped else None,
                    "messages": [m.to_dict() for m in shown]})
        return 0
    summary = {"timer store": state["state"]}
    if "timer_log_units" in state:
        summary.update({"timer log units": state["timer_log_units"],
                        "timer log end": state["timer_log_end"],
                        "read time": human_time(state.get("curr_read_time_ms")),
                        "next queue offset": state.get("curr_queue_offset")})
    for problem in state["problems"]:
        summary.setdefault("problems", problem)
    summary["messages"] = f"{len(rows)}" + (f" (first {len(shown)} shown)" if len(shown) < len(rows)
                                            else "")
    if rows.capped:
        summary["note"] = (f"the commit-log walk stopped at offset {rows.walked_to} (record cap): "
                           f"later messages are not listed")
    print_kv(summary)
    print_table([_row(m) for m in shown], COLUMNS, wrap=("reason",))
    return 0


def _row(m) -> dict:
    return {"state": m.state, "due": human_time(m.due_ms), "topic": m.topic or "",
            "queueId": "" if m.queue_id is None else m.queue_id, "uniqKey": m.uniq_key or "",
            "keys": m.keys, "tags": m.tags or "",
            "timer": f"{m.timer_property}={m.timer_value}" if m.timer_property else "",
            "wheelOffset": "" if m.wheel_phy_offset is None else m.wheel_phy_offset,
            "timerLogPos": "" if m.timer_log_pos is None else m.timer_log_pos,
            "deliveredOffset": "" if m.delivered_phy_offset is None else m.delivered_phy_offset,
            "reason": m.reason}
