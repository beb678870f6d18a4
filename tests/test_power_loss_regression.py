"""Power-loss regressions that must stay fixed, made deterministic: no background services, the
steps run in the test's thread, the cut images come from tests/power_loss_model.py with fixed seeds.

The transient-store-pool case (`POOL_OPEN` in test_power_loss.py's history, an xfail until
commit 60018d2): the commit log was flushed, the consume queue of queue 2 had rolled into new
files that were created but never flushed (here: units 0-419 flushed, 420-749 not, files 5-7 new). After the cut consume-queue recovery found no unit in
the last files and kept maxPhysicOffset at -1, the re-dispatch of the whole log appended unit 0's
record at the queue's end, and a pull there returned the message of queue offset 0.
"""

from __future__ import annotations

import random

import pytest

from store import GetMessageStatus, Message, MessageStore
from store.meta.lockfile import create_abort
from tests.engine_util import small_config
from tests.power_loss_model import SyncRecorder

SEEDS = range(16)
MESSAGES = 750            # 7.5 consume-queue files of 100 units
FLUSHED = 420             # the units flushed before the last files were created


def _flush_commit_log(store) -> None:
    queue = store.commit_log.mapped_files
    for _ in range(len(queue.files) * 2 + 2):   # bounded: one file per step
        committed = queue.commit(0) if store.config.transient_store_pool_enable else False
        if not (queue.flush(0) or committed):
            break


def _images(tmp_path, monkeypatch, pool: bool):
    config = small_config(tmp_path / "live", transient_store_pool_enable=pool,
                          flush_disk_type="ASYNC_FLUSH")
    recorder = SyncRecorder(config.store_path_root_dir)
    recorder.install(monkeypatch)
    store = MessageStore.open(config, start_services=False)
    try:
        create_abort(config.store_path_root_dir, store._parts.style)   # as started services do
        for seq in range(MESSAGES):
            assert store.put_message(Message("PowerT", f"2:{seq}".encode(), queue_id=2)).ok
            if seq + 1 == FLUSHED:
                _flush_commit_log(store)   # (with the pool, dispatch sees committed data only)
                store.dispatch_pending()
                store.consume_queues.flush(0)
        _flush_commit_log(store)
        store.dispatch_pending()
        # A consume-queue flush begins: the new files' directory entries are made durable, the
        # cut comes before their units are flushed.
        store.consume_queues._sync_directories()
        targets = []
        for seed in SEEDS:
            target = tmp_path / f"cut{seed}"
            recorder.image(str(target), random.Random(seed))
            targets.append(target)
    finally:
        store.crash()
    monkeypatch.undo()
    return config, targets


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "nopool"])
def test_flushed_log_with_unflushed_new_queue_files(tmp_path, monkeypatch, pool):
    config, targets = _images(tmp_path, monkeypatch, pool)
    for target in targets:
        copy = small_config(target, transient_store_pool_enable=pool,
                            flush_disk_type="ASYNC_FLUSH")
        with MessageStore.open(copy, start_services=False) as store:
            store.dispatch_pending()
            assert store.get_max_offset_in_queue("PowerT", 2) == MESSAGES, target
            offset = 0
            while offset < MESSAGES:
                got = store.get_message("g", "PowerT", 2, offset, 32)
                assert got.status is GetMessageStatus.FOUND and not got.skipped, \
                    (target, offset, got.status, got.skipped)
                assert [m.body for m in got.messages] == \
                    [f"2:{seq}".encode() for seq in range(offset, offset + len(got.messages))]
                offset = got.next_begin_offset


def test_rocksdb_queue_ahead_of_a_commit_log_with_a_lost_tail(tmp_path, monkeypatch):
    """RocksDB mode: the consume queue (RocksDB's WAL, copied as of the cut) names records whose
    commit-log pages were never flushed, and a later segment's pages survived while an earlier
    segment's tail did not. Abnormal recovery started at the segment holding the queue's max
    physical offset (RocketMQ 5.x's rule) and never saw the hole before it: the recovered queue kept
    units pointing into zeros. It now starts no later than the checkpoint's timestamps say."""
    config = small_config(tmp_path / "live", store_type="defaultRocksDB",
                          flush_disk_type="ASYNC_FLUSH")
    recorder = SyncRecorder(config.store_path_root_dir, own_state_dirs=("consumequeue",))
    recorder.install(monkeypatch)
    store = MessageStore.open(config, start_services=False)
    flushed = 120
    try:
        create_abort(config.store_path_root_dir, store._parts.style)
        for seq in range(400):
            body = f"0:{seq}:".encode() + bytes(900)
            assert store.put_message(Message("PowerT", body, queue_id=0)).ok
            if seq + 1 == flushed:
                _flush_commit_log(store)
        store.dispatch_pending()
        targets = []
        for seed in SEEDS:
            target = tmp_path / f"cut{seed}"
            recorder.image(str(target), random.Random(seed))
            targets.append(target)
    finally:
        store.crash()
    monkeypatch.undo()
    holes = 0
    for target in targets:
        copy = small_config(target, store_type="defaultRocksDB", flush_disk_type="ASYNC_FLUSH")
        with MessageStore.open(copy, start_services=False) as store:
            store.dispatch_pending()
            maximum = store.get_max_offset_in_queue("PowerT", 0)
            assert maximum >= flushed, (target, maximum)
            holes += maximum < 400
            offset = 0
            while offset < maximum:
                got = store.get_message("g", "PowerT", 0, offset, 32)
                assert got.status is GetMessageStatus.FOUND and not got.skipped, \
                    (target, offset, got.status, got.skipped)
                assert [m.body.split(b":")[1] for m in got.messages] == \
                    [str(seq).encode() for seq in range(offset, offset + len(got.messages))]
                offset = got.next_begin_offset
    assert holes   # some images lost part of the unflushed tail
