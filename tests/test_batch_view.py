"""[5.x] The inspection API's batch consume-queue views (store/inspect/batch_view.py): the queues,
a page of units with the record each points to, the check's findings on one queue, and batch
queues in the admin views (topicStatus, topics, brokerStatus: offsets in messages).

No real RocketMQ store with batch queues is among the fixtures: the stores here are written by the
engine with a batch topic (topics.json attribute queue.type=BatchCQ), as tests/test_batch_cq.py does.
"""

from __future__ import annotations

import os

import pytest

from store import Message, MessageStore
from store.errors import StoreError
from store.meta.topic_config import TopicConfig
from tests.engine_util import small_config
from tests.fixtures_util import tree_fingerprint

COUNTS = [3, 1, 5, 2, 4, 1]              # messages per record: bases 0, 3, 4, 9, 11, 15
BASES = [sum(COUNTS[:i]) for i in range(len(COUNTS))]
UNITS_PER_FILE = 4


def make_batch_store(path, counts=COUNTS, plain_topic: str | None = "T"):
    """A closed 5.x store with batch topic `B` (queue 0, `counts` messages per record, 4 units a
    file) and, unless None, one message in the plain topic `plain_topic`. Returns its config."""
    config = small_config(path, store_format="5.x",
                          mapper_file_size_batch_consume_queue=UNITS_PER_FILE * 46)
    with MessageStore.open(config, start_services=False) as store:
        store._parts.topics.put_topic(TopicConfig("B", attributes={"queue.type": "BatchCQ"}))
        store._parts.topics.persist()       # topics.json, as the broker writes it
        for i, count in enumerate(counts):
            result = store.put_message(Message("B", b"b%d" % i, sys_flag=0x80, tags="TagA",
                                               properties={"INNER_NUM": str(count)}))
            assert result.ok, result
        if plain_topic is not None:
            store.put_message(Message(plain_topic, b"plain"))
        store.services.reput.do_reput()
    return config


def unit_path(config, file_index: int = 0) -> str:
    directory = os.path.join(config.store_path_root_dir, "batchconsumequeue", "B", "0")
    return os.path.join(directory, sorted(os.listdir(directory))[file_index])


@pytest.fixture()
def batch(tmp_path):
    config = make_batch_store(tmp_path / "s")
    before = tree_fingerprint(config.store_path_root_dir)
    store = MessageStore.open(config, read_only=True, start_services=False)
    yield config, store
    store.close()
    assert tree_fingerprint(config.store_path_root_dir) == before     # read-only: nothing written


def test_queue_list(batch):
    config, store = batch
    [view] = store.inspect.batch_queues()
    assert (view.topic, view.queue_id, view.min_offset, view.max_offset) == ("B", 0, 0, sum(COUNTS))
    assert view.messages == 16 and view.units == len(COUNTS) and view.batch_topic
    assert view.files == ("00000000000000000000", "00000000000000000184")   # 4 units of 46 bytes
    assert view.file_size_bytes == 184
    assert 0 < view.first_store_ms <= view.last_store_ms
    assert store.inspect.is_batch_queue("B", 0) and not store.inspect.is_batch_queue("T", 0)
    assert store.inspect.batch_queue("T", 0) is None


@pytest.mark.parametrize("offset, first_unit", [(0, 0), (2, 0), (3, 1), (4, 2), (8, 2), (9, 3),
                                                (15, 5)])
def test_page_starts_at_the_unit_holding_the_offset(batch, offset, first_unit):
    _config, store = batch
    page = store.inspect.batch_units("B", 0, offset, 20)
    assert [u.msg_base_offset for u in page.units] == BASES[first_unit:]
    assert not page.more


def test_every_field_and_the_record(batch):
    config, store = batch
    page = store.inspect.batch_units("B", 0, 4, 3)
    assert page.more                                       # units 2, 3, 4 of 6: more follow
    assert [(u.file_name, u.position) for u in page.units] == \
        [("00000000000000000000", 92), ("00000000000000000000", 138), ("00000000000000000184", 0)]
    unit = page.units[0]
    assert (unit.msg_base_offset, unit.batch_size, unit.last_queue_offset) == (4, 5, 8)
    assert unit.compacted_offset == -1 and unit.reserved == 0         # INVALID_POS, then 0
    raw = open(unit_path(config), "rb").read()[92:138]
    assert unit.raw == raw and unit.as_row()["unit_hex"] == raw.hex()
    assert unit.phy_offset == int.from_bytes(raw[0:8], "big")
    assert unit.size == int.from_bytes(raw[8:12], "big")
    assert unit.store_timestamp == int.from_bytes(raw[20:28], "big")
    record = store.inspect.record_bytes(unit.phy_offset)
    assert len(record) == unit.size
    assert (unit.record_topic, unit.record_queue_id, unit.record_queue_offset) == ("B", 0, 4)
    assert (unit.record_inner_base, unit.record_inner_num) == ("4", "5")
    assert unit.record_store_timestamp == unit.store_timestamp
    assert unit.record_file == "00000000000000000000" and unit.record_position == unit.phy_offset
    assert unit.valid and unit.problems == ()
    assert unit.store_time_text.endswith(" UTC") and unit.store_time_text.startswith("20")
    from tests.test_batch_cq import _field
    assert raw[12:20] == _field(unit.tags_code, 8)


@pytest.mark.parametrize("offset", [16, 17, -1])
def test_offset_outside_the_queue_is_one_error_naming_the_directory(batch, offset):
    config, store = batch
    with pytest.raises(StoreError) as error:
        store.inspect.batch_units("B", 0, offset, 5)
    text = str(error.value)
    assert os.path.join("batchconsumequeue", "B", "0") in text and str(offset) in text
    assert "[0, 16)" in text and "\n" not in text


