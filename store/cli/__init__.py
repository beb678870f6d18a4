"""`rmqstore`: the command-line tool of the store (console script `store.cli:main`).

Subcommands are named after mqadmin's where one exists (docs/cli.md has the table). Every command
takes `--store DIR` and `--config FILE`; read commands open the store read-only unless `--writable`.
Expected failures (bad input, a missing path, a store error, corrupt data) print one line to stderr and
exit 2; `check` exits 1 when it finds errors.

`rmqstore spark ...` comes from `store.pipeline.cli.add_spark_subcommands(subparsers)`, imported only
when the first argument is `spark`, so the CLI works without pyspark. That function must add a `spark`
parser and `set_defaults(func=callable(args) -> int)`.

| module     | holds                                                                      |
|------------|----------------------------------------------------------------------------|
| `common`   | config and store resolution from the arguments, output (table, JSON, key-value) |
| `messages` | produce, pull, queries by key / id / offset / time, consumer offsets         |
| `admin`    | dump, check, recover (and index rebuild), clean, convert-cq                  |
| `mqadmin`  | mqadmin's store-side verbs by their own names and short flags (camelCase):  |
|            | message queries and prints (`mqadmin_msgs`), topic, consumer, broker and    |
|            | cleanup status (`mqadmin_status`)                                           |
| `scheduled`| `queryTimerMsg`: the 5.x timer store's messages and their state             |
| `batch`    | [5.x] batch consume queues: `batch-queues`, and `queryCq` on a batch topic   |

May import: the facade (`store.message_store`, `store.api`, `store.config`, `store.errors`),
`store.inspect`, `store.tools`, `store.check.run` (findings), `store.meta.lockfile` (to refuse while a
broker holds the store), the codecs, and `store.pipeline` only lazily for `spark`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from store.errors import StoreError

PROG = "rmqstore"


def _common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("store")
    group.add_argument("--store", metavar="DIR", help="store root directory (storePathRootDir)")
    group.add_argument("--config", metavar="FILE",
                       help="broker.conf / store.properties (default: DIR/../store.properties, "
                            "DIR/store.properties, else RocketMQ defaults)")
    mode = group.add_mutually_exclusive_group()
    mode.add_argument("--read-only", dest="read_only", action="store_const", const=True,
                      default=None, help="open read-only (the default for read commands)")
    mode.add_argument("--writable", dest="read_only", action="store_const", const=False,
                      help="open writable (runs recovery and may change files)")
    group.add_argument("--json", action="store_true", help="machine-readable output")
    return common


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    from store.cli.admin import add_admin_commands
    from store.cli.messages import add_message_commands
    parser = argparse.ArgumentParser(prog=PROG, description="RocketMQ store inspector: read, write "
                                     "and check RocketMQ broker store directories. Times are shown "
                                     "in UTC (yyyy-mm-dd hh:mm:ss.mmm UTC); --json keeps epoch ms.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _common_parser()
    add_message_commands(subparsers, common)
    add_admin_commands(subparsers, common)
    from store.cli.mqadmin import add_mqadmin_commands
    add_mqadmin_commands(subparsers, common)
    importlib.import_module("store.cli.scheduled").add_scheduled_commands(subparsers, common)
    importlib.import_module("store.cli.batch").add_batch_commands(subparsers, common)
    _add_spark(subparsers, argv or [])
    return parser


DISTRIBUTION = "rocketmq-store-inspector"


def _version() -> str:
    """The installed distribution's version (pyproject.toml), with the RocketMQ formats read."""
    from importlib import metadata
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    return f"{version} (RocketMQ store formats 4.9.x and 5.x)"


def _add_spark(subparsers, argv: list[str]) -> None:
    wanted = bool(argv) and argv[0] == "spark"
    if wanted and importlib.util.find_spec("store.pipeline.cli") is not None:
        try:
            module = importlib.import_module("store.pipeline.cli")
        except ImportError as error:          # pyspark (or another optional part) is missing
            reason = f"the Spark pipeline cannot be loaded: {error}"
        else:
            module.add_spark_subcommands(subparsers)
            return
    else:
        reason = "the Spark pipeline (store.pipeline.cli) is not available"
    placeholder = subparsers.add_parser("spark", help="Spark pipeline commands (needs pyspark)")
    placeholder.add_argument("rest", nargs=argparse.REMAINDER)
    placeholder.set_defaults(unavailable=reason)


def _run(args) -> int:
    if getattr(args, "unavailable", None):
        raise StoreError(args.unavailable)
    if getattr(args, "handler", None) is None:
        func = getattr(args, "func", None)     # spark subcommands
        assert callable(func), "a subcommand without a handler"
        return int(func(args) or 0)
    if args.read_only is None:
        args.read_only = getattr(args, "read_only_default", True)
    elif args.read_only and getattr(args, "writes", False) and not getattr(args, "explain", False):
        raise StoreError(f"{args.command} writes to the store; it cannot run --read-only")
    return args.handler(args)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 check found errors / a put failed, 2 error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    try:
        code = _run(args)
        sys.stdout.flush()             # a closed pipe shows here, inside the handler below
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except StoreError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        if isinstance(error, BrokenPipeError):
            return _quiet_broken_pipe()
        where = f" ({error.filename})" if error.filename else ""
        print(f"{PROG}: error: {error.strerror or error}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


def _quiet_broken_pipe() -> int:
    """The reader went away (`rmqstore ... | head`): stop quietly like a Unix tool. stdout is
    pointed at /dev/null so the interpreter's final flush does not complain again."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):     # stdout is not a real file (tests)
        pass
    return 141                         # 128 + SIGPIPE, what a shell reports for a killed writer


if __name__ == "__main__":
    sys.exit(main())
