"""Hosting 5.x timer messages (store/timer/hook.py, store/services/timer.py, store/timer/timer_writer.py):
the put-time rewrite against the real 5.3.3 timer fixture, delivery of the three kinds within a
second of their due time on a fake clock, a restarted master replaying the fixture's pending timers
as the real one did (`replayDelivered`), rolls, cancels, and `check()` clean after hosting."""

from __future__ import annotations

import json
import os

import pytest

from store import MessageStore
from store.api import Message, PutMessageStatus
from store.codec.message import decode_message
from store.codec.properties import java_hashmap_order
from store.config import StoreConfig
from store.timer.codec import TIMER_TOPIC
from store.timer.hook import timer_out_ms
from store.timer.timer_wheel import read_timercheck
from tests.fixtures_util import fixture_id, load_dump, store_config
from tests.test_timer_util import timer_fixtures, timer_store_copy

FIXTURES = timer_fixtures()
T0_MS = 1_800_000_000_123


class Clock:
    def __init__(self, now_ms: int):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _fresh(tmp_path, clock, **overrides):
    cfg = StoreConfig(store_path_root_dir=str(tmp_path / "store"), store_format="5.x",
                      mapped_file_size_commit_log=1 << 20, mapped_file_size_timer_log=4096,
                      **overrides)
    return MessageStore.open(cfg, clock_ms=clock, start_services=False)


def _step(store) -> int:
    store.dispatch_pending()
    delivered = store.deliver_timers()
    store.dispatch_pending()
    return delivered


def _queue(store, topic, queue_id=0):
    return store.get_message("g", topic, queue_id, 0, 1000).messages


def _names(properties_raw: bytes) -> list[str]:
    return [p.split("\x01")[0] for p in properties_raw.decode().split("\x02") if p]


def _timer_findings(store):
    return [f for f in store.check() if f.component == "timer" and f.severity != "info"]


# -- the put-time rewrite -----------------------------------------------------------------------

