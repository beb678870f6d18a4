"""Finding the files of a store directory (spec §1) without opening the store.

The pipeline reads files directly, never through `MessageStore`, so it can run on executors that only
see the directory (a shared file system) and on stores that a broker still has open. Only names and
sizes are read here; nothing is mapped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from store.errors import ConfigError

_SEGMENT_NAME = re.compile(r"^\d{20}$")
_INDEX_NAME = re.compile(r"^\d{17}$")

DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 20_000_000


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One commit-log segment: `file_from_offset` (from its name), its path and size."""

    path: str
    file_from_offset: int
    size_bytes: int
    dledger: bool = False       # a DLedger data file: records sit inside entries (dledger_scan)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True, slots=True)
class QueueFiles:
    """The consume-queue files of one (topic, queue_id), in name order."""

    topic: str
    queue_id: int
    files: tuple[SegmentFile, ...]

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)


def commit_log_dir(store_dir: str | os.PathLike) -> Path:
    return Path(store_dir) / "commitlog"


def list_segments(directory: str | os.PathLike) -> list[SegmentFile]:
    """Files named by a 20-digit start offset in `directory`, ascending; missing directory -> []."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for entry in os.scandir(directory):
        if entry.is_file() and _SEGMENT_NAME.match(entry.name):
            found.append(SegmentFile(entry.path, int(entry.name), entry.stat().st_size))
    found.sort(key=lambda s: s.file_from_offset)
    return found


def list_commit_log(store_dir: str | os.PathLike) -> list[SegmentFile]:
    """Commit-log segments of a store root (`<root>/commitlog`); for a DLedger store (no segment
    there, one `dledger-*/data`), its data files, marked `dledger`."""
    segments = list_segments(commit_log_dir(store_dir))
    if segments:
        return segments
    from store.dledger.layout import find_data_dir
    data_dir = find_data_dir(os.fspath(store_dir))
    if data_dir is None:
        return []
    return [SegmentFile(s.path, s.file_from_offset, s.size_bytes, True)
            for s in list_segments(data_dir)]


def list_queues(store_dir: str | os.PathLike, topics: set[str] | None = None) -> list[QueueFiles]:
    """Every `consumequeue/<topic>/<queueId>/` with its files; non-integer queue names are skipped."""
    root = Path(store_dir) / "consumequeue"
    if not root.is_dir():
        return []
    queues = []
    for topic_entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not topic_entry.is_dir() or (topics is not None and topic_entry.name not in topics):
            continue
        for queue_entry in os.scandir(topic_entry.path):
            if queue_entry.is_dir() and queue_entry.name.isdigit():
                files = tuple(list_segments(queue_entry.path))
                queues.append(QueueFiles(topic_entry.name, int(queue_entry.name), files))
    queues.sort(key=lambda q: (q.topic, q.queue_id))
    return queues


def list_index_files(store_dir: str | os.PathLike) -> list[str]:
    """Index file paths (`index/yyyyMMddHHmmssSSS`) in name order, which is creation order."""
    root = Path(store_dir) / "index"
    if not root.is_dir():
        return []
    return sorted(e.path for e in os.scandir(root) if e.is_file() and _INDEX_NAME.match(e.name))


def read_store_properties(store_dir: str | os.PathLike) -> dict[str, str]:
    """`key=value` pairs of a `store.properties` or `broker.conf` in the store root or its parent.

    RocketMQ does not record the index geometry or segment sizes inside the store, so the config a store
    was written with is the only exact source; callers fall back to inference when there is none.
    """
    for folder in (Path(store_dir), Path(store_dir).parent):
        for name in ("store.properties", "broker.conf", "broker.properties"):
            path = folder / name
            if path.is_file():
                return _parse_properties_text(path.read_text(encoding="utf-8", errors="replace"))
    return {}


def _parse_properties_text(text: str) -> dict[str, str]:
    result = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if sep:
            result[key.strip()] = value.strip()
    return result


def config_int(config: dict[str, str], name: str, default: int) -> int:
    value = config.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError as error:
        raise ConfigError(f"{name}={value!r} is not an integer") from error
