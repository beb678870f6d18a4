"""Shared plumbing of the `rmqstore` commands: config and path resolution, opening, output."""

from __future__ import annotations

import base64
import contextlib
import difflib
import json
import os
import re
import shutil
import sys
import textwrap
from datetime import datetime

from store.errors import ConfigError, StoreError


class UsageError(StoreError):
    """Bad command-line input found before anything was opened (exit code 2)."""


# -- config and paths -----------------------------------------------------------------------------

def resolve_config(args, *, must_exist: bool = True):
    """StoreConfig for --store/--config, with the root set to the store's real path.

    Without --config: DIR/../store.properties, then DIR/store.properties, then the defaults.
    """
    from store.config import StoreConfig
    config_path = None
    if args.config is not None:
        config_path = os.path.realpath(args.config)
        if not os.path.isfile(config_path):
            raise UsageError(f"config file {args.config!r} does not exist")
    store_dir = args.store
    if store_dir is None:
        if config_path is None:
            raise UsageError("give the store directory with --store DIR")
        store_dir = StoreConfig.from_properties(config_path).store_path_root_dir
    root = os.path.realpath(store_dir)
    if os.path.exists(root) and not os.path.isdir(root):
        raise UsageError(f"--store {store_dir!r} is not a directory")
    if must_exist and not os.path.isdir(root):
        raise UsageError(f"store directory {store_dir!r} does not exist")
    if not os.path.isdir(root) and not os.path.isdir(os.path.dirname(root)):
        raise UsageError(f"the parent of --store {store_dir!r} does not exist")
    if config_path is None:
        for candidate in (os.path.join(os.path.dirname(root), "store.properties"),
                          os.path.join(root, "store.properties")):
            if os.path.isfile(candidate):
                config_path = candidate
                break
    if config_path is None:
        config = StoreConfig.from_dict({}, store_path_root_dir=root)
    else:
        config = StoreConfig.from_properties(config_path, store_path_root_dir=root)
        warn_misspelled_keys(config, config_path)
    if must_exist:
        refuse_non_store(config, store_dir)
    return config


def refuse_short_segments(config) -> None:
    """The engine (like MappedFileQueue.load) refuses a segment of the wrong length; say which one
    and the way forward before it does."""
    from store.tools.check_directory import config_mismatch, short_segments
    short = short_segments(config)
    mismatch = config_mismatch(config, short) if short else None
    if mismatch:
        raise StoreError(f"{config.store_path_root_dir}: {mismatch}")
    if short:
        path, size = short[0]
        more = f" (and {len(short) - 1} more)" if len(short) > 1 else ""
        raise StoreError(f"{path} is {size} bytes, not the segment size "
                         f"{config.mapped_file_size_commit_log}{more}: RocketMQ refuses to load "
                         f"it; pad it with: rmqstore recover --pad-truncated --store "
                         f"{config.store_path_root_dir}")


# Entries of a store root (spec §1): any one of them makes a directory a store. A DLedger broker keeps
# its log under dledger-<selfId>/ instead of commitlog/, and a fresh store may hold only a lock.
STORE_ENTRIES = ("commitlog", "consumequeue", "index", "checkpoint", "abort", "lock", "config",
                 "timerlog", "timerwheel", "timercheck", "timermetrics", "rocksdb_consumequeue")
_SEGMENT_NAME = re.compile(r"\d{20}")


def refuse_non_store(config, given: str) -> None:
    """UsageError unless the root holds a commit log or another store entry (see STORE_ENTRIES)."""
    root = config.store_path_root_dir
    if any(os.path.isdir(d) for d in config.commit_log_dirs):
        return
    try:
        names = os.listdir(root)
    except OSError:
        return                          # resolve_config already said it does not exist
    if any(n in STORE_ENTRIES or n.startswith("dledger") for n in names):
        return
    if any(_SEGMENT_NAME.fullmatch(n) for n in names):
        hint = (f"it holds segment files: it looks like a commit-log directory, give its parent "
                f"(--store {os.path.dirname(root)})")
    else:
        hint = "no commitlog/, consumequeue/, index/ or checkpoint"
    raise UsageError(f"--store {given!r} is not a RocketMQ store: {hint}")


_WARNED_KEYS: set = set()


def warn_misspelled_keys(config, config_path: str) -> None:
    """One stderr line per unknown key that is close to a known one (`mappedFileSizeComitLog`).
    Keys close to none are left alone: broker.conf holds many broker (not store) settings."""
    from store.config_table import PROPERTIES
    known = [rocketmq for rocketmq, _ in PROPERTIES.values()] + ["brokerIP1", "listenPort"]
    for key in config.unknown_keys():
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
        if close and (config_path, key) not in _WARNED_KEYS:
            _WARNED_KEYS.add((config_path, key))
            print(f"rmqstore: warning: {config_path}: unknown key {key!r} is ignored; did you "
                  f"mean {close[0]!r}?", file=sys.stderr)


@contextlib.contextmanager
def open_store(args, *, read_only: bool, must_exist: bool = True, start_services: bool = True):
    from store.message_store import MessageStore
    config = resolve_config(args, must_exist=must_exist)
    refuse_short_segments(config)
    store = MessageStore.open(config, read_only=read_only, start_services=start_services)
    try:
        yield store
    finally:
        store.close()


# -- parsing helpers ------------------------------------------------------------------------------

_MQADMIN_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})")


def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch, from ms digits, ISO 8601 (local time unless it has a zone)
    or mqadmin's `yyyy-MM-dd#HH:mm:ss:SSS`."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    match = _MQADMIN_TIME.fullmatch(text)
    try:
        if match:
            parts = [int(g) for g in match.groups()]
            moment = datetime(*parts[:6], parts[6] * 1000)
        else:
            moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"cannot read {text!r} as a time (ms since epoch, ISO 8601 or "
                         f"yyyy-MM-dd#HH:mm:ss:SSS)") from None
    return int(moment.timestamp() * 1000)