def _messages(fixture):
    with open(os.path.join(fixture, "messages.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _hook_clock(line, result, want, precision_ms: int) -> int:
    """The clock the real hook read lies between the born time and the store time; for a relative
    delay, the end of that range whose TIMER_OUT_MS is the stored one (both, unless a second
    boundary fell between them), else the store time (and the comparison fails)."""
    delay = {"TIMER_DELAY_SEC": 1000, "TIMER_DELAY_MS": 1}
    for name, scale in delay.items():
        if name in line["properties"] and "TIMER_OUT_MS" in want.properties:
            for now in (result["storeTimestamp"], line["bornTimestamp"]):
                due = now + int(line["properties"][name]) * scale
                if str(timer_out_ms(due, precision_ms)) == want.properties["TIMER_OUT_MS"]:
                    return now
    return result["storeTimestamp"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_put_rewrites_as_the_fixture(fixture, tmp_path):
    """Each line put at the real put's store time: same topic, queue, queue offset and properties
    bytes as the real record (TIMER_OUT_MS rounding, REAL_TOPIC/REAL_QID, past-due ones untouched)."""
    dump = load_dump(fixture)
    with open(os.path.join(fixture, "write-result.json"), encoding="utf-8") as handle:
        results = json.load(handle)
    real = timer_store_copy(fixture, tmp_path / "real", with_wheel=False)
    clock = Clock(0)
    store = MessageStore.open(store_config(fixture, str(tmp_path / "ours"), store_format="5.x"),
                              clock_ms=clock, start_services=False)
    raw = b"".join(open(os.path.join(real, "commitlog", n), "rb").read()
                   for n in sorted(os.listdir(os.path.join(real, "commitlog"))))
    kinds = set()
    try:
        for line, result in zip(_messages(fixture), results):
            want = decode_message(raw[result["wroteOffset"]:][:result["wroteBytes"]], 0)
            clock.now_ms = _hook_clock(line, result, want, store.config.timer_precision_ms)
            properties = dict(line["properties"], UNIQ_KEY=line["uniqKey"])
            ours = store.put_message(Message(
                line["topic"], line["body"].encode(), queue_id=line["queueId"], tags=line["tags"],
                keys=line["keys"], properties=properties, born_timestamp=line["bornTimestamp"],
                born_host="127.0.0.1:50000", flag=line["flag"], sys_flag=line["sysFlag"]))
            assert ours.ok and ours.queue_offset == result["logicsOffset"]
            got = decode_message(store.commit_log.read(ours.wrote_offset, ours.wrote_bytes), 0)
            assert (got.topic, got.queue_id) == (want.topic, want.queue_id)
            assert got.properties_raw == want.properties_raw, line["uniqKey"]
            if got.topic == TIMER_TOPIC:
                kinds |= set(line["properties"]) & {"TIMER_DELIVER_MS", "TIMER_DELAY_SEC",
                                                    "TIMER_DELAY_MS"}
    finally:
        store.close()
    assert kinds == {"TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"}
    assert len(dump["timerPending"]) + len(dump["timerDelivered"]) >= 95


@pytest.mark.parametrize("properties, status", [
    ({"TIMER_DELAY_SEC": str(3 * 86400 + 1)}, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL),
    ({"TIMER_DELAY_MS": "12x"}, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL),
    ({"TIMER_DELIVER_MS": " 1"}, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL),
    ({"TIMER_DELIVER_MS": "1", "TIMER_DEL_UNIQKEY": "T+U"}, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL),
])
def test_refusals(tmp_path, properties, status):
    store = _fresh(tmp_path, Clock(T0_MS))
    try:
        result = store.put_message(Message("T", b"x", properties=properties))
        assert result.status is status and result.error
        assert store.commit_log.max_offset() == 0
    finally:
        store.close()


def test_wheel_disabled_refuses_and_delay_level_wins(tmp_path):
    store = _fresh(tmp_path, Clock(T0_MS), timer_wheel_enable=False)
    try:
        refused = store.put_message(Message("T", b"x", properties={"TIMER_DELAY_SEC": "5"}))
        assert refused.status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
        level = store.put_message(Message("T", b"x", properties={"TIMER_DELAY_SEC": "5",
                                                                  "DELAY": "2"}))
        record = decode_message(store.commit_log.read(level.wrote_offset, level.wrote_bytes), 0)
        assert record.topic == "SCHEDULE_TOPIC_XXXX" and "TIMER_DELAY_SEC" not in record.properties
        past = store.put_message(Message("T", b"x", properties={"TIMER_DELIVER_MS": "5"}))
        assert past.status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
    finally:
        store.close()


def test_flow_control_when_the_slot_is_full(tmp_path):
    clock = Clock(T0_MS)
    store = _fresh(tmp_path, clock, timer_congest_num_each_slot=1)
    try:
        due = str(T0_MS + 10_000)
        for _ in range(2):
            assert store.put_message(Message("T", b"x", properties={"TIMER_DELIVER_MS": due})).ok
            _step(store)
        third = store.put_message(Message("T", b"x", properties={"TIMER_DELIVER_MS": due}))
        assert third.status is PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL
    finally:
        store.close()


# -- delivery -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value, due_ms", [
    ("TIMER_DELIVER_MS", str(T0_MS + 2_500), T0_MS + 2_500),
    ("TIMER_DELIVER_MS", str(T0_MS - T0_MS % 1000 + 4_000), T0_MS - T0_MS % 1000 + 4_000),
    ("TIMER_DELAY_SEC", "3", T0_MS + 3_000),
    ("TIMER_DELAY_MS", "1700", T0_MS + 1_700),
])
def test_each_kind_is_delivered_within_a_second(tmp_path, name, value, due_ms):
    clock = Clock(T0_MS)
    store = _fresh(tmp_path, clock)
    try:
        put = store.put_message(Message("Real", b"body-1", queue_id=3, tags="TG", keys="k1",
                                        properties={name: value, "UNIQ_KEY": "U1", "user": "v"},
                                        born_timestamp=T0_MS - 5))
        assert put.ok and put.queue_offset == 0
        delivered_at = None
        while clock.now_ms < due_ms + 3_000:
            if _step(store) and delivered_at is None:
                delivered_at = clock.now_ms
            clock.now_ms += 50
        assert delivered_at is not None and 0 <= delivered_at - due_ms <= 1000
        assert store.topics.get("Real").write_queue_nums >= 4     # noted at the put, as a broker
        copies = _queue(store, "Real", 3)
        assert len(copies) == 1 and not _queue(store, "Real", 0)
        copy = copies[0]
        out_ms = (due_ms - 1000) if due_ms % 1000 == 0 else due_ms // 1000 * 1000
        assert copy.body == b"body-1" and copy.born_timestamp == T0_MS - 5
        assert copy.properties == {
            name: value, "UNIQ_KEY": "U1", "user": "v", "TAGS": "TG", "KEYS": "k1",
            "TIMER_OUT_MS": str(out_ms), "REAL_TOPIC": "Real", "REAL_QID": "3",
            "TIMER_ENQUEUE_MS": str(T0_MS // 1000 * 1000), "TIMER_DEQUEUE_MS": str(delivered_at)}
        assert _names(copy.properties_raw) == java_hashmap_order(list(copy.properties), 128)
        assert _timer_findings(store) == []
    finally:
        store.close()


def test_past_due_at_enqueue_is_delivered_at_once(tmp_path):
    """A timer already due when enqueue reads it goes out directly, TIMER_ENQUEUE_MS = Long.MAX."""
    clock = Clock(T0_MS)
    store = _fresh(tmp_path, clock)
    try:
        assert store.put_message(Message("Real", b"b", properties={"TIMER_DELAY_MS": "1500"})).ok
        clock.now_ms += 5_000          # enqueue has not run meanwhile
        assert _step(store) == 0       # delivered by enqueue, not by a slot
        (copy,) = _queue(store, "Real")
        assert copy.properties["TIMER_ENQUEUE_MS"] == str((1 << 63) - 1)
        # addMetric skips it both ways: never counted in, never counted out.
        assert store.services.timer.metrics.counts == {}
    finally:
        store.close()


def test_roll_and_cancel(tmp_path):
    """Beyond timerRollWindowSlot a timer is rolled (re-put to rmq_sys_wheel_timer, TIMER_ROLL_TIMES)
    and still delivered on time; a TIMER_DEL_UNIQKEY message of the same time cancels its target."""
    clock = Clock(T0_MS)
    store = _fresh(tmp_path, clock, timer_roll_window_slot=10)
    try:
        due = T0_MS - T0_MS % 1000 + 30_500
        assert store.put_message(Message("Real", b"rolled", properties={
            "TIMER_DELIVER_MS": str(due), "UNIQ_KEY": "R1"})).ok
        assert store.put_message(Message("Real", b"cancelled", properties={
            "TIMER_DELAY_SEC": "5", "UNIQ_KEY": "C1"})).ok
        assert store.put_message(Message("Real", b"marker", properties={
            "TIMER_DELAY_SEC": "5", "UNIQ_KEY": "D1", "TIMER_DEL_UNIQKEY": "Real+C1"})).ok
        seen = {}
        while clock.now_ms < due + 2_000:
            _step(store)
            for message in _queue(store, "Real"):
                seen.setdefault(message.body, (clock.now_ms, message.properties))
            clock.now_ms += 100
        assert set(seen) == {b"rolled"}
        at, properties = seen[b"rolled"]
        assert 0 <= at - due <= 1000 and int(properties["TIMER_ROLL_TIMES"]) >= 1
        assert _timer_findings(store) == []
    finally:
        store.close()


# -- a restarted master on the real fixture -----------------------------------------------------

@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_restarted_master_delivers_what_rocketmq_did(fixture, tmp_path):
    dump = load_dump(fixture)
    want = dump["replayDelivered"]
    bodies = {line["uniqKey"]: line["body"].encode() for line in _messages(fixture)}
    root = timer_store_copy(fixture, tmp_path)
    clock = Clock(max(int(entry["TIMER_DEQUEUE_MS"]) for entry in want))
    before = {(q["topic"], q["queueId"]): q["maxOffset"] for q in dump["queues"]}
    config = store_config(fixture, root, timer_stop_dequeue=False)
    store = MessageStore.open(config, clock_ms=clock, start_services=False)
    try:
        recovered = store.services.timer
        after = dump["timerAfterRecovery"]
        assert (recovered.curr_read_time_ms, recovered.curr_queue_offset) == \
            (after["currReadTimeMs"], after["currQueueOffset"])
        for _ in range(20):
            _step(store)
        got = []
        for topic, queue_id in before:
            if topic == TIMER_TOPIC:
                continue
            result = store.get_message("g", topic, queue_id, before[(topic, queue_id)], 1000)
            got.extend(result.messages)

        def key(topic, queue_id, keys, uniq, properties):
            kept = {k: v for k, v in properties.items() if k != "TIMER_DEQUEUE_MS"}
            return topic, queue_id, keys, uniq, json.dumps(kept, sort_keys=True)
        assert sorted(key(m.topic, m.queue_id, m.properties.get("KEYS"), m.properties["UNIQ_KEY"],
                          m.properties) for m in got) == \
            sorted(key(e["topic"], e["queueId"], e["keys"], e["uniqKey"], e["properties"])
                   for e in want)
        assert all(m.body == bodies[m.properties["UNIQ_KEY"]] for m in got)
        # The stored properties string: the same name order as the real broker's delivered copies.
        real_orders = {}
        for queue in dump["queues"]:
            for message in queue.get("messages", []):
                if "TIMER_DEQUEUE_MS" in message.get("properties", {}):
                    names = _names(message["propertiesString"].encode())
                    real_orders[frozenset(names)] = names
        compared = [m for m in got if frozenset(_names(m.properties_raw)) in real_orders]
        assert compared
        for message in compared:
            names = _names(message.properties_raw)
            assert names == real_orders[frozenset(names)]
        assert _timer_findings(store) == []
    finally:
        store.close()
    check = read_timercheck(root).fields
    replay = dump["replayCheckpoint"]
    assert (check.last_read_time_ms, check.last_timer_queue_offset,
            check.master_timer_queue_offset, check.last_timer_log_flush_pos) == \
        (replay["lastReadTimeMs"], replay["lastTimerQueueOffset"],
         replay["masterTimerQueueOffset"], replay["lastTimerLogFlushPos"])
    with open(os.path.join(root, "config", "timermetrics"), encoding="utf-8") as handle:
        counts = {t: m["count"] for t, m in json.load(handle)["timingCount"].items()}
    assert counts and set(counts.values()) == {0}
    store = MessageStore.open(config, clock_ms=clock, start_services=False)
    try:
        assert _step(store) == 0       # nothing delivered twice after a clean shutdown
        assert _timer_findings(store) == []
    finally:
        store.close()


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_a_wheel_of_the_wrong_size_refuses_the_writable_open(fixture, tmp_path):
    """RocketMQ's TimerWheel refuses a wheel neither empty nor 38,707,200 bytes, before the message
    store loads: one error naming the file and its size, and nothing on disk changed."""
    from store.errors import CorruptDataError
    from tests.fixtures_util import tree_fingerprint
    root = timer_store_copy(fixture, tmp_path)
    wheel = os.path.join(root, "timerwheel")
    os.truncate(wheel, 1000)
    before = tree_fingerprint(root)
    with pytest.raises(CorruptDataError) as raised:
        MessageStore.open(store_config(fixture, root), start_services=False)
    assert wheel in str(raised.value) and "1000" in str(raised.value)
    assert tree_fingerprint(root) == before
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        assert store._parts.timer.state == "wheel wrong size"


def _rewrite(properties, *, topic="T", sys_flag=0, now_ms=T0_MS, **settings):
    from store.timer.hook import TimerHookSettings, rewrite_timer_message
    values = dict(wheel_enabled=True, precision_ms=1000, max_delay_sec=259200,
                  congest_num_each_slot=(1 << 31) - 1)
    values.update(settings)
    return rewrite_timer_message(Message(topic, b"x", queue_id=2, properties=properties,
                                         sys_flag=sys_flag), TimerHookSettings(**values), now_ms)


@pytest.mark.parametrize("properties, out_ms", [
    ({"TIMER_DELAY_SEC": "2", "TIMER_DELAY_MS": "9000", "TIMER_DELIVER_MS": "1"},
     (T0_MS + 2000) // 1000 * 1000),                                # DELAY_SEC first
    ({"TIMER_DELAY_MS": "9000", "TIMER_DELIVER_MS": "1"}, (T0_MS + 9000) // 1000 * 1000),
    ({"TIMER_DELIVER_MS": str(T0_MS - T0_MS % 1000 + 5000)}, T0_MS - T0_MS % 1000 + 4000),
    ({"TIMER_DELIVER_MS": "+" + str(T0_MS + 1)}, T0_MS // 1000 * 1000),   # Long.parseLong takes "+"
])
def test_hook_precedence_and_rounding(properties, out_ms):
    message = _rewrite(properties)
    assert (message.topic, message.queue_id) == (TIMER_TOPIC, 0)
    assert message.properties == {**properties, "TIMER_OUT_MS": str(out_ms), "REAL_TOPIC": "T",
                                   "REAL_QID": "2"}


@pytest.mark.parametrize("properties, topic, sys_flag", [
    ({"TIMER_DELAY_SEC": "5"}, TIMER_TOPIC, 0),                       # a rolled timer, put as is
    ({"TIMER_DELAY_SEC": "5"}, "T", 0x04),                            # a prepared half message
    ({"TIMER_DELAY_SEC": "5"}, "T", 0x0C),                            # a rollback
    ({"TIMER_DELAY_SEC": "5", "TIMER_OUT_MS": "7"}, "T", 0),          # checkIfTimerMessage's double check
    ({"TIMER_DELIVER_MS": str(T0_MS)}, "T", 0),                       # not in the future
    ({"TIMER_DELAY_SEC": str(1 << 62)}, "T", 0),                      # Java long overflow: the past
    ({"user": "v"}, "T", 0),
])
def test_hook_leaves_alone(properties, topic, sys_flag):
    message = _rewrite(properties, topic=topic, sys_flag=sys_flag)
    assert message.topic == topic and message.properties == properties


def test_hook_flow_control_is_rocketmqs_draw():
    from store.timer.hook import is_reject
    assert not is_reject(10, 10, lambda: 999) and is_reject(20, 10, lambda: 0)
    assert is_reject(15, 10, lambda: 999) and not is_reject(15, 10, lambda: 0)


def test_timer_log_files_behind_the_commit_log_expire(tmp_path):
    """deleteExpiredFileByOffsetForTimerLog: every 30 s, timer-log files (never the last) whose last
    unit points below the commit log's first offset are deleted."""
    clock = Clock(T0_MS)
    cfg = StoreConfig(store_path_root_dir=str(tmp_path / "store"), store_format="5.x",
                      mapped_file_size_commit_log=65536, mapped_file_size_timer_log=4096)
    store = MessageStore.open(cfg, clock_ms=clock, start_services=False)
    try:
        for n in range(600):
            assert store.put_message(Message("Real", b"%d" % n + b"." * 100, queue_id=n % 2,
                                             properties={"TIMER_DELAY_MS": "1500"})).ok
        _step(store)
        timer_log = store.services.timer.timer_log
        files_before = len(timer_log.queue.files)
        clock.now_ms += 3_000
        while _step(store):
            pass
        assert all(store.get_message("g", "Real", q, 0).max_offset == 300 for q in (0, 1))
        assert store.clean_expired_files(force=True).commit_log_files_deleted > 0
        low = store.commit_log.min_offset()
        assert low > 0 and files_before > 2
        clock.now_ms += 31_000
        _step(store)
        kept = timer_log.queue.files
        assert 0 < len(kept) < files_before
        for mapped in kept[:-1]:
            last = timer_log.unit_at(mapped.file_from_offset + 3_952)
            assert last.offset_py >= low
        # Chains into the deleted files are expired, not broken.
        assert _timer_findings(store) == []
    finally:
        store.close()
