"""Expiry (spec §12) on both backends: old segments go, consume queues and index follow."""

from __future__ import annotations

import os
import time

import pytest

from store import GetMessageStatus, Message, MessageStore
from tests.engine_util import STORE_TYPES, small_config
from tests.test_message_store import wait_dispatched


@pytest.fixture(params=STORE_TYPES)
def filled(request, tmp_path):
    config = small_config(tmp_path / "s", request.param, file_reserved_time=1)
    store = MessageStore.open(config)
    for i in range(300):
        store.put_message(Message("T", b"v" * 900, queue_id=i % 2, keys=[f"k{i}"]))
    wait_dispatched(store)
    yield store
    store.close()


def _age_segments(store, hours: float, count: int) -> None:
    old = time.time() - hours * 3600
    for mapped in store.commit_log.mapped_files.files[:count]:
        os.utime(mapped.path, (old, old))


def test_only_expired_segments_are_deleted(filled):
    store = filled
    segments_before = len(store.commit_log.mapped_files.files)
    assert segments_before >= 4
    _age_segments(store, 2, 2)
    result = store.clean_expired_files()
    assert result.commit_log_files_deleted == 2
    assert len(store.commit_log.mapped_files.files) == segments_before - 2
    min_phy = store.commit_log.min_offset()
    assert min_phy == 2 * store.config.mapped_file_size_commit_log
    # The consume queues now start at the first unit still backed by the log.
    for queue_id in (0, 1):
        low = store.get_min_offset_in_queue("T", queue_id)
        assert low > 0
        unit = store.consume_queues.get_unit("T", queue_id, low)
        assert unit.phy_offset >= min_phy
        too_small = store.get_message("g", "T", queue_id, 0)
        assert too_small.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert too_small.next_begin_offset == low
        assert store.get_message("g", "T", queue_id, low).status is GetMessageStatus.FOUND
    assert not store.query_message("T", "k0").messages
    assert store.query_message("T", "k299").messages


def test_fresh_segments_stay_unless_forced(filled):
    store = filled
    segments_before = len(store.commit_log.mapped_files.files)
    assert store.clean_expired_files().commit_log_files_deleted == 0
    forced = store.clean_expired_files(force=True)
    # Forced: oldest first, never the last segment, at most 10 per run.
    assert forced.commit_log_files_deleted == min(10, segments_before - 1)
    assert len(store.commit_log.mapped_files.files) >= 1


def test_full_disk_refuses_puts_and_cleans(filled):
    store = filled
    service = store.services.cleanup
    service.disk_ratio_of = lambda _path: 0.95
    result = service.run_once()
    assert store.disk_full and result.clean_immediately
    assert result.commit_log_files_deleted >= 1
    refused = store.put_message(Message("T", b"x"))
    assert refused.status.value == "SERVICE_NOT_AVAILABLE"
    service.disk_ratio_of = lambda _path: 0.10
    service.run_once()
    assert not store.disk_full and store.put_message(Message("T", b"x")).ok
