"""The consume-queue store interface both backends implement (`store.consumequeue.factory` opens one).

A consume queue maps (topic, queue_id, queue_offset) to the position of a record in the commit log
(a 20-byte unit, see `store.codec.cq_unit`). Two backends answer the same protocol:

* `store.consumequeue.file.queue_store.FileConsumeQueueStore` (`storeType=default`): one directory of segment
  files per queue, `consumequeue/<topic>/<queueId>/<20-digit CQ byte offset>` (spec §4).
* `store.consumequeue.rocksdb.queue_store.RocksDBConsumeQueueStore` (`storeType=defaultRocksDB`, [5.x]): one
  RocksDB database in `consumequeue/` (spec §13).

Neither holds the message store: what a lookup needs from the commit log comes in as a callable
(`store_time_of(phy_offset, size) -> int`) or as a value (`commit_log_min_offset`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from store.codec.cq_unit import CQ_UNIT_SIZE, CqUnit
from store.consumequeue.time_search import BOUNDARIES, LOWER, NEAREST, UPPER
from store.errors import ConfigError

STORE_TYPE_FILE = "default"
STORE_TYPE_ROCKSDB = "defaultRocksDB"
STYLE_49 = "4.9"
STYLE_5X = "5.x"
CONSUME_QUEUE_DIR_NAME = "consumequeue"

__all__ = ["BOUNDARIES", "LOWER", "NEAREST", "UPPER", "ConsumeQueueSettings", "ConsumeQueueStore",
           "StoreTimeOf", "cq_file_size_bytes"]

StoreTimeOf = Callable[[int, int], int]


def cq_file_size_bytes(configured_size_bytes: int) -> int:
    """`getMappedFileSizeConsumeQueue`: the configured size rounded up to whole 20-byte units."""
    if configured_size_bytes <= 0:
        raise ConfigError(f"mappedFileSizeConsumeQueue must be positive, got {configured_size_bytes}")
    return -(-configured_size_bytes // CQ_UNIT_SIZE) * CQ_UNIT_SIZE


@dataclass(frozen=True)
class ConsumeQueueSettings:
    """The slice of StoreConfig the consume queues need.

    `root_dir` is the store root (the queues live in `<root_dir>/consumequeue`); `file_size_bytes` is
    `mappedFileSizeConsumeQueue` as configured (rounded up to whole units here); `style` "4.9" or
    "5.x" picks the min-offset correction rule and whether a zero-length last file is tolerated.
    """

    root_dir: str
    file_size_bytes: int = 300_000 * CQ_UNIT_SIZE
    store_type: str = STORE_TYPE_FILE
    read_only: bool = False
    style: str = STYLE_49

    def __post_init__(self):
        if self.store_type not in (STORE_TYPE_FILE, STORE_TYPE_ROCKSDB):
            raise ConfigError(f"storeType must be {STORE_TYPE_FILE!r} or {STORE_TYPE_ROCKSDB!r}, "
                              f"not {self.store_type!r}")
        if self.style not in (STYLE_49, STYLE_5X):
            raise ConfigError(f"style must be {STYLE_49!r} or {STYLE_5X!r}, not {self.style!r}")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.root_dir, CONSUME_QUEUE_DIR_NAME)

    @property
    def cq_file_size_bytes(self) -> int:
        return cq_file_size_bytes(self.file_size_bytes)

    @property
    def units_per_file(self) -> int:
        return self.cq_file_size_bytes // CQ_UNIT_SIZE


class ConsumeQueueStore(Protocol):
    """Every consume queue of a store (architecture.md)."""

    def load(self) -> None: ...

    def recover(self) -> int:
        """Recover every queue; the largest end (phy_offset + size) of a unit, -1 if none."""

    def put_units(self, requests: Sequence) -> None:
        """Write the units of dispatched NOT/COMMIT records (spec §4.4 rules)."""

    def queues(self) -> list[tuple[str, int]]: ...

    def get_min_offset(self, topic: str, queue_id: int) -> int: ...

    def get_max_offset(self, topic: str, queue_id: int) -> int: ...

    def get_max_phy_end(self, topic: str, queue_id: int) -> int: ...

    def get_unit(self, topic: str, queue_id: int, queue_offset: int) -> CqUnit | None: ...

    def get_units(self, topic: str, queue_id: int, queue_offset: int,
                  max_units: int) -> np.ndarray | None: ...

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int,
                                    boundary: str, store_time_of: StoreTimeOf) -> int: ...

    # The same with boundary "nearest", in one call (topic, queue_id, timestamp_ms, store_time_of),
    # or None: the file backend's hot path for the 4.9 default.
    nearest_by_time: Callable[[str, int, int, StoreTimeOf], int] | None

    def truncate_dirty(self, phy_offset: int) -> None: ...

    def correct_min_offset(self, commit_log_min_offset: int) -> None: ...

    def delete_expired(self, commit_log_min_offset: int) -> int: ...

    def flush(self, least_pages: int = 0) -> None: ...

    def refresh(self) -> None:
        """Read-only following: pick up queues, files and units a live writer added."""

    def close(self) -> None: ...


def check_boundary(boundary: str) -> None:
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {BOUNDARIES}, not {boundary!r}")
