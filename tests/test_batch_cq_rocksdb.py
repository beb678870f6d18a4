"""A [5.x] batch topic (`queue.type=BatchCQ`) on a RocksDB store (`storeType=defaultRocksDB`).

rocketmq-all-5.3.3 `RocksDBConsumeQueueStore.findOrCreateConsumeQueue` creates
`new RocksDBConsumeQueue(this.messageStore, topic, queueId)` whatever the topic's queue type: no
BatchConsumeQueue and no batchconsumequeue/. `RocksDBConsumeQueue.assignQueueOffset` takes the
ordinary offset table (no INNER_BASE), `CommitLog.getMessageNum` still counts INNER_NUM for a BatchCQ
topic (`messageNum >= 1 ? messageNum : 1`) and `increaseQueueOffset` moves the table by it; dispatch
writes one ordinary unit per record keyed by its QUEUEOFFSET, so the keys have gaps; the max offset
is the last key + 1 (`getMaxOffsetInQueue`); `rangeQuery` stops at the first missing key and
`rollNextFile` answers 0.
"""

from __future__ import annotations

import os

import pytest

from store import Message, MessageStore
from store.api import GetMessageStatus
from store.check.run import check_store
from store.meta.topic_config import TopicConfig
from tests.engine_util import small_config

COUNTS = ["3", "1", "5", "0"]            # INNER_NUM "0" counts 1 (getMessageNum)
OFFSETS = [0, 3, 4, 9]                   # each record's QUEUEOFFSET (and RocksDB key)


@pytest.fixture
def rocks(tmp_path):
    config = small_config(tmp_path / "s", "defaultRocksDB", store_format="5.x")
    store = MessageStore.open(config, start_services=False)
    store._parts.topics.put_topic(TopicConfig("B", attributes={"queue.type": "BatchCQ"}))
    store._parts.topics.persist()
    results = [store.put_message(Message("B", b"b%d" % i, sys_flag=0x80,
                                         properties={"INNER_NUM": count}))
               for i, count in enumerate(COUNTS)]
    store.services.reput.do_reput()
    yield config, store, results
    store.close()


def test_offsets_move_by_inner_num_and_units_are_ordinary(rocks):
    config, store, results = rocks
    assert [r.queue_offset for r in results] == OFFSETS
    assert store.commit_log.queue_offsets[("B", 0)] == 10
    for result in results:
        record = store.look_message_by_offset(result.wrote_offset)
        assert record.queue_offset == result.queue_offset
        assert "INNER_BASE" not in record.properties          # only BatchConsumeQueue writes it
    assert not os.path.exists(os.path.join(config.store_path_root_dir, "batchconsumequeue"))
    for offset, result in zip(OFFSETS, results):
        assert store.consume_queues.get_unit("B", 0, offset).phy_offset == result.wrote_offset
    assert store.consume_queues.get_unit("B", 0, 1) is None      # a gap by design
    assert (store.get_min_offset_in_queue("B", 0), store.get_max_offset_in_queue("B", 0)) == (0, 10)


def test_pulls_read_keys_until_the_first_gap(rocks):
    _, store, _ = rocks
    got = store.get_message("g", "B", 0, 0)
    assert got.status is GetMessageStatus.FOUND and [m.body for m in got.messages] == [b"b0"]
    assert got.next_begin_offset == 1                  # a RocksDB unit counts one message
    gap = store.get_message("g", "B", 0, 1)
    assert gap.status is GetMessageStatus.OFFSET_FOUND_NULL and gap.next_begin_offset == 0
    got = store.get_message("g", "B", 0, 3)
    assert [m.body for m in got.messages] == [b"b1", b"b2"] and got.next_begin_offset == 5


def test_after_a_restart_the_next_offset_is_the_last_key_plus_one(rocks):
    config, store, _ = rocks
    store.close()
    with MessageStore.open(config, start_services=False) as reopened:
        assert reopened.get_max_offset_in_queue("B", 0) == OFFSETS[-1] + 1
        assert reopened.put_message(Message("B", b"late", sys_flag=0x80,
                                            properties={"INNER_NUM": "2"})).queue_offset == 10


def test_check_accepts_the_gaps_of_a_batch_topic_only(rocks):
    _, store, _ = rocks
    assert [f for f in check_store(store) if f.severity == "error"] == []
    store._parts.topics.put_topic(TopicConfig("B"))      # no longer a batch topic: gaps are damage
    errors = [f for f in check_store(store) if f.severity == "error"]
    assert len(errors) == 1 and "B/0: no units readable at queue offset 1" in errors[0].message


def test_inner_num_that_is_no_short_is_refused(rocks):
    _, store, _ = rocks
    for bad in ("x", "40000"):
        result = store.put_message(Message("B", b"bad", sys_flag=0x80,
                                           properties={"INNER_NUM": bad}))
        assert not result.ok and "INNER_NUM" in result.error