def test_no_such_batch_queue(batch):
    _config, store = batch
    with pytest.raises(StoreError, match=r"batchconsumequeue/T/0: no batch consume queue T/0"):
        store.inspect.batch_units("T", 0, 0, 5)
    with pytest.raises(StoreError, match="units per page"):
        store.inspect.batch_units("B", 0, 0, 0)


def test_admin_views_count_a_batch_topic_in_messages(batch):
    """Regression: topic_status / topics / broker_status read the ordinary consume queues only,
    so a batch topic showed no queue at all (topicStatus: "no consume queue")."""
    _config, store = batch
    [row] = store.inspect.topic_status("B")
    assert (row["queue_id"], row["min_offset"], row["max_offset"]) == (0, 0, 16)
    assert row["last_updated_ms"] == store.inspect.batch_queue("B", 0).last_store_ms
    topics = {t["topic"]: t for t in store.inspect.topics()}
    record_bytes = sum(u.size for u in store.inspect.batch_units("B", 0, 0, 20).units)
    assert (topics["B"]["queues"], topics["B"]["messages"], topics["B"]["bytes"]) == \
        (1, 16, record_bytes)
    assert topics["T"]["messages"] == 1
    status = store.inspect.broker_status()
    assert (status["messages"], status["queues"], status["topics"]) == (17, 2, 2)


def test_consumer_progress_on_a_batch_topic(tmp_path):
    config = make_batch_store(tmp_path / "s")
    with MessageStore.open(config, start_services=False) as store:
        store.commit_consumer_offset("g", "B", 0, 9)
        [row] = store.inspect.consumer_progress("g")
        assert (row["broker_offset"], row["consumer_offset"], row["lag"]) == (16, 9, 7)
        assert row["last_store_ms"] == store.inspect.batch_units("B", 0, 8, 1).units[0].store_timestamp


def _write(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(data)


def test_a_wrong_unit_is_shown_invalid_and_the_check_names_it(tmp_path):
    config = make_batch_store(tmp_path / "s")
    path = unit_path(config)
    _write(path, 46 + 36, (2).to_bytes(2, "big"))         # unit 1: batchSize 2, INNER_NUM 1
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        units = store.inspect.batch_units("B", 0, 0, 3).units
        assert [u.valid for u in units] == [True, False, True]
        assert units[1].problems == ("batchSize 2 but the record's INNER_NUM is 1",)
        findings = store.inspect.batch_findings("B", 0)
        assert any(f.path == path and f.position == 46 and "INNER_NUM is 1" in f.message
                   for f in findings), findings
        assert any("msgBaseOffset 4, but the unit before ends at message offset 5" in f.message
                   for f in findings)
        assert store.inspect.batch_findings("T", 0) == []


def test_a_unit_pointing_elsewhere(tmp_path):
    config = make_batch_store(tmp_path / "s")
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        plain = store.inspect.queue_unit("T", 0, 0)
        first = store.inspect.batch_units("B", 0, 0, 1).units[0]
    path = unit_path(config)
    _write(path, 46, plain.phy_offset.to_bytes(8, "big"))        # unit 1 -> T's record
    _write(path, 92, (first.phy_offset + 1).to_bytes(8, "big"))  # unit 2 -> inside a record
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        units = store.inspect.batch_units("B", 0, 3, 2).units
        assert units[0].record_topic == "T"
        assert any("the record belongs to T/0" in p for p in units[0].problems)
        assert units[1].record_topic is None and not units[1].valid
        assert "is not the start of a record" in units[1].problems[0]
        messages = [f.message for f in store.inspect.batch_findings("B", 0)]
        assert any("the record belongs to T/0" in m for m in messages), messages


def test_a_queue_without_units(tmp_path):
    """Files whose first unit is invalid: recovery keeps no unit (min -1, max 0, as RocketMQ's
    getMinOffsetInQueue / getMaxOffsetInQueue say); the admin views show an empty queue."""
    config = make_batch_store(tmp_path / "s")
    for index in (0, 1):
        path = unit_path(config, index)
        _write(path, 0, bytes(os.path.getsize(path)))
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        [view] = store.inspect.batch_queues()
        assert (view.units, view.min_offset, view.max_offset, view.messages) == (0, -1, 0, 0)
        assert view.first_store_ms == view.last_store_ms == -1
        [row] = store.inspect.topic_status("B")
        assert (row["min_offset"], row["max_offset"], row["last_updated_ms"]) == (0, 0, None)
        with pytest.raises(StoreError, match="no unit holds message offset 0; the queue has no units"):
            store.inspect.batch_units("B", 0, 0, 5)


def test_a_batch_queue_of_a_topic_topics_json_does_not_make_batch(tmp_path):
    """The broker serves a topic's queues from batch queues only when topics.json says BatchCQ
    (QueueTypeUtils.isBatchCq); a leftover batchconsumequeue/ directory is listed as not served."""
    config = make_batch_store(tmp_path / "s")
    with MessageStore.open(config, start_services=False) as store:
        store._parts.topics.put_topic(TopicConfig("B"))      # queue.type back to the default
        store._parts.topics.persist()
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        [view] = store.inspect.batch_queues()
        assert not view.batch_topic and view.max_offset == 16
        assert not store.inspect.is_batch_queue("B", 0)
        [row] = store.inspect.topic_status("B")
        assert (row["min_offset"], row["max_offset"]) == (0, 0)    # what the broker serves
        assert store.get_max_offset_in_queue("B", 0) == 0


def test_findings_say_when_the_check_was_capped(batch):
    _config, store = batch
    assert store.inspect.batch_findings("B", 0) == []
    [note] = store.inspect.batch_findings("B", 0, max_units=2)
    assert note.severity == "info" and "at most 2 units of the store's 6 batch units" in note.message
