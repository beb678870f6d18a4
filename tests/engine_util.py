"""Helpers for engine tests: a small-segment config and a deterministic clock."""

from __future__ import annotations

import itertools
import threading

from store import StoreConfig

STORE_TYPES = ("default", "defaultRocksDB")


class FakeClock:
    """A millisecond clock that only moves when told to (or by `step_ms` per reading)."""

    def __init__(self, start_ms: int = 1_700_000_000_000, step_ms: int = 0):
        self.now = start_ms
        self.step_ms = step_ms
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            value = self.now
            self.now += self.step_ms
            return value

    def advance(self, ms: int) -> None:
        with self._lock:
            self.now += ms


def small_config(root, store_type: str = "default", **overrides) -> StoreConfig:
    """Tiny segments so tests roll files: 64 KiB commit log, 100-unit CQ files, small index."""
    values = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=65536,
        mapped_file_size_consume_queue=2000,
        max_hash_slot_num=64,
        max_index_num=256,
        store_type=store_type,
    )
    values.update(overrides)
    return StoreConfig.from_dict({}, **values)


_counter = itertools.count()


def unique_topic(prefix: str = "T") -> str:
    return f"{prefix}{next(_counter)}"
