"""Expiry of [5.x] batch-queue files (rocketmq-all-5.3.3): `CleanConsumeQueueService` walks batch
queues like the others; `BatchConsumeQueue.deleteExpiredFile` = `deleteExpiredFileByOffset(min, 46)`
(full files but the last whose last unit's record is below the log's min) then `correctMinOffset`
(the first file's leading units below the min move the min to their base + batch size). At open,
`recoverOffsetTable` runs `correctMinOffset` again, so the min survives a restart.

The store: 16 records of about 20 KB (3 per 64 KiB segment: segments r0-2, r3-5, r6-8, ...), batch
files of 4 units (r0-3, r4-7, r8-11, r12-15). The first two segments are aged past fileReservedTime:
a manual clean deletes them, the log starts at r6, batch file r0-3 goes, file r4-7 stays (r7 is
still in the log) and its units r4, r5 move the min to r5's base + count.
"""

from __future__ import annotations

import os
import time

import pytest

from store import Message, MessageStore
from store.api import GetMessageStatus
from store.check.run import check_store
from store.meta.topic_config import TopicConfig
from tests.engine_util import small_config

COUNTS = [3, 1, 5, 2, 4, 1, 2, 3, 1, 2, 6, 1, 2, 2, 3, 1]
BASES = [sum(COUNTS[:i]) for i in range(len(COUNTS))]
BODY = b"x" * 20_000


def _open(config):
    store = MessageStore.open(config, start_services=False)
    store.services.cleanup.disk_ratio_of = lambda _path: 0.10     # no space pressure
    return store


@pytest.fixture
def cleaned(tmp_path):
    config = small_config(tmp_path / "s", store_format="5.x", file_reserved_time=1,
                          mapper_file_size_batch_consume_queue=4 * 46)
    store = _open(config)
    store._parts.topics.put_topic(TopicConfig("B", attributes={"queue.type": "BatchCQ"}))
    phys = []
    for i, count in enumerate(COUNTS):
        result = store.put_message(Message("B", BODY + b"%d" % i, sys_flag=0x80,
                                           properties={"INNER_NUM": str(count)}))
        assert result.ok and result.queue_offset == BASES[i]
        phys.append(result.wrote_offset)
    store.services.reput.do_reput()
    segment = config.mapped_file_size_commit_log
    assert [p // segment for p in phys[:9]] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    queue = store._batch_queue("B", 0)
    assert len(queue.mapped_files.files) == 4
    old = time.time() - 2 * 3600
    for mapped in store.commit_log.mapped_files.files[:2]:
        os.utime(mapped.path, (old, old))
    yield config, store, phys
    store.close()


def test_expired_batch_files_go_and_the_min_moves(cleaned):
    config, store, phys = cleaned
    queue = store._batch_queue("B", 0)
    first_file = queue.mapped_files.files[0].path
    result = store.clean_expired_files()
    assert result.commit_log_files_deleted == 2
    assert store.commit_log.min_offset() == phys[6]
    assert result.consume_queue_files_deleted == 1          # batch file r0-3
    assert not os.path.exists(first_file)
    assert len(queue.mapped_files.files) == 3
    low = BASES[5] + COUNTS[5]                               # r4, r5 are below the log's min
    assert store.get_min_offset_in_queue("B", 0) == low == BASES[6]
    too_small = store.get_message("g", "B", 0, 0)
    assert too_small.status is GetMessageStatus.OFFSET_TOO_SMALL
    assert too_small.next_begin_offset == low
    got = store.get_message("g", "B", 0, low, 1)
    assert got.status is GetMessageStatus.FOUND and got.messages[0].body == BODY + b"6"
    # A time before everything is clamped to the new min (ConsumeQueueStore.getOffsetInQueueByTime).
    assert store.get_offset_in_queue_by_time("B", 0, 0) == low
    assert store.get_earliest_message_time("B", 0) == \
        store.look_message_by_offset(phys[6]).store_timestamp
    assert [f for f in check_store(store) if f.severity == "error"] == []


def test_the_min_survives_a_restart(cleaned):
    config, store, _ = cleaned
    store.clean_expired_files()
    low = store.get_min_offset_in_queue("B", 0)
    store.close()
    with _open(config) as reopened:           # recoverOffsetTable -> correctMinOffset
        assert reopened.get_min_offset_in_queue("B", 0) == low == BASES[6]
        assert reopened.get_max_offset_in_queue("B", 0) == sum(COUNTS)


def test_nothing_goes_while_the_log_keeps_its_segments(cleaned):
    _, store, _ = cleaned
    for mapped in store.commit_log.mapped_files.files:
        os.utime(mapped.path)                     # fresh again
    result = store.clean_expired_files()
    assert result.commit_log_files_deleted == result.consume_queue_files_deleted == 0
    assert store.get_min_offset_in_queue("B", 0) == 0
    assert len(store._batch_queue("B", 0).mapped_files.files) == 4


def test_a_forced_clean_never_deletes_the_last_batch_file(cleaned):
    _, store, phys = cleaned
    for _ in range(3):                              # 10 segments per pass at most
        store.clean_expired_files(force=True)
    queue = store._batch_queue("B", 0)
    assert store.commit_log.min_offset() == phys[15]   # only the last segment (r15) is left
    assert len(queue.mapped_files.files) == 1          # r12-15: the last file
    assert store.get_min_offset_in_queue("B", 0) == BASES[15]
