"""The timer store through the inspection API (store.inspect.timer) and `rmqstore queryTimerMsg`,
against the real 5.3.3 timer fixtures' dumps: pending and delivered messages, wheel, chains,
checkpoint; orphaned entries after the commit log lost its tail."""

from __future__ import annotations

import json
import os

import pytest

from store import MessageStore
from store.cli import main
from store.errors import StoreError
from tests.fixtures_util import fixture_id, load_dump, store_config, tree_fingerprint
from tests.test_timer_util import timer_fixtures, timer_store_copy

FIXTURES = timer_fixtures()


@pytest.fixture(params=FIXTURES, ids=fixture_id)
def opened(request, tmp_path):
    fixture = request.param
    root = timer_store_copy(fixture, tmp_path)
    before = tree_fingerprint(root)
    store = MessageStore.open(store_config(fixture, root), read_only=True)
    yield fixture, store
    store.close()
    assert tree_fingerprint(root) == before


def test_wheel_chain_and_checkpoint(opened):
    fixture, store = opened
    dump = load_dump(fixture)
    slots = store.inspect.timer_wheel()
    assert [(s.index, s.time_raw, s.first_pos, s.last_pos, s.num, s.magic) for s in slots] == [
        (s["index"], s["timeRaw"], s["firstPos"], s["lastPos"], s["num"], s["magic"])
        for s in dump["timerBefore"]["timerwheelSlots"]]
    assert [(s.index, s.time_ms) for s in store.inspect.timer_wheel(after_recovery=True)] == [
        (s["index"], s["timeMs"]) for s in dump["timerAfterRecovery"]["wheelSlotsInMemory"]]
    units = {u["pos"]: u for u in dump["timerBefore"]["timerlogUnits"] if not u.get("blank")}
    for slot in dump["timerAfterRecovery"]["wheelSlotsInMemory"]:
        chain = store.inspect.timer_chain(slot["timeMs"])
        assert chain[0].pos == slot["lastPos"] and chain[-1].pos == slot["firstPos"]
        assert [u.prev_pos for u in chain] == [c.pos for c in chain[1:]] + [-1]
        assert all(units[u.pos]["delayedTimeMs"] // 1000 * 1000 == slot["timeMs"] for u in chain)
    assert sum(len(store.inspect.timer_chain(s["timeMs"]))
               for s in dump["timerAfterRecovery"]["wheelSlotsInMemory"]) == len(units)
    assert store.inspect.timer_chain(slots[0].time_ms + 7 * 86_400_000 * 2) == []   # same slot, other time
    check = store.inspect.timer_checkpoint()
    assert check.last_read_time_ms == dump["timerBefore"]["timercheck"]["lastReadTimeMs"]
    assert store.inspect.timer_state()["state"] == "ok"


def test_scheduled_messages_match_the_real_stores_lists(opened):
    fixture, store = opened
    dump = load_dump(fixture)
    read_time = dump["timerBefore"]["timercheck"]["lastReadTimeMs"]
    rows = store.inspect.scheduled_messages(now_ms=read_time)
    pending = {m["uniqKey"]: m for m in dump["timerPending"]}
    delivered = {m["uniqKey"]: m for m in dump["timerDelivered"]}
    got_pending = {m.uniq_key: m for m in rows if m.state == "pending"}
    got_delivered = {m.uniq_key: m for m in rows if m.state == "delivered"}
    assert set(got_pending) == set(pending) and set(got_delivered) == set(delivered)
    assert not [m for m in rows if m.state in ("due", "orphaned")]
    for key, want in pending.items():
        m = got_pending[key]
        assert (m.topic, str(m.queue_id), m.wheel_phy_offset, m.wheel_queue_offset, m.due_ms,
                m.keys, m.tags) == (want["realTopic"], want["realQueueId"], want["commitLogOffset"],
                                    want["queueOffset"], int(want["TIMER_OUT_MS"]), want["keys"],
                                    want["tags"])
        assert m.timer_log_pos is not None and m.due_ms > read_time
    for key, want in delivered.items():
        m = got_delivered[key]
        assert (m.topic, m.queue_id, m.delivered_phy_offset, m.delivered_queue_offset) == (
            want["topic"], want["queueId"], want["commitLogOffset"], want["queueOffset"])
        assert m.enqueue_ms == (int(want["TIMER_ENQUEUE_MS"]) if want["TIMER_ENQUEUE_MS"] else None)
        assert m.dequeue_ms == (int(want["TIMER_DEQUEUE_MS"]) if want["TIMER_DEQUEUE_MS"] else None)
    dues = [m.due_ms for m in rows]
    assert dues == sorted(dues)
    # Days later every pending message is overdue: "due", not lost.
    later = store.inspect.scheduled_messages(state="due", now_ms=read_time + 30 * 86_400_000)
    assert {m.uniq_key for m in later} == set(pending)


def test_filters(opened):
    fixture, store = opened
    dump = load_dump(fixture)
    read_time = dump["timerBefore"]["timercheck"]["lastReadTimeMs"]
    want = dump["timerPending"][0]
    by_key = store.inspect.scheduled_messages(key=want["keys"], now_ms=read_time)
    assert [m.uniq_key for m in by_key] == [want["uniqKey"]]
    assert [m.uniq_key for m in store.inspect.scheduled_messages(msg_id=want["uniqKey"].lower())] \
        == [want["uniqKey"]]
    topic = store.inspect.scheduled_messages(topic=want["realTopic"], state="pending",
                                             now_ms=read_time)
    assert {m.uniq_key for m in topic} == {m["uniqKey"] for m in dump["timerPending"]
                                           if m["realTopic"] == want["realTopic"]}
    due = int(want["TIMER_OUT_MS"])
    window = store.inspect.scheduled_messages(start_ms=due, end_ms=due + 1, now_ms=read_time)
    assert want["uniqKey"] in {m.uniq_key for m in window}
    assert all(m.due_ms == due for m in window)
    with pytest.raises(StoreError):
        store.inspect.scheduled_messages(state="waiting")


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_cut_commit_log_leaves_orphaned_entries(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path)
    dump = load_dump(fixture)
    pending = sorted(dump["timerPending"], key=lambda m: m["commitLogOffset"])
    cut = pending[-1]["commitLogOffset"]
    commitlog = os.path.join(root, "commitlog")
    name = sorted(os.listdir(commitlog))[-1]
    path = os.path.join(commitlog, name)
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.seek(cut - int(name))
        handle.write(b"\0" * (size - (cut - int(name))))
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        orphaned = store.inspect.scheduled_messages(state="orphaned")
    units = [u for u in dump["timerBefore"]["timerlogUnits"] if not u.get("blank")]
    past_end = {u["offsetPy"] for u in units if u["offsetPy"] >= cut}
    assert cut in past_end
    assert {m.wheel_phy_offset for m in orphaned if "#10668" in m.reason} == past_end
    assert all(m.timer_log_pos is not None for m in orphaned)
    # Deliveries the cut took away: the timer read past those slots, the copies are gone.
    lost = {d["uniqKey"] for d in dump["timerDelivered"]
            if d["commitLogOffset"] >= cut and d["TIMER_OUT_MS"] is not None}
    wheel_before_cut = {r["uniqKey"] for r in dump["commitLogRecords"]
                        if r["topic"] == "rmq_sys_wheel_timer" and r["commitLogOffset"] < cut}
    assert {m.uniq_key for m in orphaned if "read past" in m.reason} == lost & wheel_before_cut


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_query_timer_msg_cli(capsys, fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path)
    config = os.path.join(fixture, "store.properties")
    dump = load_dump(fixture)
    read_time = str(dump["timerBefore"]["timercheck"]["lastReadTimeMs"])
    want = dump["timerPending"][0]
    base = ["queryTimerMsg", "--store", root, "--config", config, "--now", read_time]
    assert main([*base, "-k", want["keys"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["uniq_key"] for m in out["messages"]] == [want["uniqKey"]]
    assert out["messages"][0]["state"] == "pending" and out["timer"]["state"] == "ok"
    assert main([*base, "--state", "delivered", "-t", "TimerA"]) == 0
    text = capsys.readouterr().out
    assert "UTC" in text and "delivered" in text and "pending" not in text.split("state", 1)[1]
    assert main([*base, "--state", "pending", "-c", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == len(dump["timerPending"]) and out["truncated"] and len(out["messages"]) == 2
    assert main([*base, "-b", "not a time"]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_a_delete_marker_cancels_its_target(fixture, tmp_path):
    """TIMER_DEL_UNIQKEY (TimerDequeueGetMessageService drops the target of the same slot)."""
    from store import Message
    root = timer_store_copy(fixture, tmp_path)
    dump = load_dump(fixture)
    target = dump["timerPending"][0]
    read_time = dump["timerBefore"]["timercheck"]["lastReadTimeMs"]
    # Services off: a started writable store hosts the timers and, by the wall clock, would deliver
    # every pending one before the marker is read.
    with MessageStore.open(store_config(fixture, root), start_services=False) as store:
        marker = Message("rmq_sys_wheel_timer", b"", queue_id=0, properties={
            "TIMER_OUT_MS": target["TIMER_OUT_MS"], "REAL_TOPIC": target["realTopic"],
            "REAL_QID": target["realQueueId"], "TIMER_DEL_UNIQKEY": target["uniqKey"],
            "UNIQ_KEY": "7F0000010000000100000000DE1E7E00"})
        assert store.put_message(marker).status.name == "PUT_OK"
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        rows = {m.uniq_key: m for m in store.inspect.scheduled_messages(now_ms=read_time)}
    assert rows[target["uniqKey"]].state == "cancelled"
    assert rows["7F0000010000000100000000DE1E7E00"].state == "cancelled"
    assert sum(m.state == "pending" for m in rows.values()) == len(dump["timerPending"]) - 1


def test_a_capped_walk_says_so(opened):
    fixture, store = opened
    whole = store.inspect.scheduled_messages()
    assert not whole.capped
    part = store.inspect.scheduled_messages(max_records=10)
    assert part.capped and 0 < part.walked_to < store.commit_log.max_offset()
    assert len(part) < len(whole)
