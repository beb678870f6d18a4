"""The broker's JSON config files under `<root>/config` (spec §7) and atomic file replacement.

`JsonConfigFile` is one file with RocketMQ's `ConfigManager` semantics:

* load: read `<file>`; if it is missing, empty or does not decode, read `<file>.bak`; if that is missing
  or empty too, start empty. A `.bak` that exists but does not decode raises CorruptDataError (the
  broker's `loadBak` fails the start-up then). Loading never writes.
* persist (4.9.7 `MixAll.string2File`): the previous content of `<file>` is copied to `<file>.bak`, then
  the new text replaces `<file>` atomically: `<file>.tmp` written, fsynced, `os.replace`d, directory
  fsynced. 5.x brokers overwrite in place; we always use the atomic form, which 5.x reads the same.

`ConsumerOffsetManager` (consumerOffset.json) and `TopicConfigManager` (topics.json) sit on top; their
JSON shapes are spec §7.1 and §7.2, their whitespace is `store.codec.fastjson`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from store.codec import fastjson
from store.codec.javahash import java_string_hash
from store.errors import ConfigError, CorruptDataError, ReadOnlyStoreError
from store.mappedfile.mapped_file import fsync_directory, make_directories_durable

STYLES = ("4.9", "5.x", "auto")
CONSUMER_OFFSET_FILE = "consumerOffset.json"
TOPICS_FILE = "topics.json"


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------------------- atomic writes

def atomic_write_bytes(path: str | os.PathLike, data: bytes, tmp_path: str | None = None) -> None:
    """Replace `path` with `data`: write `<path>.tmp`, fsync, os.replace, fsync the directory."""
    path = os.fspath(path)
    tmp = tmp_path or path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_directory(os.path.dirname(path))


# ------------------------------------------------------------------------------------- JsonConfigFile

class JsonConfigFile:
    """One config JSON file with its `.bak` fallback. `source` says where the last load came from:
    "file", "bak" or "empty"; `warnings` lists why the main file was skipped."""

    def __init__(self, path: str | os.PathLike, *, read_only: bool):
        self.path = os.fspath(path)
        self.bak_path = self.path + ".bak"
        self.tmp_path = self.path + ".tmp"
        self.read_only = read_only
        self.source: str | None = None
        self.warnings: list[str] = []

    @staticmethod
    def _read(path: str) -> str | None:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptDataError(path, exc.start, "config file is not UTF-8") from None

    def load(self, decode: Callable[[Any], Any] = lambda obj: obj) -> Any:
        """Parse the file (or its .bak) with fastjson and pass the value through `decode`.

        `decode` may raise CorruptDataError/ConfigError to reject a shape it does not understand, which
        sends the load to the .bak like a syntax error does. Returns None when both files are missing or
        empty.
        """
        self.warnings = []
        try:
            text = self._read(self.path)
            if text:
                result = decode(fastjson.loads(text))
                self.source = "file"
                return result
            self.warnings.append(f"{self.path} is {'missing' if text is None else 'empty'}")
        except (CorruptDataError, ConfigError) as exc:
            self.warnings.append(f"{self.path} does not load: {exc}")
        text = self._read(self.bak_path)
        if not text:
            self.source = "empty"
            return None
        try:
            result = decode(fastjson.loads(text))
        except CorruptDataError as exc:
            raise CorruptDataError(self.bak_path, exc.position, exc.reason) from None
        except ConfigError as exc:
            raise CorruptDataError(self.bak_path, 0, str(exc)) from None
        self.source = "bak"
        return result

    def persist(self, text: str) -> None:
        """Keep the current content in `.bak`, then replace the file atomically with `text`."""
        if self.read_only:
            raise ReadOnlyStoreError(f"config file {self.path} is read-only")
        make_directories_durable(os.path.dirname(self.path) or ".")   # config/ survives a cut
        try:
            with open(self.path, "rb") as f:
                previous = f.read()
        except FileNotFoundError:
            previous = None
        if previous is not None:
            atomic_write_bytes(self.bak_path, previous, self.bak_path + ".tmp")
        atomic_write_bytes(self.path, text.encode("utf-8"), self.tmp_path)


# ------------------------------------------------------------------------------- Java ordering helper

def java_hash_order(keys: list[str], initial_capacity: int = 16) -> list[str]:
    """The iteration order of a java.util.HashMap/HashSet filled with `keys` in this order.

    Bucket = (h ^ h >>> 16) & (table_size - 1); within a bucket insertion order (resizes keep it).
    Tree bins (>= 8 colliding keys) are not modelled.
    """
    table_size = 1
    while table_size < initial_capacity:
        table_size *= 2
    while len(keys) > table_size * 0.75:
        table_size *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table_size - 1)
    return sorted(keys, key=bucket)


# ------------------------------------------------------------------------------------------ DataVersion

@dataclass
class DataVersion:
    """RocketMQ `DataVersion`: `counter` bumps on every change, `timestamp` (ms) of the last change;
    [5.x] `state_version` (written as `stateVersion`)."""

    counter: int = 0
    timestamp: int = 0
    state_version: int = 0

    def next_version(self, now_ms: int) -> None:
        self.counter += 1
        self.timestamp = now_ms

    def to_json(self, style: str) -> dict:
        if style == "5.x":
            return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: Any) -> DataVersion:
        if not isinstance(obj, dict):
            raise CorruptDataError(None, 0, "dataVersion is not an object")
        values = [obj.get(name, 0) for name in ("counter", "timestamp", "stateVersion")]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise CorruptDataError(None, 0, f"dataVersion members are not integers: {obj!r}")
        return cls(*values)


def _check_style(style: str) -> str:
    if style not in STYLES:
        raise ConfigError(f"style {style!r} is not one of {STYLES}")
    return style


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise CorruptDataError(None, 0, f"{what} is a boolean, not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit() and value.isascii():
        return int(value)   # quoted integer keys, as a lenient reader accepts them
    raise CorruptDataError(None, 0, f"{what} is not an integer: {value!r}")


def _extra_members(obj: dict, known: tuple[str, ...]) -> dict:
    return {key: value for key, value in obj.items() if key not in known}


def _sorted_members(members: dict, extra: dict) -> dict:
    """Bean members in fastjson's alphabetical order; members we do not model are kept."""
    merged = {**extra, **members}
    return {key: merged[key] for key in sorted(merged, key=str)}


