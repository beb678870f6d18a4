"""Registration of mqadmin's store-side verbs, under mqadmin's names and short flags.

| verb                  | flags                                   | handler                          |
|-----------------------|-----------------------------------------|----------------------------------|
| `queryMsgByKey`       | -t topic -k key [-b begin -e end -c max] | messages.cmd_query_by_key        |
| `queryMsgById`        | -i msgId [-t topic]                     | messages.cmd_query_by_id         |
| `queryMsgByUniqueKey` | -i uniqKey -t topic                     | mqadmin_msgs                     |
| `queryMsgByOffset`    | -t topic -i queueId -o offset [-b]      | messages.cmd_query_by_offset     |
| `printMsg`            | -t [-b -e -s -d -m]                     | mqadmin_msgs                     |
| `printMsgByQueue`     | -t -i queueId [-a -b -e -s -p -d -f -m] | mqadmin_msgs                     |
| `queryCq`             | -t -q queueId -i index [-c count -g -b] | mqadmin_msgs                     |
| `decodeMessageId`     | -i msgId                                | mqadmin_msgs                     |
| `topicList`, `topicStatus`, `consumerProgress`, `brokerStatus`, `statsAll` | see mqadmin_status |

`-b` broker address / `-a` broker name are accepted and ignored where mqadmin requires them: the store
is the one given by `--store`. The kebab-case names `query-msg-by-key`, `query-msg-by-id` and
`query-msg-by-offset` are aliases of the first three query verbs, and keep their positional form
(`query-msg-by-key TOPIC KEY`): every argument may be given by position or by mqadmin's flag.
"""

from __future__ import annotations

from store.cli import mqadmin_msgs as msgs
from store.cli.common import UsageError
from store.cli.mqadmin_status import add_status_commands
from store.cli.mqadmin_status import checked_topic as _checked


def _bool_flag(parser, short: str, long: str, dest: str, default: bool, help_text: str) -> None:
    parser.add_argument(short, long, dest=dest, type=msgs._bool, default=default, metavar="true|false",
                        help=f"{help_text} (default {str(default).lower()})")


def _positional_or_flag(parser, dest: str, short: str, long: str, **kw) -> None:
    """`dest` as an optional positional (the kebab-case form: `query-msg-by-key TOPIC KEY`) or as
    mqadmin's flag (`queryMsgByKey -t TOPIC -k KEY`); `_merged` takes whichever was given."""
    parser.add_argument(f"{dest}_positional", nargs="?", metavar=dest.upper(), **kw)
    parser.add_argument(short, long, dest=dest, **kw)


def _merged(handler, *dests: str, optional: bool = False):
    """The handler, after each `dest` was taken from its positional or its flag (not both, unless
    equal; required unless `optional`), then checked by RocketMQ's topic rule."""
    def run(args) -> int:
        for dest in dests:
            positional, flag = getattr(args, f"{dest}_positional"), getattr(args, dest)
            if positional is not None and flag is not None and positional != flag:
                raise UsageError(f"{dest} given twice, as {positional!r} and {flag!r}")
            value = flag if flag is not None else positional
            if value is None and not optional:
                raise UsageError(f"give the {dest.replace('_', ' ')} (see --help)")
            setattr(args, dest, value)
        return _checked(handler)(args)
    return run


