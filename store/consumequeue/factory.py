"""Which consume-queue backend a store directory holds, and opening it.

Kept apart from `store.consumequeue.base` because it imports both backends, and they import `base`.
"""

from __future__ import annotations

import os

from store.consumequeue.base import (STORE_TYPE_FILE, STORE_TYPE_ROCKSDB, ConsumeQueueSettings,
                                     ConsumeQueueStore)
from store.errors import ConfigError

__all__ = ["detect_consume_queue_layout", "open_consume_queue_store"]


def detect_consume_queue_layout(root_dir: str) -> str | None:
    """What `<root>/consumequeue` holds on disk: "defaultRocksDB" (a RocksDB database), "default"
    (topic directories) or None (missing or empty)."""
    directory = os.path.join(root_dir, "consumequeue")
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    if "CURRENT" in names:
        return STORE_TYPE_ROCKSDB
    if any(os.path.isdir(os.path.join(directory, name)) for name in names):
        return STORE_TYPE_FILE
    return None


def open_consume_queue_store(settings: ConsumeQueueSettings) -> ConsumeQueueStore:
    """The backend `settings.store_type` names (not loaded yet: call load() then recover()).

    Refuses (ConfigError) a storeType that contradicts what is on disk: opening a RocksDB consume
    queue as files (or the reverse) would silently re-dispatch the whole log into a second layout.
    """
    on_disk = detect_consume_queue_layout(settings.root_dir)
    if on_disk is not None and on_disk != settings.store_type:
        raise ConfigError(
            f"storeType is {settings.store_type!r} but {settings.root_dir}/consumequeue holds a "
            f"{on_disk!r} consume queue; set storeType={on_disk} or run `rmqstore convert-cq`")
    if settings.store_type == STORE_TYPE_ROCKSDB:
        from store.consumequeue.rocksdb.queue_store import RocksDBConsumeQueueStore
        return RocksDBConsumeQueueStore(settings)
    from store.consumequeue.file.queue_store import FileConsumeQueueStore
    return FileConsumeQueueStore(settings)
