"""LMQ multi-dispatch (enableLmq / enableMultiDispatch, rocketmq-all-5.3.3's LmqDispatch,
ConsumeQueue.multiDispatchLmqQueue, MultiDispatchUtils): put, dispatch, pull, recovery, check.

No real fixture was written with LMQ: the expectations are the rules of the source (quoted in
store/consumequeue/lmq.py), checked on records the engine writes."""

from __future__ import annotations

import os
import shutil

import pytest

from store import Message, MessageStore
from store.api import GetMessageStatus
from store.check.run import check_store
from store.codec.message import DispatchRequest, decode_message
from store.consumequeue.lmq import (LmqOffsets, is_lmq, java_split, lmq_requests,
                                    topic_allows_lmq)
from tests.engine_util import small_config

MULTI = "INNER_MULTI_DISPATCH"
OFFSETS = "INNER_MULTI_QUEUE_OFFSET"


def _request(properties, topic="T", queue_id=3):
    return DispatchRequest(topic, queue_id, 1000, 200, 7, 1, 42, "", None, 0, 0, properties)


@pytest.mark.parametrize("text, parts", [("a", ["a"]), ("a,b", ["a", "b"]), ("a,,b", ["a", "", "b"]),
                                         ("a,b,,", ["a", "b"]), (",a", ["", "a"]), (",", []),
                                         ("", [""])])
def test_java_split(text, parts):
    assert java_split(text) == parts


def test_rules_of_names_and_topics():
    assert is_lmq("%LMQ%x") and not is_lmq("x") and not is_lmq(None)
    assert topic_allows_lmq("T") and not topic_allows_lmq("%RETRY%g")
    assert not topic_allows_lmq("rmq_sys_wheel_timer") and not topic_allows_lmq("SCHEDULE_TOPIC_XXXX")
    assert LmqOffsets.names_of("T", {MULTI: "%LMQ%a,%LMQ%b"}) == ["%LMQ%a", "%LMQ%b"]
    assert LmqOffsets.names_of("T", {MULTI: "  "}) is None
    assert LmqOffsets.names_of("%RETRY%g", {MULTI: "%LMQ%a"}) is None


def test_offsets_start_at_the_queue_max_and_move_after_the_append():
    asked = []
    offsets = LmqOffsets(lambda topic, queue_id: asked.append((topic, queue_id)) or 5)
    names = ["%LMQ%a", "plain", "%LMQ%a"]
    assert offsets.assign(names) == "5,,5"          # both read before the increments
    offsets.advance(names)
    assert offsets.assign(["%LMQ%a"]) == "7"         # updateLmqOffsets: +1 per listed name
    assert asked == [("%LMQ%a", 0)]


def test_dispatch_requests():
    base = {MULTI: "%LMQ%a,%LMQ%b", OFFSETS: "4,9"}
    got = lmq_requests(_request(base), base, enable_lmq=True)
    assert [(r.topic, r.queue_id, r.consume_queue_offset, r.commit_log_offset, r.msg_size,
             r.tags_code) for r in got] == [("%LMQ%a", 0, 4, 1000, 200, 7), ("%LMQ%b", 0, 9, 1000, 200, 7)]
    without_lmq = lmq_requests(_request(base), base, enable_lmq=False)
    assert [r.queue_id for r in without_lmq] == [3, 3]        # the record's queue id
    assert lmq_requests(_request(base), {MULTI: "%LMQ%a,%LMQ%b", OFFSETS: "4"},
                        enable_lmq=True) == []                 # lengths differ
    assert [r.topic for r in lmq_requests(_request(base), {MULTI: "%LMQ%a,x/y", OFFSETS: "1,2"},
                                          enable_lmq=True)] == ["%LMQ%a"]   # File.separator
    assert [r.topic for r in lmq_requests(_request(base), {MULTI: "%LMQ%a,%LMQ%b", OFFSETS: "x,2"},
                                          enable_lmq=True)] == ["%LMQ%b"]   # not a number
    assert lmq_requests(_request(base, topic="%RETRY%g"), base, enable_lmq=True) == []


def _config(tmp_path, **overrides):
    values = dict(store_format="5.x", enable_lmq=True, enable_multi_dispatch=True)
    values.update(overrides)
    return small_config(tmp_path / "s", **values)


def _put_all(store):
    """20 messages to T (queues 0/1); even ones to %LMQ%a and %LMQ%b, the others to %LMQ%a."""
    results = []
    for i in range(20):
        names = "%LMQ%a,%LMQ%b" if i % 2 == 0 else "%LMQ%a"
        results.append(store.put_message(Message("T", b"m%d" % i, queue_id=i % 2, tags="t",
                                                 properties={MULTI: names})))
    return results


def _open(config, **kwargs):
    """Opened without the reput thread: the test dispatches (`do_reput`) when it wants."""
    return MessageStore.open(config, start_services=False, **kwargs)


def _lmq_bodies(store, name):
    store.services.reput.do_reput()
    high = store.get_max_offset_in_queue(name, 0)
    got = store.get_message("g", name, 0, 0, 64)
    assert got.status == GetMessageStatus.FOUND and got.next_begin_offset == high
    return [m.body for m in got.messages]


