"""Delay-level delivery (store/services/schedule.py, RocketMQ 4.9.7's ScheduleMessageService) with a
fake clock: every default level, the message that comes out, the offsets and their file, restarts,
read-only opens, the 5.x format, refusals and the running thread."""

from __future__ import annotations

import os
import time

import pytest

from store import Message, MessageStore
from store.api import GetMessageStatus
from store.codec import message as msgcodec
from store.codec.javahash import tags_code
from store.codec.properties import decode_properties, encode_properties
from store.errors import CorruptDataError
from store.services.schedule import DeliveryRefused, build_delivery
from tests.engine_util import FakeClock, small_config
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, tree_fingerprint
from tests.fixtures_util import store_config as fixture_store_config

DEFAULT_LEVELS_MS = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
                     420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000]
SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def open_store(root, clock, **overrides):
    overrides.setdefault("store_format", "4.9")
    return MessageStore.open(small_config(root, **overrides), clock_ms=clock, start_services=False)


def delayed(topic="RealT", level=1, queue_id=0, body=b"b", **kw):
    props = dict(kw.pop("properties", {}) or {})
    props["DELAY"] = str(level)
    return Message(topic, body, queue_id=queue_id, properties=props, **kw)


def deliver(store) -> int:
    store.dispatch_pending()
    count = store.deliver_delayed()
    store.dispatch_pending()
    return count


def read_queue(store, topic, queue_id):
    out, offset = [], 0
    for _ in range(10_000):
        result = store.get_message("g", topic, queue_id, offset, 32)
        if result.status is not GetMessageStatus.FOUND:
            break
        out.extend(result.messages)
        offset = result.next_begin_offset
    return out


@pytest.mark.parametrize("level", range(1, 19))
def test_every_default_level_waits_its_delay_then_delivers(tmp_path, level):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        put = store.put_message(delayed(level=level, queue_id=2, tags="TagA", keys="k1 k2",
                                        flag=7, born_host="10.0.0.9:4321", born_timestamp=123,
                                        properties={"user": "u"}))
        assert put.ok
        schedule_record = store.look_message_by_offset(put.wrote_offset)
        assert schedule_record.topic == SCHEDULE and schedule_record.queue_id == level - 1
        store.dispatch_pending()
        view = store.inspect.delay_levels()[level - 1]
        assert (view.delay_ms, view.queue_id, view.pending, view.delivered_offset) == \
            (DEFAULT_LEVELS_MS[level - 1], level - 1, 1, 0)
        assert view.next_due_ms == schedule_record.store_timestamp + DEFAULT_LEVELS_MS[level - 1]
        clock.advance(DEFAULT_LEVELS_MS[level - 1] - 1)
        assert deliver(store) == 0
        assert read_queue(store, "RealT", 2) == []
        clock.advance(1)
        assert deliver(store) == 1
        [got] = read_queue(store, "RealT", 2)
        assert got.body == b"b" and got.flag == 7 and got.born_timestamp == 123
        assert got.born_host == "10.0.0.9:4321" and got.store_host == schedule_record.store_host
        assert got.store_timestamp == clock.now
        # messageTimeup serializes the properties before clearing DELAY: all of them stay.
        assert got.properties == schedule_record.properties
        assert got.properties_raw == encode_properties(schedule_record.properties, style="4.9")
        assert got.properties["DELAY"] == str(level) and got.properties["REAL_QID"] == "2"
        unit = store.inspect.queue_unit("RealT", 2, 0)
        assert unit.tags_code == tags_code("TagA") and unit.phy_offset == got.commit_log_offset
        after = store.inspect.delay_levels()[level - 1]
        assert (after.pending, after.delivered_offset, after.next_due_ms) == (0, 1, None)
        assert deliver(store) == 0             # delivered once
    text = (tmp_path / "config" / "delayOffset.json").read_bytes()
    assert text == b'{\n\t"offsetTable":{%d:1\n\t}\n}' % level


def test_a_level_over_the_maximum_is_clamped_and_the_stored_delay_says_so(tmp_path):
    """CommitLog.asyncPutMessage: setDelayTimeLevel(maxDelayLevel) rewrites DELAY (regression: the
    put path used to keep DELAY=99 while filing the message under level 18)."""
    clock = FakeClock()
    with open_store(tmp_path, clock, message_delay_level="2s 3m") as store:
        put = store.put_message(delayed(level=99))
        record = store.look_message_by_offset(put.wrote_offset)
        assert (record.queue_id, record.properties["DELAY"]) == (1, "2")
        store.dispatch_pending()
        assert [v.delay_ms for v in store.inspect.delay_levels()] == [2000, 180000]
        clock.advance(179_999)
        assert deliver(store) == 0
        clock.advance(1)
        assert deliver(store) == 1


