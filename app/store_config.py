"""Which `StoreConfig` opens a store directory the user picked.

A store's geometry (segment sizes, index slots) is not written in the store itself. In order:
1. a properties file the user named;
2. `store.properties` (or `broker.conf`) inside the store root or next to it (the fixtures' layout);
3. inference from the files: the commit log and consume queue file sizes, and the index file size
   assuming RocketMQ's 1:4 ratio of hash slots to entries (5,000,000 : 20,000,000 by default).
`describe` says which source was used, so the page can show it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from store.config import StoreConfig

CONFIG_NAMES = ("store.properties", "broker.conf")
DEFAULT_SLOTS = 5_000_000
DEFAULT_ENTRIES = 20_000_000


@dataclass(frozen=True)
class ResolvedConfig:
    config: StoreConfig
    source: str          # a sentence: where the values came from


def find_properties(root: str) -> str | None:
    for directory in (root, os.path.dirname(root)):
        for name in CONFIG_NAMES:
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                return path
    return None


def _first_file_size(directory: str) -> int | None:
    try:
        names = sorted(n for n in os.listdir(directory) if n.isdigit())
    except OSError:
        return None
    sizes = [os.path.getsize(os.path.join(directory, n)) for n in names[:2]]
    sizes = [s for s in sizes if s > 0]
    return sizes[0] if sizes else None


def _first_cq_file_size(cq_root: str) -> int | None:
    try:
        topics = sorted(os.listdir(cq_root))[:20]
    except OSError:
        return None
    for topic in topics:
        topic_dir = os.path.join(cq_root, topic)
        if not os.path.isdir(topic_dir):
            continue
        for queue in sorted(os.listdir(topic_dir))[:20]:
            size = _first_file_size(os.path.join(topic_dir, queue))
            if size:
                return size
    return None


def infer_geometry(root: str) -> dict[str, int]:
    """Field overrides read off the files (only the ones that could be inferred)."""
    found: dict[str, int] = {}
    size = _first_file_size(os.path.join(root, "commitlog"))
    if size:
        found["mapped_file_size_commit_log"] = size
    size = _first_cq_file_size(os.path.join(root, "consumequeue"))
    if size:
        found["mapped_file_size_consume_queue"] = size
    size = _first_file_size(os.path.join(root, "index"))
    if size and size != 40 + 4 * DEFAULT_SLOTS + 20 * DEFAULT_ENTRIES and (size - 40) % 84 == 0:
        slots = (size - 40) // 84
        found["max_hash_slot_num"] = slots
        found["max_index_num"] = 4 * slots
    return found


def resolve_config(root: str, properties_path: str | None = None) -> ResolvedConfig:
    """The config to open `root` with (StoreConfig raises ConfigError for bad values)."""
    path = properties_path or find_properties(root)
    if path is not None:
        config = StoreConfig.from_properties(path, store_path_root_dir=root)
        return ResolvedConfig(config, f"read from {path}")
    overrides = infer_geometry(root)
    config = StoreConfig.from_dict({}, store_path_root_dir=root, **overrides)
    inferred = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "nothing"
    return ResolvedConfig(config, f"no store.properties found; inferred from the files: {inferred}")