def test_put_writes_offsets_dispatch_adds_units_pulls_return_the_record(tmp_path):
    config = _config(tmp_path)
    with _open(config) as store:
        results = _put_all(store)
        assert all(r.ok for r in results)
        for i, result in enumerate(results):
            record = decode_message(store.inspect.record_bytes(result.wrote_offset))
            expected = f"{i},{i // 2}" if i % 2 == 0 else f"{i}"
            assert record.properties[OFFSETS] == expected
            assert record.properties[MULTI] == ("%LMQ%a,%LMQ%b" if i % 2 == 0 else "%LMQ%a")
        store.services.reput.do_reput()
        assert _lmq_bodies(store, "%LMQ%a") == [b"m%d" % i for i in range(20)]
        assert _lmq_bodies(store, "%LMQ%b") == [b"m%d" % i for i in range(0, 20, 2)]
        assert store.get_max_offset_in_queue("T", 0) == 10       # own units unchanged
        assert [f for f in check_store(store) if f.severity == "error"] == []
    with _open(config) as store:                      # offsets continue after restart
        result = store.put_message(Message("T", b"late", properties={MULTI: "%LMQ%b,%LMQ%c"}))
        record = decode_message(store.inspect.record_bytes(result.wrote_offset))
        assert record.properties[OFFSETS] == "10,0"
        assert _lmq_bodies(store, "%LMQ%c") == [b"late"]


def test_lmq_off_writes_nothing_and_dispatch_off_adds_no_unit(tmp_path):
    with _open(_config(tmp_path, enable_lmq=False)) as store:
        result = store.put_message(Message("T", b"x", properties={MULTI: "%LMQ%a"}))
        assert OFFSETS not in decode_message(store.inspect.record_bytes(result.wrote_offset)).properties
        assert store.get_max_offset_in_queue("%LMQ%a", 0) == 0
    with _open(_config(tmp_path, enable_multi_dispatch=False)) as store:
        store.put_message(Message("T", b"y", properties={MULTI: "%LMQ%a"}))
        assert store.get_max_offset_in_queue("%LMQ%a", 0) == 0


def test_deleted_lmq_queue_is_rebuilt_from_the_records(tmp_path):
    config = _config(tmp_path)
    with _open(config) as store:
        _put_all(store)
    shutil.rmtree(os.path.join(config.store_path_root_dir, "consumequeue", "%LMQ%b"))
    with _open(config, rebuild_queues=[("%LMQ%b", 0)]) as store:
        assert _lmq_bodies(store, "%LMQ%b") == [b"m%d" % i for i in range(0, 20, 2)]
        assert _lmq_bodies(store, "%LMQ%a") == [b"m%d" % i for i in range(20)]
        assert [f for f in check_store(store) if f.severity == "error"] == []


def test_crash_recovery_rebuilds_lmq_units(tmp_path):
    config = _config(tmp_path)
    store = _open(config)
    _put_all(store)
    store.services.reput.do_reput()
    store.crash()
    open(os.path.join(config.store_path_root_dir, "abort"), "wb").close()   # as a killed broker
    shutil.rmtree(os.path.join(config.store_path_root_dir, "consumequeue", "%LMQ%a"))
    with _open(config) as reopened:
        report = reopened.recovery_report
        assert report.mode == "abnormal" and report.dispatch_from == 0   # one segment: all of it
        assert _lmq_bodies(reopened, "%LMQ%a") == [b"m%d" % i for i in range(20)]


def test_check_flags_an_lmq_unit_the_record_does_not_list(tmp_path):
    config = _config(tmp_path)
    with _open(config) as store:
        _put_all(store)
    path = os.path.join(config.store_path_root_dir, "consumequeue", "%LMQ%b", "0",
                        "00000000000000000000")
    with open(path, "r+b") as handle:            # unit 1 now points at record m1 (not listed in b)
        first = handle.read(40)
    with MessageStore.open(config, read_only=True) as store:
        m1 = store.get_message("g", "T", 1, 0).messages[0]
    with open(path, "r+b") as handle:
        handle.seek(20)
        handle.write(m1.commit_log_offset.to_bytes(8, "big") + first[28:40])
    with MessageStore.open(config, read_only=True) as store:
        errors = [f for f in check_store(store) if f.severity == "error"]
    assert len(errors) == 1 and "%LMQ%b/0 unit 1" in errors[0].message, errors


def test_arrivals_name_the_lmq_queues(tmp_path):
    """notifyMessageArrive4MultiQueue: long polling on an LMQ queue learns its new max offset."""
    seen = {}
    with _open(_config(tmp_path)) as store:
        store.services.reput.add_listener(seen.update)
        store.put_message(Message("T", b"a", properties={MULTI: "%LMQ%w,%LMQ%v"}))
        store.put_message(Message("T", b"b", properties={MULTI: "%LMQ%w"}))
        store.services.reput.do_reput()
    assert seen[("%LMQ%w", 0)] == 2 and seen[("%LMQ%v", 0)] == 1 and seen[("T", 0)] == 2