def test_a_level_delivers_in_order_and_stops_at_the_first_message_not_due(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        for n in range(5):
            assert store.put_message(delayed(level=2, body=b"m%d" % n)).ok
            clock.advance(1000)
        # store times T, T+1s ... T+4s; due at +5 s each. Now T+5s: only m0 is due.
        assert deliver(store) == 1
        clock.advance(2000)                       # T+7s: m1, m2
        assert deliver(store) == 2
        assert [m.body for m in read_queue(store, "RealT", 0)] == [b"m0", b"m1", b"m2"]
        view = store.inspect.delay_levels()[1]
        assert (view.delivered_offset, view.pending, view.max_offset) == (3, 2, 5)
        pending = store.inspect.scheduled_messages_of_level(2)
        assert [u.queue_offset for u in pending] == [3, 4]
        assert pending[0].deliver_ms == view.next_due_ms


def test_a_delivery_time_beyond_now_plus_the_delay_counts_as_now(tmp_path):
    """correctDeliverTimestamp: after the clock went back, a unit due later than now + delay is due."""
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        store.put_message(delayed(level=1))
        store.dispatch_pending()
        clock.now -= 3_600_000                    # the wall clock stepped back an hour
        assert deliver(store) == 1


def test_levels_are_independent_and_the_file_lists_them_in_map_order(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        for level in (3, 1, 3, 17):
            store.put_message(delayed(level=level, body=b"L%d" % level))
        clock.advance(10_000)
        assert deliver(store) == 3
    text = (tmp_path / "config" / "delayOffset.json").read_bytes()
    assert text == b'{\n\t"offsetTable":{1:1,3:2\n\t}\n}'


def test_clean_restart_continues_where_it_stopped(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        for n in range(6):
            store.put_message(delayed(level=1, body=b"%d" % n))
            clock.advance(500)
        assert deliver(store) == 5                # due at +1 .. +3.5 s; now +3 s
    with open_store(tmp_path, clock) as store:
        assert store.inspect.delay_levels()[0].delivered_offset == 5
        clock.advance(10_000)
        assert deliver(store) == 1
        assert [m.body for m in read_queue(store, "RealT", 0)] == [b"%d" % n for n in range(6)]


def test_after_a_crash_what_was_delivered_since_the_last_persist_comes_again(tmp_path):
    clock = FakeClock()
    store = open_store(tmp_path, clock)
    for n in range(6):
        store.put_message(delayed(level=1, body=b"%d" % n))
    clock.advance(1000)
    assert deliver(store) == 6
    store.crash()
    # Nothing was persisted: a crash before the first persist re-delivers all six (RocketMQ too).
    store = open_store(tmp_path, clock)
    assert store.inspect.delay_levels()[0].delivered_offset == 0
    assert deliver(store) == 6
    bodies = [m.body for m in read_queue(store, "RealT", 0)]
    assert sorted(bodies) == sorted([b"%d" % n for n in range(6)] * 2)
    store.close()


def test_after_a_crash_only_deliveries_after_the_persist_are_repeated(tmp_path):
    clock = FakeClock()
    store = open_store(tmp_path, clock)
    for n in range(6):
        store.put_message(delayed(level=1, body=b"%d" % n))
        clock.advance(100)
    clock.advance(1000)
    store.dispatch_pending()
    clock.now -= 450                               # only the first two are due
    assert store.deliver_delayed() == 2
    store.services.schedule.persist()              # the periodic persist
    clock.advance(10_000)
    assert deliver(store) == 4
    store.crash()
    store = open_store(tmp_path, clock)
    assert store.inspect.delay_levels()[0].delivered_offset == 2
    assert deliver(store) == 4
    bodies = [m.body for m in read_queue(store, "RealT", 0)]
    assert sorted(bodies) == sorted([b"0", b"1"] + [b"%d" % n for n in range(2, 6)] * 2)
    store.close()


def test_a_stored_offset_outside_the_queue_is_corrected_at_open(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        store.put_message(delayed(level=2))
    (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable":{2:50,5:7}}')
    with open_store(tmp_path, clock) as store:
        views = store.inspect.delay_levels()
        assert (views[1].delivered_offset, views[4].delivered_offset) == (1, 0)
        clock.advance(60_000)
        assert deliver(store) == 0                # offset 1 = the end: nothing left to deliver
    assert (tmp_path / "config" / "delayOffset.json").read_bytes() == \
        b'{\n\t"offsetTable":{2:1,5:0\n\t}\n}'


def test_read_only_open_delivers_nothing_and_shows_what_is_pending(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        store.put_message(delayed(level=1))
        store.put_message(delayed(level=4))
        clock.advance(1000)
        assert deliver(store) == 1
    before = tree_fingerprint(str(tmp_path))
    clock.advance(3_600_000)
    with MessageStore.open(small_config(tmp_path, store_format="4.9"), read_only=True,
                           clock_ms=clock) as store:
        assert store.deliver_delayed() == 0
        views = store.inspect.delay_levels()
        assert [(v.level, v.pending, v.delivered_offset) for v in views if v.max_offset] == \
            [(1, 0, 1), (4, 1, 0)]
        state = store.inspect.schedule_state()
        assert state["delivering"] is False and state["offsets_source"] == "file"
    assert tree_fingerprint(str(tmp_path)) == before


def test_a_5x_store_keeps_delay_levels_for_its_broker(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock, store_format="5.x") as store:
        store.put_message(delayed(level=1))
        clock.advance(60_000)
        assert deliver(store) == 0
        assert store.inspect.delay_levels()[0].pending == 1
    assert not os.path.exists(tmp_path / "config" / "delayOffset.json")


def test_refused_puts_hold_the_level_until_they_are_accepted(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        store.put_message(delayed(level=1))
        clock.advance(1000)
        store.dispatch_pending()
        store.services.cleanup.disk_full = True
        assert store.deliver_delayed() == 0
        assert "refused" in store.inspect.delay_levels()[0].last_error
        store.services.cleanup.disk_full = False
        assert store.deliver_delayed() == 1
        assert store.inspect.delay_levels()[0].last_error is None


def test_a_committed_transaction_is_delayed_and_delivered_with_its_sys_flag(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        put = store.put_message(delayed(level=1, sys_flag=0x08))
        assert store.look_message_by_offset(put.wrote_offset).topic == SCHEDULE
        clock.advance(1000)
        assert deliver(store) == 1
        [got] = read_queue(store, "RealT", 0)
        assert got.sys_flag & 0x0C == 0x08


def test_a_real_topic_of_the_half_topic_is_discarded_and_the_walk_moves_on(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        store.put_message(delayed(topic="RMQ_SYS_TRANS_HALF_TOPIC", level=1))
        store.put_message(delayed(level=1, body=b"after"))
        clock.advance(1000)
        assert deliver(store) == 1
        assert read_queue(store, "RMQ_SYS_TRANS_HALF_TOPIC", 0) == []
        assert [m.body for m in read_queue(store, "RealT", 0)] == [b"after"]
        assert store.inspect.delay_levels()[0].delivered_offset == 2


def _schedule_record(properties):
    raw = msgcodec.encode_message(topic=SCHEDULE, queue_id=0, body=b"x",
                                  properties_raw=encode_properties(properties),
                                  born_timestamp=1, born_host="127.0.0.1:1", store_timestamp=2,
                                  store_host="127.0.0.1:10911")
    return msgcodec.decode_message(raw)


@pytest.mark.parametrize("properties", [
    {"DELAY": "1", "REAL_QID": "0"},                          # no REAL_TOPIC
    {"DELAY": "1", "REAL_TOPIC": "T"},                        # no REAL_QID
    {"DELAY": "1", "REAL_TOPIC": "T", "REAL_QID": "zero"},    # Integer.parseInt throws
    {"DELAY": "1", "REAL_TOPIC": "T", "REAL_QID": "70000"},
    {"DELAY": "1", "REAL_TOPIC": "T" * 200, "REAL_QID": "0"},  # does not fit a v1 record
])
def test_a_record_whose_destination_cannot_be_used_is_refused(properties):
    with pytest.raises(DeliveryRefused):
        build_delivery(_schedule_record(properties))


def test_a_record_put_straight_into_the_schedule_topic_without_delay_is_delivered():
    """No DELAY (a producer wrote SCHEDULE_TOPIC_XXXX itself, with REAL_TOPIC/REAL_QID): the unit's
    tagsCode is a tag hash, due at once, and the rewrite has no DELAY to clear (was a KeyError)."""
    encoded, draft = build_delivery(_schedule_record({"REAL_TOPIC": "T", "REAL_QID": "0"}))
    assert msgcodec.decode_message(encoded).topic == "T" and draft.properties == \
        {"REAL_TOPIC": "T", "REAL_QID": "0"}


def test_the_delivered_record_keeps_the_properties_string_of_the_decoded_map():
    record = _schedule_record({"DELAY": "3", "REAL_TOPIC": "T", "REAL_QID": "1", "TAGS": "a",
                               "KEYS": "k", "UNIQ_KEY": "U"})
    encoded, draft = build_delivery(record)
    out = msgcodec.decode_message(encoded)
    assert (out.topic, out.queue_id, out.body) == ("T", 1, b"x")
    assert decode_properties(out.properties_raw) == record.properties
    assert "DELAY" not in draft.properties and draft.tags_code == tags_code("a")
    assert (draft.keys, draft.uniq_key) == ("k", "U")


def test_the_running_service_delivers_on_its_own(tmp_path):
    """The thread: first pass after FIRST_DELAY_MS (1 s), then every 100 ms. Waits on the result,
    with a generous deadline, never on a duration."""
    clock = FakeClock()
    store = MessageStore.open(small_config(tmp_path, store_format="4.9"), clock_ms=clock)
    try:
        store.put_message(delayed(level=1, body=b"threaded"))
        clock.advance(1000)
        deadline = time.monotonic() + 30
        while not read_queue(store, "RealT", 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [m.body for m in read_queue(store, "RealT", 0)] == [b"threaded"]
        assert store.inspect.schedule_state()["delivering"] is True
    finally:
        store.close()
    assert (tmp_path / "config" / "delayOffset.json").read_bytes() == \
        b'{\n\t"offsetTable":{1:1\n\t}\n}'


def test_a_slave_never_delivers(tmp_path):
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        store.put_message(delayed(level=1))
    store = MessageStore.open(small_config(tmp_path, store_format="4.9", broker_role="SLAVE"),
                              clock_ms=clock)
    try:
        clock.advance(5000)
        assert store.inspect.schedule_state()["delivering"] is False
        assert store.deliver_delayed() == 0
        assert "slave" in store.inspect.delay_levels()[0].last_error
    finally:
        store.close()


@pytest.mark.parametrize("fixture", [d for d in fixture_dirs() if "4.9.7" in d],
                         ids=lambda d: fixture_id(d))
def test_real_4_9_7_stores_deliver_and_keep_their_offset_file_format(tmp_path, fixture):
    root = copy_store(fixture, str(tmp_path))
    clock = FakeClock(start_ms=time.time_ns() // 1_000_000)
    config = fixture_store_config(fixture, root, store_format="4.9")
    with MessageStore.open(config, clock_ms=clock, start_services=False) as store:
        assert [v.pending for v in store.inspect.delay_levels()] == [0] * 18
        put = store.put_message(delayed(topic="TopicA", level=2, body=b"late"))
        before = store.get_max_offset_in_queue("TopicA", 0)
        clock.advance(5000)
        assert deliver(store) == 1
        got = store.get_message("g", "TopicA", 0, before, 1).messages
        assert [m.body for m in got] == [b"late"] and put.ok
    path = os.path.join(root, "config", "delayOffset.json")
    assert open(path, "rb").read() == b'{\n\t"offsetTable":{2:1\n\t}\n}'


def test_a_broken_offset_file_falls_back_as_rocketmq_does_and_says_so(tmp_path):
    """ConfigManager.load: a file that does not decode sends the load to the .bak; with no .bak the
    table starts empty (everything pending is delivered again). Both broken: the open fails naming
    the .bak and the store can be opened once it is fixed."""
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        store.put_message(delayed(level=1))
        clock.advance(1000)
        assert deliver(store) == 1
    config_dir = tmp_path / "config"
    (config_dir / "delayOffset.json").write_text('{"offsetTable":{1:')
    with open_store(tmp_path, clock) as store:
        state = store.inspect.schedule_state()
        assert any("does not load" in w for w in state["offsets_warnings"])
        assert store.inspect.delay_levels()[0].delivered_offset == 0
    (config_dir / "delayOffset.json").write_text('{"offsetTable":{1:')
    (config_dir / "delayOffset.json.bak").write_text('{"offsetTable":{1:"x"}}')
    with pytest.raises(CorruptDataError, match="delayOffset.json.bak"):
        open_store(tmp_path, clock)
    (config_dir / "delayOffset.json.bak").unlink()
    with open_store(tmp_path, clock) as store:
        assert store.inspect.delay_levels()[0].max_offset == 1


def test_every_level_across_clean_restarts(tmp_path):
    """One message per default level, the store closed and reopened at each step: level n comes out
    exactly when its delay has passed, once, and delayOffset.json grows level by level."""
    clock = FakeClock()
    with open_store(tmp_path, clock) as store:
        for level in range(1, 19):
            assert store.put_message(delayed(level=level, body=b"L%d" % level)).ok
    start = clock.now
    for level, delay_ms in enumerate(DEFAULT_LEVELS_MS, start=1):
        clock.now = start + delay_ms - 1
        with open_store(tmp_path, clock) as store:
            assert deliver(store) == 0, level
        clock.now = start + delay_ms
        with open_store(tmp_path, clock) as store:
            assert deliver(store) == 1, level
            assert [m.body for m in read_queue(store, "RealT", 0)] == \
                [b"L%d" % n for n in range(1, level + 1)]
        expected = ",".join(f"{n}:1" for n in range(1, level + 1)).encode()
        assert (tmp_path / "config" / "delayOffset.json").read_bytes() == \
            b'{\n\t"offsetTable":{' + expected + b'\n\t}\n}'
