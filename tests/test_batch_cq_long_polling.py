"""Long polling on a [5.x] batch queue (topics.json `queue.type=BatchCQ`): a pull that finds nothing
parks on the hold service like a pull on an ordinary queue and wakes when dispatch writes a batch
unit (the broker's PullRequestHoldService serves every ConsumeQueueInterface alike; the reput's
arrival for a batch record is its QUEUEOFFSET, the base, + 1)."""

from __future__ import annotations

import threading

from store import Message, MessageStore
from store.api import GetMessageStatus
from store.meta.topic_config import TopicConfig
from tests.engine_util import small_config

WAIT_S = 20          # a bound for a broken test, never reached when it passes


def _batch_store(tmp_path):
    config = small_config(tmp_path / "s", store_format="5.x",
                          mapper_file_size_batch_consume_queue=4 * 46)
    store = MessageStore.open(config, start_services=False)
    store._parts.topics.put_topic(TopicConfig("B", attributes={"queue.type": "BatchCQ"}))
    return store


def _inner_batch(body: bytes, count: int) -> Message:
    return Message("B", body, sys_flag=0x80, properties={"INNER_NUM": str(count)})


def _parked(store) -> threading.Event:
    """An event set once a pull parks on the hold service (it then waits for an arrival)."""
    parked = threading.Event()
    wait = store.services.hold.wait_for_arrival

    def waiting(*args, **kwargs):
        parked.set()
        return wait(*args, **kwargs)
    store.services.hold.wait_for_arrival = waiting
    return parked


def _pull_in_thread(store, offset: int) -> tuple[threading.Thread, dict]:
    got = {}

    def run():
        got["result"] = store.get_message("g", "B", 0, offset, 32, long_poll_ms=WAIT_S * 1000)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_a_caught_up_pull_waits_and_wakes_on_the_next_batch_unit(tmp_path):
    store = _batch_store(tmp_path)
    try:
        store.put_message(_inner_batch(b"first", 3))
        store.services.reput.do_reput()
        assert store.get_message("g", "B", 0, 3).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        parked = _parked(store)
        thread, got = _pull_in_thread(store, 3)
        assert parked.wait(WAIT_S), "the pull at the batch queue's max did not wait"
        assert store.put_message(_inner_batch(b"second", 2)).queue_offset == 3
        store.services.reput.do_reput()          # dispatch: the unit, then the arrival
        thread.join(WAIT_S)
        result = got["result"]
        assert result.status is GetMessageStatus.FOUND
        assert [m.body for m in result.messages] == [b"second"] and result.next_begin_offset == 5
    finally:
        store.close()


def test_a_pull_before_the_first_unit_waits_for_the_queue_to_appear(tmp_path):
    store = _batch_store(tmp_path)
    try:
        assert store.get_message("g", "B", 0, 0).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
        parked = _parked(store)
        thread, got = _pull_in_thread(store, 0)
        assert parked.wait(WAIT_S), "the pull on an empty batch queue did not wait"
        store.put_message(_inner_batch(b"only", 4))
        store.services.reput.do_reput()
        thread.join(WAIT_S)
        result = got["result"]
        assert result.status is GetMessageStatus.FOUND and result.next_begin_offset == 4
        assert [m.body for m in result.messages] == [b"only"]
    finally:
        store.close()


def test_a_pull_that_times_out_answers_what_it_found(tmp_path):
    store = _batch_store(tmp_path)
    try:
        store.put_message(_inner_batch(b"x", 2))
        store.services.reput.do_reput()
        parked = _parked(store)
        result = store.get_message("g", "B", 0, 2, long_poll_ms=30)
        assert parked.is_set() and result.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        # A pull that finds messages never waits.
        parked.clear()
        assert store.get_message("g", "B", 0, 1, long_poll_ms=30).status is GetMessageStatus.FOUND
        assert not parked.is_set()
    finally:
        store.close()