def add_mqadmin_commands(subparsers, common) -> None:
    """Add the camelCase verbs to `rmqstore`'s subcommands."""
    p = subparsers.add_parser("queryMsgByKey", aliases=["query-msg-by-key"], parents=[common],
                              help="by key, from the index (mqadmin)")
    _positional_or_flag(p, "topic", "-t", "--topic")
    _positional_or_flag(p, "key", "-k", "--key")
    p.add_argument("-b", "--begin", help="store time from (ms, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS)")
    p.add_argument("-e", "--end", help="store time to")
    p.add_argument("-c", "--max", type=int, default=32, help="at most this many (default 32)")
    p.set_defaults(handler=_merged(msgs.cmd_query_by_key, "topic", "key"))

    p = subparsers.add_parser("queryMsgById", aliases=["query-msg-by-id"], parents=[common],
                              help="by offset msgId, or by UNIQ_KEY through the index (mqadmin)")
    _positional_or_flag(p, "msg_id", "-i", "--msgId", help="offset msgId (store host + phy offset) or UNIQ_KEY")
    p.add_argument("-t", "--topic", help="topic of a UNIQ_KEY (default: try every topic)")
    p.set_defaults(handler=_merged(msgs.cmd_query_by_id, "msg_id"))

    p = subparsers.add_parser("queryMsgByUniqueKey", parents=[common], help="by UNIQ_KEY (mqadmin)")
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the UNIQ_KEY")
    p.add_argument("-t", "--topic", required=True)
    p.set_defaults(handler=_checked(msgs.cmd_query_by_unique_key))

    p = subparsers.add_parser("queryMsgByOffset", aliases=["query-msg-by-offset"], parents=[common],
                              help="by topic, queue and queue offset, or --phy-offset (mqadmin)")
    _positional_or_flag(p, "topic", "-t", "--topic")
    _positional_or_flag(p, "queue", "-i", "--queueId", type=int)
    _positional_or_flag(p, "offset", "-o", "--offset", type=int)
    p.add_argument("--phy-offset", type=int, help="a commit-log offset instead of topic/queue/offset")
    p.add_argument("-b", "--brokerName", help="ignored")
    p.set_defaults(handler=_merged(msgs.cmd_query_by_offset, "topic", "queue", "offset", optional=True))

    p = subparsers.add_parser("printMsg", parents=[common],
                              help="every queue of a topic, MSGID lines (mqadmin)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--begin", help="begin time (searchOffset on each queue)")
    p.add_argument("-e", "--end", help="end time")
    p.add_argument("-s", "--subExpression", dest="sub_expression", help="tags, e.g. 'TagA || TagB'")
    _bool_flag(p, "-d", "--printBody", "print_body", True, "print bodies")
    p.add_argument("-m", "--max", type=int, default=msgs.PRINT_MAX_DEFAULT)
    p.set_defaults(handler=_checked(msgs.cmd_print_msg))

    p = subparsers.add_parser("printMsgByQueue", parents=[common],
                              help="one queue, MSGID lines and tag counts (mqadmin)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-i", "--queueId", dest="queue", type=int, required=True)
    p.add_argument("-a", "--brokerName", help="ignored")
    p.add_argument("-b", "--begin", help="begin time")
    p.add_argument("-e", "--end", help="end time")
    p.add_argument("-s", "--subExpression", dest="sub_expression")
    _bool_flag(p, "-p", "--printMsg", "print_msg", False, "print the messages")
    _bool_flag(p, "-d", "--printBody", "print_body", False, "print bodies")
    _bool_flag(p, "-f", "--calculate", "calculate", False, "count messages by tag")
    p.add_argument("-m", "--max", type=int, default=msgs.PRINT_MAX_DEFAULT)
    p.set_defaults(handler=_checked(msgs.cmd_print_msg_by_queue))

    p = subparsers.add_parser("queryCq", parents=[common], help="consume-queue units and min/max (mqadmin)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-q", "--queue", type=int, required=True)
    p.add_argument("-i", "--index", type=int, required=True, help="first queue offset")
    p.add_argument("-c", "--count", type=int, default=msgs.QUERY_CQ_COUNT_DEFAULT)
    p.add_argument("-g", "--group", help="also show this group's committed offset")
    p.add_argument("-b", "--broker", help="ignored")
    p.set_defaults(handler=_checked(msgs.cmd_query_cq))

    p = subparsers.add_parser("decodeMessageId", parents=[common],
                              help="host, port and offset of an offset msgId (mqadmin)")
    p.add_argument("-i", "--messageId", dest="msg_id", required=True)
    p.set_defaults(handler=_checked(msgs.cmd_decode_message_id))

    add_status_commands(subparsers, common)