def parse_property(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise UsageError(f"--property wants name=value, got {text!r}")
    return name, value


def format_time_ms(value: int) -> str:
    """The one form times take in human output: UTC with milliseconds and the zone, e.g.
    `2026-11-26 08:22:40.123 UTC` (the check's findings use the same `utc_text`); JSON output
    keeps the raw ms. 0 / negative stay numbers."""
    from store.check.findings import utc_text
    return utc_text(value)


def validate_topic_arg(topic: str | None) -> None:
    """Every command's topic argument obeys RocketMQ's topic rule (no `/`, `..`, spaces): a topic
    name becomes a directory name under consumequeue/."""
    from store.codec.topic import validate_topic
    if topic is not None:
        validate_topic(topic)


# -- output ---------------------------------------------------------------------------------------

def message_dict(record, *, with_body: bool = True) -> dict:
    """A decoded record as plain JSON-friendly values (body as UTF-8 text or base64)."""
    out = {
        "msgId": record.msg_id, "topic": record.topic, "queueId": record.queue_id,
        "queueOffset": record.queue_offset, "commitLogOffset": record.commit_log_offset,
        "storeSize": record.store_size, "bodyCRC": record.body_crc, "flag": record.flag,
        "sysFlag": record.sys_flag, "bornTimestamp": record.born_timestamp,
        "bornHost": record.born_host, "storeTimestamp": record.store_timestamp,
        "storeHost": record.store_host, "reconsumeTimes": record.reconsume_times,
        "preparedTransactionOffset": record.prepared_transaction_offset,
        "tags": record.tags, "keys": record.keys, "uniqKey": record.uniq_key,
        "properties": dict(record.properties), "bodySize": len(record.body),
    }
    if with_body:
        try:
            out["body"] = record.body.decode("utf-8")
        except UnicodeDecodeError:
            out["bodyBase64"] = base64.b64encode(record.body).decode("ascii")
    return out


MESSAGE_COLUMNS = ("msgId", "topic", "queueId", "queueOffset", "commitLogOffset", "storeTime",
                   "tags", "keys", "uniqKey", "bodySize")


def message_row(record) -> dict:
    row = message_dict(record, with_body=False)
    row["storeTime"] = format_time_ms(record.store_timestamp)
    return row


def output_width(out=None) -> int | None:
    """Characters per line: $COLUMNS, else the terminal's width, else None (a pipe or a file:
    lines are never wrapped, like `ls`)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = out or sys.stdout
    try:
        if stream.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):
        pass
    return None


WRAP_MIN_WIDTH = 24


def print_table(rows: list[dict], columns, out=None, *, wrap=(), width: int | None = None) -> None:
    """Rows as an aligned text table that fits the output width (see `output_width`).

    No value is ever cut. Columns in `wrap` (long text such as a finding's message) are wrapped onto
    continuation lines at word boundaries to fit; a long word (a path) stays whole. When even that
    cannot fit, each row is printed as `column: value` lines instead.
    """
    out = out or sys.stdout
    if not rows:
        print("(none)", file=out)
        return
    width = width if width is not None else output_width(out)
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    total = sum(widths) + 2 * (len(columns) - 1)
    if width is not None and total > width:
        wrapped = [i for i, c in enumerate(columns) if c in wrap]
        fixed = sum(w for i, w in enumerate(widths) if i not in wrapped) + 2 * (len(columns) - 1)
        room = width - fixed
        if not wrapped or room < WRAP_MIN_WIDTH * len(wrapped):
            _print_records(columns, cells, out, width, wrap)
            return
        share = room // len(wrapped)
        for i in wrapped:
            widths[i] = min(widths[i], share)
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), file=out)
    for r in cells:
        parts = [textwrap.wrap(v, w, break_long_words=False, break_on_hyphens=False) or [""]
                 if len(v) > w else [v] for v, w in zip(r, widths)]
        for line in range(max(len(p) for p in parts)):
            print("  ".join((p[line] if line < len(p) else "").ljust(w)
                            for p, w in zip(parts, widths)).rstrip(), file=out)


def _print_records(columns, cells, out, width: int, wrap) -> None:
    """One `column  value` line per cell, rows apart; values of `wrap` columns wrapped to fit."""
    label = max(len(c) for c in columns)
    room = max(WRAP_MIN_WIDTH, width - label - 2)
    for number, r in enumerate(cells):
        if number:
            print(file=out)
        for c, v in zip(columns, r):
            lines = textwrap.wrap(v, room, break_long_words=False, break_on_hyphens=False) \
                if c in wrap and len(v) > room else [v]
            for index, line in enumerate(lines or [""]):
                print(f"{(c if index == 0 else '').ljust(label)}  {line}".rstrip(), file=out)


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return text.replace("\n", "\\n").replace("\x01", "=").replace("\x02", ";")


def print_json(value, out=None) -> None:
    json.dump(value, out or sys.stdout, indent=2, sort_keys=False, default=_json_default)
    print(file=out or sys.stdout)


def _json_default(value):
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if hasattr(value, "value"):
        return value.value
    if hasattr(value, "__dict__"):
        return vars(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


def print_kv(pairs: dict, out=None) -> None:
    width = max((len(k) for k in pairs), default=0)
    for key, value in pairs.items():
        print(f"{key.ljust(width)}  {value}", file=out or sys.stdout)


__all__ = ["ConfigError", "UsageError", "format_time_ms", "message_dict", "message_row",
           "open_store", "parse_property", "parse_time_ms", "print_json", "print_kv", "print_table",
           "resolve_config", "validate_topic_arg"]
