"""Rebuild a store's index files from the whole commit log (`rmqstore recover --rebuild-index`).

RocketMQ never rebuilds a deleted `index/`: dispatch resumes from the consume queues, so old messages
stay unfindable by key. This reads the whole log again, under the store lock, into a staging
directory that replaces `index/` only when complete, then moves the checkpoint's index time.
"""

from __future__ import annotations

import os
import shutil

from store.check.log_view import CommitLogView, iter_records
from store.codec import record_check
from store.dledger.dump import iter_dledger_records
from store.dledger.layout import find_dledger
from store.index.index_service import IndexService
from store.meta.checkpoint import CheckpointFile
from store.meta.lockfile import StoreLock
from store.recovery.loader import resolve_store_format

__all__ = ["rebuild_index"]

REBUILD_BATCH = 256          # records handed to the index service at a time


def rebuild_index(config) -> dict:
    """Index every record of the (recovered, closed) store into a fresh index/ (spec §5.6).

    RocketMQ never rebuilds a deleted index/: dispatch resumes from the consume queues, so old
    messages stay unfindable by key. Here the whole log is read again, under the store lock.
    """
    root = config.store_path_root_dir
    staging = config.index_dir + ".rebuild"
    shutil.rmtree(staging, ignore_errors=True)
    full_file_end_ms = [0]
    records = 0
    with StoreLock(root):
        service = IndexService(staging, config.max_hash_slot_num, config.max_index_num,
                               read_only=False, on_file_full=lambda ts: full_file_end_ms.__setitem__(
                                   0, max(full_file_end_ms[0], ts)))
        try:
            with CommitLogView(config.commit_log_dirs, config.mapped_file_size_commit_log) as view:
                batch = []
                dledger = find_dledger(config)      # a DLedger log: the records inside its entries
                records_of = iter_records(view, check_crc=config.check_crc_on_recover) \
                    if dledger is None else \
                    iter_dledger_records(dledger, check_crc=config.check_crc_on_recover)
                for _phy, result in records_of:
                    if result.kind != record_check.CHECK_RECORD:
                        continue
                    batch.append(result.request)
                    records += 1
                    if len(batch) >= REBUILD_BATCH:
                        service.build_index(batch)
                        batch = []
                if batch:
                    service.build_index(batch)
            files = len(service.files)
            service.flush()
        finally:
            service.close()
        shutil.rmtree(config.index_dir, ignore_errors=True)
        if os.path.isdir(staging):
            os.replace(staging, config.index_dir)
        checkpoint = CheckpointFile(config.checkpoint_path, read_only=False,
                                    style=resolve_store_format(config))
        checkpoint.load()
        checkpoint.index_msg_timestamp = full_file_end_ms[0]
        checkpoint.flush()
    return {"records": records, "indexFiles": files, "indexMsgTimestamp": full_file_end_ms[0]}