# ---------------------------------------------------------------------------------- consumer offsets

class ConsumerOffsetManager:
    """`consumerOffset.json`: committed consumer offsets, `"topic@group" -> {queue_id: queue_offset}`.

    `style` "4.9" writes only `offsetTable`; "5.x" adds `dataVersion` and `groupTopicMap` (derived,
    ignored on load); "auto" writes what was loaded (5.x if the file had a dataVersion, else 4.9).
    `offsetTable` is written in insertion order (load order, then new keys); `groupTopicMap` in Java
    HashMap order, as the broker builds it fresh on every persist.
    """

    def __init__(self, config_dir: str | os.PathLike, *, read_only: bool, style: str = "4.9",
                 clock_ms: Callable[[], int] = _wall_clock_ms):
        self.style = _check_style(style)
        self.read_only = read_only
        self.clock_ms = clock_ms
        self.file = JsonConfigFile(os.path.join(os.fspath(config_dir), CONSUMER_OFFSET_FILE),
                                   read_only=read_only)
        self._table: dict[str, dict[int, int]] = {}
        self.extra_members: dict[str, Any] = {}   # top-level members we do not model, e.g. lmqOffsetTable
        self.data_version = DataVersion(timestamp=clock_ms())
        self._loaded_style: str | None = None

    @staticmethod
    def _decode(obj: Any) -> tuple[dict[str, dict[int, int]], DataVersion | None, dict]:
        if not isinstance(obj, dict):
            raise CorruptDataError(None, 0, "consumerOffset.json is not an object")
        raw_table = obj.get("offsetTable")
        raw_table = {} if raw_table is None else raw_table
        if not isinstance(raw_table, dict):
            raise CorruptDataError(None, 0, "offsetTable is not an object")
        table: dict[str, dict[int, int]] = {}
        for key, queues in raw_table.items():
            if not isinstance(key, str) or not isinstance(queues, dict):
                raise CorruptDataError(None, 0, f"offsetTable entry {key!r} is malformed")
            table[key] = {_as_int(q, f"queue id of {key}"): _as_int(o, f"offset of {key}")
                          for q, o in queues.items()}
        version = DataVersion.from_json(obj["dataVersion"]) if "dataVersion" in obj else None
        return table, version, _extra_members(obj, ("dataVersion", "groupTopicMap", "offsetTable"))

    def load(self) -> dict[str, dict[int, int]]:
        """Load the file (or its .bak); a missing file gives an empty table. Never writes."""
        loaded = self.file.load(self._decode)
        self._table, version, self.extra_members = loaded if loaded is not None else ({}, None, {})
        if version is not None:
            self.data_version = version
        self._loaded_style = "5.x" if version is not None else ("4.9" if loaded is not None else None)
        return self.table()

    @property
    def effective_style(self) -> str:
        if self.style != "auto":
            return self.style
        return self._loaded_style or "4.9"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record `offset` (the next queue_offset the group will consume) in memory."""
        if self.read_only:
            raise ReadOnlyStoreError("consumer offsets are read-only")
        self._table.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if the group never committed on this queue."""
        return self._table.get(f"{topic}@{group}", {}).get(queue_id, -1)

    def table(self) -> dict[str, dict[int, int]]:
        """A copy of the table, `{"topic@group": {queue_id: offset}}`."""
        return {key: dict(queues) for key, queues in self._table.items()}

    def group_topic_map(self) -> dict[str, list[str]]:
        """[5.x] group -> topics, derived from the keys as `getGroupTopicMap` does (Java `split("@")`
        with exactly two parts; other keys, such as `topic@group@broadcast`, are left out)."""
        groups: dict[str, list[str]] = {}
        for key in self._table:
            parts = key.split("@")
            while parts and parts[-1] == "":
                parts.pop()   # Java's split drops trailing empty strings
            if len(parts) == 2:
                topics = groups.setdefault(parts[1], [])
                if parts[0] not in topics:
                    topics.append(parts[0])
        return {group: java_hash_order(groups[group]) for group in java_hash_order(list(groups))}

    def encode(self) -> str:
        """The file text persist() writes."""
        offsets = {key: dict(queues) for key, queues in self._table.items()}
        if self.effective_style == "5.x":
            obj = {"dataVersion": self.data_version.to_json("5.x"),
                   "groupTopicMap": self.group_topic_map(), "offsetTable": offsets}
        else:
            obj = {"offsetTable": offsets}
        return fastjson.dumps(_sorted_members(obj, self.extra_members))

    def persist(self) -> None:
        self.file.persist(self.encode())


# ------------------------------------------------------------------------------------------- topics

