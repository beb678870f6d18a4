"""Shared plumbing of the `rmqstore` commands: config and path resolution, opening, output."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import sys
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
        return StoreConfig.from_dict({}, store_path_root_dir=root)
    return StoreConfig.from_properties(config_path, store_path_root_dir=root)


@contextlib.contextmanager
def open_store(args, *, read_only: bool, must_exist: bool = True, start_services: bool = True):
    from store.message_store import MessageStore
    config = resolve_config(args, must_exist=must_exist)
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
    if value <= 0:
        return str(value)
    try:
        return datetime.fromtimestamp(value / 1000).isoformat(sep=" ", timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return str(value)


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


def print_table(rows: list[dict], columns, out=None) -> None:
    """Rows as an aligned text table (values longer than 60 characters are cut)."""
    out = out or sys.stdout
    if not rows:
        print("(none)", file=out)
        return
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), file=out)
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip(), file=out)


def _cell(value) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", "\\n").replace("\x01", "=").replace("\x02", ";")
    return text if len(text) <= 60 else text[:57] + "..."


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


__all__ = ["ConfigError", "UsageError", "message_dict", "message_row", "open_store",
           "parse_property", "parse_time_ms", "print_json", "print_kv", "print_table",
           "resolve_config"]
