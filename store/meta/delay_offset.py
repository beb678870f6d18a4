"""`config/delayOffset.json`: how far each delay level has been delivered (spec §7.4).

RocketMQ 4.9.7's `ScheduleMessageService` is a `ConfigManager`; its `offsetTable` (a
`ConcurrentHashMap<Integer, Long>` built with capacity 32) is written through
`DelayOffsetSerializeWrapper` (one member, `offsetTable`) by `ConfigManager.persist`, i.e.
`encode(true)` = fastjson with PrettyFormat, then `MixAll.string2File` (old content to `.bak`). The map
goes out in the ConcurrentHashMap's iteration order with bare integer keys:

    {
    <TAB>"offsetTable":{1:5,2:0,3:12
    <TAB>}
    }

and an empty table is `{\\n\\t"offsetTable":{}\\n}` (the real 4.9.7 fixtures hold exactly that).

| member        | type                 | meaning                                                          |
|---------------|----------------------|------------------------------------------------------------------|
| `offsetTable` | int level -> long    | the next queue offset to deliver in queue `level - 1` of          |
|               |                      | `SCHEDULE_TOPIC_XXXX` (1-based level)                             |
| `dataVersion` | object ([5.x] broker) | kept as read, never interpreted                                  |

A level appears only once something of it was delivered (`ScheduleMessageService.updateOffset` runs
after a successful put); levels the configuration no longer has are kept, as RocketMQ keeps them.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from store.codec import fastjson
from store.errors import CorruptDataError
from store.meta.config_files import JsonConfigFile

DELAY_OFFSET_FILE = "delayOffset.json"
_CHM_INITIAL_TABLE = 64          # new ConcurrentHashMap(32): tableSizeFor(1 + 32 / 0.75) = 64
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def concurrent_hash_map_order(keys: list[int]) -> list[int]:
    """Integer keys (distinct, in insertion order) in the iteration order of RocketMQ's offsetTable.

    A ConcurrentHashMap visits bins 0..n-1; an Integer's hash is its value, spread as
    `(h ^ h >>> 16) & 0x7fffffff`; the table (64 bins for capacity 32) doubles when the count reaches
    3/4 of it. Inside one bin keys keep insertion order (UNVERIFIED after a resize; levels 1..63 never
    share a bin).
    """
    table = _CHM_INITIAL_TABLE
    while len(keys) >= table * 3 // 4:
        table *= 2

    def spread(key: int) -> int:
        h = key & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 0x7FFFFFFF

    position = {key: index for index, key in enumerate(keys)}
    return sorted(keys, key=lambda key: (spread(key) & (table - 1), position[key]))


def _as_level(key: Any) -> int:
    # fastjson reads a bare key as an Integer; a quoted "3" converts to the Integer key as well.
    if isinstance(key, str) and key.lstrip("-").isdigit():
        key = int(key)
    if not isinstance(key, int) or isinstance(key, bool) or not _INT32_MIN <= key <= _INT32_MAX:
        raise CorruptDataError(None, 0, f"offsetTable key {key!r} is not a 32-bit delay level")
    return key


def _as_offset(level: int, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not _INT64_MIN <= value <= _INT64_MAX:
        raise CorruptDataError(None, 0, f"offsetTable value of level {level} is not a long: {value!r}")
    return value


class DelayOffsetTable:
    """The delay-level offset table and its file. Thread-safe; loading never writes."""

    def __init__(self, config_dir: str | os.PathLike, *, read_only: bool):
        self.file = JsonConfigFile(os.path.join(os.fspath(config_dir), DELAY_OFFSET_FILE),
                                   read_only=read_only)
        self._lock = threading.Lock()
        self._table: dict[int, int] = {}
        self.extra_members: dict[str, Any] = {}

    @staticmethod
    def _decode(obj: Any) -> tuple[dict[int, int], dict[str, Any]]:
        if not isinstance(obj, dict):
            raise CorruptDataError(None, 0, "delayOffset.json is not an object")
        raw = obj.get("offsetTable")
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            raise CorruptDataError(None, 0, "offsetTable is not an object")
        table: dict[int, int] = {}
        for key, value in raw.items():
            level = _as_level(key)
            table[level] = _as_offset(level, value)
        extra = {key: value for key, value in obj.items() if key != "offsetTable"}
        return table, extra

    def load(self) -> dict[int, int]:
        """Read the file (or its .bak); a missing file is an empty table. CorruptDataError names the
        file when neither decodes."""
        try:
            loaded = self.file.load(self._decode)
        except CorruptDataError as error:
            raise CorruptDataError(error.path or self.file.path, error.position, error.reason) from None
        table, extra = loaded if loaded is not None else ({}, {})
        with self._lock:
            self._table = table
            self.extra_members = extra
        return dict(table)

    def get(self, level: int, default: int | None = None) -> int | None:
        with self._lock:
            return self._table.get(level, default)

    def set(self, level: int, queue_offset: int) -> None:
        """RocketMQ's `updateOffset`: the next queue offset to deliver for `level`."""
        with self._lock:
            self._table[level] = queue_offset

    def table(self) -> dict[int, int]:
        """A copy, level -> next queue offset, in insertion order."""
        with self._lock:
            return dict(self._table)

    def encode(self) -> str:
        """The text `persist` writes, byte for byte what 4.9.7's `encode(true)` gives."""
        with self._lock:
            table = dict(self._table)
            extra = dict(self.extra_members)
        ordered = {level: table[level] for level in concurrent_hash_map_order(list(table))}
        members = {**extra, "offsetTable": ordered}
        return fastjson.dumps({key: members[key] for key in sorted(members)})

    def persist(self) -> None:
        """Old file to `.bak`, then the new text atomically (`ConfigManager.persist`)."""
        self.file.persist(self.encode())
