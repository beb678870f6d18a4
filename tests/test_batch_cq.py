"""Batch consume queue (rocketmq-all-5.3.3 `BatchConsumeQueue`): the 46-byte unit and one queue.

No real store with batch units exists among the fixtures: the unit is checked byte by byte against
the layout the source's class comment and `putBatchMessagePositionInfo` define (phy offset 8, size 4,
tags code 8, store time 8, msgBaseOffset 8, batchSize 2, compactedOffset 4 written as -1, reserved 4
written as 0), and the queue's answers against the rules quoted in store/consumequeue/batch/.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec.batch_cq_unit import (BATCH_CQ_UNIT_SIZE, DEFAULT_FILE_SIZE_BYTES, BatchCqUnit,
                                       decode_batch_unit, encode_batch_unit)
from store.consumequeue.batch.batch_queue import BatchConsumeQueue
from store.consumequeue.batch.topic_type import cq_type, is_batch_cq
from store.errors import ConfigError, CorruptDataError


def _field(value: int, size: int) -> bytes:
    return value.to_bytes(size, "big", signed=True)


def test_unit_bytes_as_the_source_lays_them_out():
    unit = BatchCqUnit(0x0102030405060708, 0x11223344, -5, 1_700_000_000_123, 4096, 300)
    raw = encode_batch_unit(unit)
    assert len(raw) == 46 == BATCH_CQ_UNIT_SIZE
    assert raw == (_field(0x0102030405060708, 8) + _field(0x11223344, 4) + _field(-5, 8) +
                   _field(1_700_000_000_123, 8) + _field(4096, 8) + _field(300, 2) +
                   b"\xff\xff\xff\xff" + bytes(4))
    assert raw[12:20] == _field(-5, 8)              # MSG_TAG_OFFSET_INDEX
    assert raw[20:28] == _field(1_700_000_000_123, 8)   # MSG_STORE_TIME_OFFSET_INDEX
    assert raw[28:36] == _field(4096, 8)            # MSG_BASE_OFFSET_INDEX
    assert raw[36:38] == _field(300, 2)             # MSG_BATCH_SIZE_INDEX
    assert raw[38:42] == _field(-1, 4)              # MSG_COMPACT_OFFSET_INDEX: INVALID_POS
    assert DEFAULT_FILE_SIZE_BYTES == 300000 * 46   # mapperFileSizeBatchConsumeQueue


@given(st.integers(0, 2**63 - 1), st.integers(1, 2**31 - 1), st.integers(-2**63, 2**63 - 1),
       st.integers(0, 2**63 - 1), st.integers(0, 2**62), st.integers(1, 2**15 - 1))
def test_unit_round_trip(phy, size, tags, store_ts, base, batch):
    unit = BatchCqUnit(phy, size, tags, store_ts, base, batch)
    assert decode_batch_unit(encode_batch_unit(unit)) == unit


def test_bad_input():
    with pytest.raises(CorruptDataError):
        decode_batch_unit(bytes(45))
    with pytest.raises(ValueError):
        encode_batch_unit(BatchCqUnit(0, 1, 0, 0, 0, 1 << 15))     # batchSize is a short


@pytest.mark.parametrize("attributes, kind", [(None, "SimpleCQ"), ({}, "SimpleCQ"),
                                              ({"queue.type": "BatchCQ"}, "BatchCQ"),
                                              ({"other": "x"}, "SimpleCQ")])
def test_queue_type_attribute(attributes, kind):
    assert cq_type(attributes) == kind
    assert is_batch_cq(attributes) == (kind == "BatchCQ")


def test_unknown_queue_type_is_named():
    with pytest.raises(ValueError, match="queue.type='Nope'"):
        cq_type({"queue.type": "Nope"})


FILE_UNITS = 4


def _queue(tmp_path, read_only=False):
    queue = BatchConsumeQueue(os.path.join(tmp_path, "batchconsumequeue", "B", "0"), "B", 0,
                              FILE_UNITS * BATCH_CQ_UNIT_SIZE, read_only=read_only)
    queue.load()
    return queue


def _fill(queue, batches):
    """One unit per record: record k at phy 1000 * (k + 1), batch sizes from `batches`."""
    base = 0
    units = []
    for k, batch in enumerate(batches):
        unit = BatchCqUnit(1000 * (k + 1), 500, k, 1_700_000_000_000 + k, base, batch)
        assert queue.put(unit)
        units.append(unit)
        base += batch
    return units


def _expected_unit(units, offset):
    for unit in units:
        if unit.msg_base_offset <= offset < unit.end_queue_offset:
            return unit
    return None


def test_lookup_min_max_put_and_recover(tmp_path):
    batches = [3, 1, 5, 2, 7, 1, 1, 4, 2, 6]          # 10 units: 3 files of 4 units
    queue = _queue(tmp_path)
    assert (queue.min_offset(), queue.max_offset()) == (-1, 0)
    units = _fill(queue, batches)
    total = sum(batches)
    assert (queue.min_offset(), queue.max_offset()) == (0, total)
    assert not queue.put(units[3])                    # a record at or below the last: skipped
    for offset in range(total):
        got = queue.get_unit(offset)
        assert got is not None and got.phy_offset == _expected_unit(units, offset).phy_offset
        assert got.compacted_offset == -1
    assert queue.get_unit(total) is None
    assert len(queue.mapped_files.files) == 3
    queue.close()
    reopened = _queue(tmp_path)
    assert reopened.recover() == units[-1].phy_offset
    assert (reopened.min_offset(), reopened.max_offset()) == (0, total)
    assert reopened.get_unit(total - 1).phy_offset == units[-1].phy_offset
    reopened.close()


def test_recovery_stops_at_the_first_invalid_unit(tmp_path):
    queue = _queue(tmp_path)
    units = _fill(queue, [2, 2, 2, 2, 2, 2])
    queue.close()
    second = os.path.join(tmp_path, "batchconsumequeue", "B", "0", f"{FILE_UNITS * 46:020d}")
    with open(second, "r+b") as handle:               # unit 5 (second of file 2): batchSize 0
        handle.seek(46 + 36)
        handle.write(bytes(2))
    reopened = _queue(tmp_path)
    assert reopened.recover() == units[4].phy_offset
    assert reopened.max_offset() == units[4].end_queue_offset == 10
    with open(second, "rb") as handle:                # the cut bytes are zeroed
        assert handle.read()[46:92] == bytes(46)
    reopened.close()


def test_read_only_recovery_changes_nothing(tmp_path):
    queue = _queue(tmp_path)
    _fill(queue, [1, 2, 3])
    queue.close()
    path = os.path.join(tmp_path, "batchconsumequeue", "B", "0", f"{0:020d}")
    before = open(path, "rb").read()
    reader = _queue(tmp_path, read_only=True)
    reader.recover()
    assert (reader.min_offset(), reader.max_offset()) == (0, 6)
    reader.close()
    assert open(path, "rb").read() == before


def test_truncate_dirty_cuts_units_past_the_log_end(tmp_path):
    queue = _queue(tmp_path)
    units = _fill(queue, [1, 1, 1, 1, 1, 1])
    queue.truncate_dirty(units[4].phy_offset)         # records 4 and 5 are gone from the log
    assert queue.max_offset() == 4 and queue.max_msg_phy_offset == units[3].phy_offset
    assert queue.get_unit(4) is None and queue.get_unit(3).phy_offset == units[3].phy_offset
    assert queue.put(units[4])                        # written again at the end
    assert queue.max_offset() == 5
    queue.close()


def test_file_size_must_hold_whole_units(tmp_path):
    with pytest.raises(ConfigError, match="mapperFileSizeBatchConsumeQueue"):
        BatchConsumeQueue(str(tmp_path), "B", 0, 1000, read_only=False)


def _store_with_batch_queue(tmp_path):
    """Three inner-batch records of batch topic B/0 put through the engine, and the batch units
    dispatch wrote for them (5.3.3 refuses an inner batch to a topic that is not BatchCQ)."""
    from store import Message, MessageStore
    from store.meta.topic_config import TopicConfig
    from tests.engine_util import small_config
    config = small_config(tmp_path / "s", store_format="5.x",
                          mapper_file_size_batch_consume_queue=4 * 46)
    batches = [(0, 3), (3, 1), (4, 5)]
    with MessageStore.open(config, start_services=False) as store:
        store._parts.topics.put_topic(TopicConfig("B", attributes={"queue.type": "BatchCQ"}))
        store._parts.topics.persist()
        results = [store.put_message(Message("B", b"batch%d" % base, sys_flag=0x80, properties={
            "INNER_NUM": str(num)})) for base, num in batches]
        assert [r.queue_offset for r in results] == [base for base, _ in batches]
        store.services.reput.do_reput()
        queue = store._batch_queue("B", 0)
        for (base, num), result in zip(batches, results):
            unit = queue.get_unit(base)
            assert (unit.phy_offset, unit.msg_base_offset, unit.batch_size) == \
                (result.wrote_offset, base, num)
    return config, os.path.join(config.store_path_root_dir, "batchconsumequeue", "B", "0",
                                f"{0:020d}")


def test_check_accepts_batch_units_that_match_their_records(tmp_path):
    from store.tools.check_directory import check_config
    config, _ = _store_with_batch_queue(tmp_path)
    findings = check_config(config)
    assert [f for f in findings if f.severity == "error"] == []


def test_check_names_a_batch_unit_that_does_not_match(tmp_path):
    from store.tools.check_directory import check_config
    config, path = _store_with_batch_queue(tmp_path)
    with open(path, "r+b") as handle:               # unit 1: batchSize 1 -> 2
        handle.seek(46 + 36)
        handle.write((2).to_bytes(2, "big"))
    errors = [f for f in check_config(config) if f.severity == "error"]
    assert len(errors) == 2, errors
    assert any("batchSize 2 but the record's INNER_NUM is 1" in f.message and f.path == path and
               f.position == 46 for f in errors)
    assert any("msgBaseOffset 4, but the unit before ends at message offset 5" in f.message
               for f in errors)


# -- hosted: a batch topic (topics.json attributes queue.type=BatchCQ) ---------------------------

def _batch_store(tmp_path):
    from store import MessageStore
    from store.meta.topic_config import TopicConfig
    from tests.engine_util import small_config
    config = small_config(tmp_path / "s", store_format="5.x",
                          mapper_file_size_batch_consume_queue=4 * 46)
    store = MessageStore.open(config, start_services=False)
    store._parts.topics.put_topic(TopicConfig("B", attributes={"queue.type": "BatchCQ"}))
    store._parts.topics.persist()             # topics.json, as the broker writes it on creation
    return config, store


def _inner_batch(body: bytes, count: int):
    from store import Message
    return Message("B", body, sys_flag=0x80, properties={"INNER_NUM": str(count)})


def test_inner_batch_rules_of_the_put(tmp_path):
    """5.3.3 `DefaultMessageStore.asyncPutMessage`: INNER_NUM without INNER_BATCH_FLAG, and the
    flag on a topic that is not BatchCQ, are MESSAGE_ILLEGAL before anything is written."""
    from store import Message
    from store.api import PutMessageStatus
    config, store = _batch_store(tmp_path)
    before = store.commit_log.max_offset()
    no_flag = store.put_message(Message("B", b"x", properties={"INNER_NUM": "2"}))
    assert no_flag.status is PutMessageStatus.MESSAGE_ILLEGAL and "not an inner batch" in no_flag.error
    plain = store.put_message(Message("P", b"x", sys_flag=0x80, properties={"INNER_NUM": "2"}))
    assert plain.status is PutMessageStatus.MESSAGE_ILLEGAL and "not BatchCQ" in plain.error
    assert store.commit_log.max_offset() == before
    assert store.put_message(Message("P", b"plain")).ok          # a plain put to a plain topic
    assert store.put_message(Message("B", b"one")).queue_offset == 0   # no INNER_NUM: 1 message
    store.close()


def test_put_dispatch_pull_recover_a_batch_topic(tmp_path):
    from store import MessageStore
    from store.api import GetMessageStatus
    from store.check.run import check_store
    config, store = _batch_store(tmp_path)
    counts = [3, 1, 5, 2, 4, 1]
    results = [store.put_message(_inner_batch(b"b%d" % i, n)) for i, n in enumerate(counts)]
    bases = [sum(counts[:i]) for i in range(len(counts))]
    assert [r.queue_offset for r in results] == bases            # assignQueueOffset
    store.services.reput.do_reput()
    assert store.get_min_offset_in_queue("B", 0) == 0
    assert store.get_max_offset_in_queue("B", 0) == sum(counts)
    assert store.consume_queues.get_max_offset("B", 0) == 0      # no ordinary unit
    for offset in range(sum(counts)):                             # any offset inside a batch
        got = store.get_message("g", "B", 0, offset, 1)
        index = max(i for i, base in enumerate(bases) if base <= offset)
        assert got.status == GetMessageStatus.FOUND
        [message] = got.messages
        assert message.body == b"b%d" % index and message.properties["INNER_BASE"] == str(bases[index])
        assert got.next_begin_offset == bases[index] + counts[index]
    got = store.get_message("g", "B", 0, 0, 9)                    # 3 + 1 + 5 messages fit in 9
    assert [m.body for m in got.messages] == [b"b0", b"b1", b"b2"] and got.next_begin_offset == 9
    assert store.get_message("g", "B", 0, sum(counts), 1).status == GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert [f for f in check_store(store) if f.severity == "error"] == []
    store.close()
    with MessageStore.open(config, start_services=False) as reopened:   # recovery of the units
        assert reopened.get_max_offset_in_queue("B", 0) == sum(counts)
        next_put = reopened.put_message(_inner_batch(b"late", 2))
        assert next_put.queue_offset == sum(counts)
        reopened.services.reput.do_reput()
        assert reopened.get_message("g", "B", 0, sum(counts) + 1, 1).messages[0].body == b"late"


def test_crash_recovery_rebuilds_batch_units(tmp_path):
    from store import MessageStore
    config, store = _batch_store(tmp_path)
    for i, count in enumerate([2, 3, 1]):
        store.put_message(_inner_batch(b"c%d" % i, count))
    store.services.reput.do_reput()
    store.crash()
    root = config.store_path_root_dir
    open(os.path.join(root, "abort"), "wb").close()          # as a killed broker leaves it
    import shutil
    shutil.rmtree(os.path.join(root, "batchconsumequeue", "B", "0"))
    with MessageStore.open(config, start_services=False) as reopened:
        assert reopened.recovery_report.mode == "abnormal"   # re-dispatch from the first segment
        assert reopened.get_max_offset_in_queue("B", 0) == 6
        assert reopened.get_message("g", "B", 0, 5, 1).messages[0].body == b"c2"
