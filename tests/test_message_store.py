"""The facade end to end, on both consume-queue backends: put, dispatch, pull, lookups, reopen."""

from __future__ import annotations

import os
import threading
import time

import pytest

from store import GetMessageStatus, Message, MessageStore, PutMessageStatus
from store.codec.message import BLANK_MAGIC
from tests.engine_util import STORE_TYPES, FakeClock, small_config


@pytest.fixture(params=STORE_TYPES)
def store_type(request):
    return request.param


@pytest.fixture
def store(tmp_path, store_type):
    with MessageStore.open(small_config(tmp_path / "s", store_type)) as opened:
        yield opened


def wait_dispatched(store, timeout_s=10.0):
    """Wait until everything written is committed (transient pool) and dispatched."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pointers = store.pointers()
        if pointers["committed"] == pointers["wrote"] and store.dispatch_behind_bytes() == 0:
            return
        time.sleep(0.005)
    raise AssertionError(f"not dispatched in time: {store.pointers()}")


def test_put_then_pull_then_query(store):
    result = store.put_message(Message("TopicA", b"hello", queue_id=1, tags="TagA",
                                       keys=["k1", "k2"], properties={"p": "v"}))
    assert result.status is PutMessageStatus.PUT_OK
    assert result.wrote_offset == 0 and result.queue_offset == 0
    assert result.msg_id == "7F00000100002A9F0000000000000000"
    wait_dispatched(store)
    got = store.get_message("g", "TopicA", 1, 0, 32)
    assert got.status is GetMessageStatus.FOUND and got.next_begin_offset == 1
    message = got.messages[0]
    assert (message.body, message.tags, message.keys, message.properties["p"]) == (
        b"hello", "TagA", "k1 k2", "v")
    assert store.query_message("TopicA", "k2").messages[0].commit_log_offset == 0
    assert store.view_message(result.msg_id).body == b"hello"
    assert store.look_message_by_offset(0).queue_offset == 0


def test_status_table(store):
    assert store.get_message("g", "Nope", 0, 0).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    for i in range(3):
        store.put_message(Message("TopicA", b"x%d" % i))
    wait_dispatched(store)
    assert store.get_message("g", "TopicA", 0, 3).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_message("g", "TopicA", 0, 10)
    assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 3
    found = store.get_message("g", "TopicA", 0, 1, 1)
    assert found.status is GetMessageStatus.FOUND and found.next_begin_offset == 2


def test_tag_filter_and_next_offset(store):
    for i in range(10):
        store.put_message(Message("TopicA", b"m", tags="A" if i % 3 == 0 else "B"))
    wait_dispatched(store)
    got = store.get_message("g", "TopicA", 0, 0, 32, tag_expression="A")
    assert [m.queue_offset for m in got.messages] == [0, 3, 6, 9]
    assert got.next_begin_offset == 10
    none = store.get_message("g", "TopicA", 0, 0, 32, tag_expression="C")
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 10


def test_rolls_segments_with_blank_filler(store):
    body = b"z" * 1000
    results = [store.put_message(Message("TopicA", body)) for _ in range(200)]
    assert all(r.ok for r in results)
    files = sorted(os.listdir(store.config.commit_log_dir))
    assert len(files) >= 3
    first_end = 65536
    last_in_first = max(r.wrote_offset + r.wrote_bytes for r in results if r.wrote_offset < first_end)
    raw = store.commit_log.read(last_in_first, 8) or \
        store.commit_log.mapped_files.files[0].read(last_in_first, 8, unchecked=True)
    assert int.from_bytes(raw[4:8], "big", signed=True) == BLANK_MAGIC
    assert int.from_bytes(raw[:4], "big") == first_end - last_in_first
    wait_dispatched(store)
    assert store.get_max_offset_in_queue("TopicA", 0) == 200


def test_batch_is_contiguous_and_all_or_nothing(store):
    batch = [Message("TopicB", b"b%d" % i, queue_id=2, keys=[f"bk{i}"]) for i in range(5)]
    result = store.put_messages(batch)
    assert result.ok and result.message_count == 5 and len(result.msg_ids) == 5
    wait_dispatched(store)
    got = store.get_message("g", "TopicB", 2, 0, 32)
    assert [m.body for m in got.messages] == [b"b%d" % i for i in range(5)]
    mixed = store.put_messages([Message("TopicB", b"x"), Message("TopicC", b"y")])
    assert mixed.status is PutMessageStatus.MESSAGE_ILLEGAL


@pytest.mark.parametrize("topic", ["../evil", "a/b", "", "x" * 128, "nul\x00", "spa ce"])
def test_invalid_topics_are_refused_and_write_nothing(store, topic):
    result = store.put_message(Message(topic, b"x"))
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL and result.error
    assert store.commit_log.max_wrote_offset() == 0


def test_oversized_body_and_properties_are_refused(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type, max_message_size=1024)
    with MessageStore.open(config) as store:
        assert store.put_message(Message("T", b"x" * 1025)).status is \
            PutMessageStatus.MESSAGE_ILLEGAL
        huge = store.put_message(Message("T", b"x", properties={"p": "v" * 40000}))
        assert huge.status in (PutMessageStatus.MESSAGE_ILLEGAL,
                               PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        assert store.commit_log.max_wrote_offset() == 0


def test_reopen_after_clean_close_keeps_everything(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type)
    with MessageStore.open(config) as store:
        for i in range(150):
            store.put_message(Message("TopicA", b"v%d" % i, queue_id=i % 2, keys=[f"k{i}"]))
        store.commit_consumer_offset("g1", "TopicA", 0, 7)
    assert not os.path.exists(os.path.join(config.store_path_root_dir, "abort"))
    with MessageStore.open(config) as store:
        assert store.recovery_report.mode == "normal"
        assert store.get_max_offset_in_queue("TopicA", 0) == 75
        assert store.query_consumer_offset("g1", "TopicA", 0) == 7
        assert store.query_message("TopicA", "k149").messages[0].body == b"v149"
        result = store.put_message(Message("TopicA", b"next"))
        assert result.queue_offset == 75


def test_time_lookup(tmp_path, store_type):
    clock = FakeClock(step_ms=0)
    config = small_config(tmp_path / "s", store_type)
    with MessageStore.open(config, clock_ms=clock) as store:
        for i in range(20):
            store.put_message(Message("T", b"x"))
            clock.advance(1000)
        wait_dispatched(store)
        start = 1_700_000_000_000
        assert store.get_offset_in_queue_by_time("T", 0, start + 5000, "lower") == 5
        assert store.get_offset_in_queue_by_time("T", 0, start + 5500, "lower") == 6
        assert store.get_offset_in_queue_by_time("T", 0, start + 5500, "upper") == 5
        assert store.get_offset_in_queue_by_time("T", 0, start + 5400, "nearest") == 5


def test_long_polling_releases_on_arrival(store):
    store.put_message(Message("T", b"first"))
    wait_dispatched(store)
    box = {}

    def pull():
        box["result"] = store.get_message("g", "T", 0, 1, 32, long_poll_ms=5000)

    thread = threading.Thread(target=pull)
    started = time.monotonic()
    thread.start()
    time.sleep(0.2)
    store.put_message(Message("T", b"second"))
    thread.join(10)
    elapsed = time.monotonic() - started
    assert box["result"].status is GetMessageStatus.FOUND
    assert box["result"].messages[0].body == b"second"
    assert elapsed < 4.0


def test_long_polling_times_out(store):
    store.put_message(Message("T", b"only"))
    wait_dispatched(store)
    result = store.get_message("g", "T", 0, 1, 32, long_poll_ms=300)
    assert result.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert result.waited_ms >= 250


def test_pointers_move(store):
    before = store.pointers()
    assert set(before) == {"wrote", "committed", "flushed", "reput", "confirm",
                           "min_phy_offset", "max_phy_offset"}
    store.put_message(Message("T", b"x" * 100))
    wait_dispatched(store)
    after = store.pointers()
    assert after["wrote"] > before["wrote"] and after["reput"] == after["wrote"]


def test_sync_flush_acknowledges_only_flushed(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type, flush_disk_type="SYNC_FLUSH")
    with MessageStore.open(config) as store:
        result = store.put_message(Message("T", b"durable"))
        assert result.ok
        assert store.pointers()["flushed"] >= result.wrote_offset + result.wrote_bytes


def test_transient_store_pool_commit(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type, transient_store_pool_enable=True,
                          commit_interval_commit_log=10)
    with MessageStore.open(config) as store:
        result = store.put_message(Message("T", b"pooled"))
        assert result.ok
        wait_dispatched(store)
        assert store.get_message("g", "T", 0, 0).messages[0].body == b"pooled"
    with MessageStore.open(config) as store:
        assert store.get_message("g", "T", 0, 0).messages[0].body == b"pooled"


def test_read_only_store_refuses_puts(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type)
    with MessageStore.open(config) as store:
        store.put_message(Message("T", b"x"))
    with MessageStore.open(config, read_only=True) as store:
        result = store.put_message(Message("T", b"y"))
        assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert store.get_message("g", "T", 0, 0).messages[0].body == b"x"


def test_second_writer_is_locked_out(tmp_path, store_type):
    from store import StoreLockedError
    config = small_config(tmp_path / "s", store_type)
    with MessageStore.open(config):
        with pytest.raises(StoreLockedError):
            MessageStore.open(config)


def test_crash_then_abnormal_recovery_keeps_written_messages(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type)
    store = MessageStore.open(config)
    results = [store.put_message(Message("T", b"m%d" % i, keys=[f"k{i}"])) for i in range(120)]
    store.crash()
    assert os.path.exists(os.path.join(config.store_path_root_dir, "abort"))
    with MessageStore.open(config) as reopened:
        assert reopened.recovery_report.mode == "abnormal"
        assert reopened.get_max_offset_in_queue("T", 0) == 120
        got = reopened.get_message("g", "T", 0, 119)
        assert got.messages[0].body == b"m119"
        assert reopened.query_message("T", "k7").messages[0].commit_log_offset == \
            results[7].wrote_offset
        assert reopened.put_message(Message("T", b"after")).queue_offset == 120
    assert not os.path.exists(os.path.join(config.store_path_root_dir, "abort"))


def test_missing_consume_queue_is_rebuilt(tmp_path):
    # File layout only: a queue directory is what an operator can delete by hand.
    import shutil
    config = small_config(tmp_path / "s", "default")
    with MessageStore.open(config) as store:
        for i in range(250):
            store.put_message(Message("T", b"m%d" % i, queue_id=i % 2))
    shutil.rmtree(os.path.join(config.store_path_root_dir, "consumequeue", "T", "1"))
    # RocketMQ's restart re-dispatches only from the other queues' end: of T/1 only the last
    # record (m249, after T/0's last) comes back (tests/test_deleted_queue.py); the repair asks
    # for the rebuild.
    with MessageStore.open(config) as store:
        assert store.recovery_report.incomplete_queues == [("T", 1)]
        assert store.recovery_report.redispatched_records == 1
        assert store.get_message("g", "T", 1, 124).messages[0].body == b"m249"
    from store.errors import ConfigError
    with pytest.raises(ConfigError, match="still has units"):
        MessageStore.open(config, rebuild_queues=[("T", 1)])
    shutil.rmtree(os.path.join(config.store_path_root_dir, "consumequeue", "T", "1"))
    with MessageStore.open(config, rebuild_queues=[("T", 1)]) as store:
        assert store.recovery_report.rebuilt_queues == [("T", 1)]
        assert store.recovery_report.redispatched_records >= 125
        assert store.get_max_offset_in_queue("T", 1) == 125
        assert store.get_message("g", "T", 1, 0).messages[0].body == b"m1"
        assert store.get_max_offset_in_queue("T", 0) == 125
