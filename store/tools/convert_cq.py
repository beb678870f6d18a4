"""Offline conversion of a store's consume queues between the file layout and RocksDB (spec §13).

`convert_consume_queues(config, to)`, under the store lock (no broker or engine may run):
1. open the store read-only and every unit of the current backend;
2. write them into the other backend in a staging directory (`consumequeue.converting`), with the
   store time each record has in the commit log (the RocksDB value keeps it);
3. verify the staging copy unit by unit (min/max offsets, phy offset, size, tagsCode of every unit);
4. swap: `consumequeue` -> `consumequeue.<old storeType>.bak`, staging -> `consumequeue`, fsync.
The old layout is kept as the backup (nothing is lost); the caller must then set `storeType`.
A failure before the swap leaves the store exactly as it was (the staging directory is removed).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from store.codec.cq_unit import is_prefill_unit
from store.config import StoreConfig
from store.consumequeue.base import STORE_TYPE_FILE, STORE_TYPE_ROCKSDB, ConsumeQueueSettings
from store.consumequeue.copy import copy_queues
from store.consumequeue.factory import detect_consume_queue_layout, open_consume_queue_store
from store.errors import ConfigError, StoreError
from store.mappedfile.mapped_file import fsync_directory
from store.meta.lockfile import StoreLock

TARGETS = {"rocksdb": STORE_TYPE_ROCKSDB, "file": STORE_TYPE_FILE}


@dataclass
class ConversionReport:
    source_type: str
    target_type: str
    queues: int
    units: int
    backup_dir: str
    store_type_line: str


def _verify(source, target) -> int:
    """Every unit of `source` is in `target` with the same fields; returns the units compared."""
    compared = 0
    if sorted(source.queues()) != sorted(target.queues()):
        raise StoreError("converted consume queues list different queues than the source")
    for topic, queue_id in sorted(source.queues()):
        low, high = source.get_min_offset(topic, queue_id), source.get_max_offset(topic, queue_id)
        if (target.get_min_offset(topic, queue_id), target.get_max_offset(topic, queue_id)) != \
                (low, high):
            raise StoreError(f"{topic}/{queue_id}: min/max offsets differ after conversion")
        for queue_offset in range(low, high):
            want = source.get_unit(topic, queue_id, queue_offset)
            if want is None or is_prefill_unit(want.phy_offset, want.size, want.tags_code):
                continue
            got = target.get_unit(topic, queue_id, queue_offset)
            if got is None or (got.phy_offset, got.size, got.tags_code) != \
                    (want.phy_offset, want.size, want.tags_code):
                raise StoreError(f"{topic}/{queue_id} unit {queue_offset} differs after conversion")
            compared += 1
    return compared


def convert_consume_queues(config: StoreConfig, to: str) -> ConversionReport:
    """Convert the consume queues of the store at `config.store_path_root_dir` (see module doc)."""
    from store.message_store import MessageStore

    if to not in TARGETS:
        raise ConfigError(f"convert to 'rocksdb' or 'file', not {to!r}")
    target_type = TARGETS[to]
    root = config.store_path_root_dir
    source_type = detect_consume_queue_layout(root) or config.store_type
    if source_type == target_type:
        raise ConfigError(f"the consume queues of {root} are already {target_type!r}")
    live_dir = os.path.join(root, "consumequeue")
    backup_dir = f"{live_dir}.{source_type}.bak"
    staging_root = os.path.join(root, "consumequeue.converting")
    if os.path.exists(backup_dir):
        raise ConfigError(f"{backup_dir} exists from an earlier conversion; move it away first")
    with StoreLock(root):
        shutil.rmtree(staging_root, ignore_errors=True)
        source_config = config.replace(store_type=source_type)
        with MessageStore.open(source_config, read_only=True) as store:
            os.makedirs(staging_root)
            target = open_consume_queue_store(ConsumeQueueSettings(
                root_dir=staging_root, file_size_bytes=config.mapped_file_size_consume_queue,
                store_type=target_type, read_only=False, style=store.style))
            try:
                target.load()
                target.recover()
                units = copy_queues(store.consume_queues, target, store._store_time_of)
                target.flush(0)
                target.correct_min_offset(store.commit_log.min_offset())
                _verify(store.consume_queues, target)
                queues = len(store.queues())
            except BaseException:
                target.close()
                shutil.rmtree(staging_root, ignore_errors=True)
                raise
            target.close()
        if os.path.exists(live_dir):
            os.rename(live_dir, backup_dir)
        os.rename(os.path.join(staging_root, "consumequeue"), live_dir)
        shutil.rmtree(staging_root, ignore_errors=True)
        fsync_directory(root)
    return ConversionReport(source_type, target_type, queues, units, backup_dir,
                            f"storeType={target_type}")
