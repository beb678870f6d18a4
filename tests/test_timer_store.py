"""Reading the 5.x timer store read-only (store.timer.timer_log / timer_wheel / timer_recovery /
timer_store and the loader's wiring): the real 5.3.3 timer fixtures' raw files and state after
recovery, and that opening writes nothing."""

from __future__ import annotations

import os

import pytest

from store import MessageStore
from store.errors import CorruptDataError
from store.timer.timer_store import open_timer_files, probe_timer_store
from store.timer.timer_wheel import read_timercheck
from tests.fixtures_util import (copy_store, fixture_dirs, fixture_id, load_dump, store_config,
                                 tree_fingerprint)
from tests.test_timer_util import timer_fixtures, timer_store_copy

FIXTURES = timer_fixtures()
DAY_MS = 86_400_000


def _open_files(fixture: str, root: str, now_ms: int):
    config = store_config(fixture, root)
    return open_timer_files(root, file_size_bytes=config.mapped_file_size_timer_log,
                            precision_ms=config.timer_precision_ms, now_ms=now_ms)


def _slot_tuples(slots: dict) -> dict:
    return {i: (s.time_ms, s.first_pos, s.last_pos, s.num, s.magic) for i, s in slots.items()}


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_raw_files_read_as_dumped(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path)
    dump = load_dump(fixture)["timerBefore"]
    files = _open_files(fixture, root, dump["timercheck"]["lastReadTimeMs"])
    assert files.state == "ok" and files.wheel_size_bytes == dump["timerwheelFileSize"]
    want_slots = {s["index"]: (s["timeRaw"], s["firstPos"], s["lastPos"], s["num"], s["magic"])
                  for s in dump["timerwheelSlots"]}
    assert {i: (s.time_raw, s.first_pos, s.last_pos, s.num, s.magic)
            for i, s in files.slots.items()} == want_slots
    units = [u for u in dump["timerlogUnits"] if not u.get("blank")]
    assert files.log.pos.tolist() == [u["pos"] for u in units]
    assert files.log.units["offset_py"].tolist() == [u["offsetPy"] for u in units]
    assert files.log.units["prev_pos"].tolist() == [u["prevPos"] for u in units]
    blanks = [(u["pos"], u["size"]) for u in dump["timerlogUnits"] if u.get("blank")]
    assert [(f.file_from_offset + f.end_position, f.blank_size) for f in files.log.files
            if f.ends_with == "blank"] == blanks
    assert files.checkpoint.last_timer_log_flush_pos == dump["timercheck"]["lastTimerLogFlushPos"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writable"])
def test_engine_open_recovers_like_the_real_store_and_writes_no_timer_file(fixture, tmp_path,
                                                                           read_only):
    root = timer_store_copy(fixture, tmp_path)
    dump = load_dump(fixture)
    want = dump["timerAfterRecovery"]
    timer_paths = ("timerlog", "timerwheel", os.path.join("config", "timercheck"))
    before = tree_fingerprint(root)
    now_ms = dump["timerBefore"]["timercheck"]["lastReadTimeMs"]
    store = MessageStore.open(store_config(fixture, root), read_only=read_only,
                              clock_ms=lambda: now_ms)
    try:
        files = store._parts.timer.files()
    finally:
        store.close()
    state = files.recovery
    assert (state.curr_read_time_ms, state.commit_read_time_ms, state.curr_queue_offset,
            state.commit_queue_offset, state.process_offset, state.timer_log_files_after) == (
        want["currReadTimeMs"], want["commitReadTimeMs"], want["currQueueOffset"],
        want["commitQueueOffset"], want["timerLogFlushedWhere"], want["timerLogFiles"])
    assert state.process_offset == want["timerLogMaxOffset"]
    assert _slot_tuples(state.slots) == {
        s["index"]: (s["timeMs"], s["firstPos"], s["lastPos"], s["num"], s["magic"])
        for s in want["wheelSlotsInMemory"]}
    after = tree_fingerprint(root)
    if read_only:
        assert after == before
    else:
        # A writable open hosts the timer store (store/services/timer.py): after a clean shutdown
        # recovery changes neither the timer log nor the wheel, and the master's checkpoint keeps
        # its four offsets (only its dataVersion moves, as RocketMQ's prepareTimerCheckPoint does).
        log_and_wheel = timer_paths[:2]
        assert {p: v for p, v in after.items() if p.startswith(log_and_wheel)} == \
            {p: v for p, v in before.items() if p.startswith(log_and_wheel)}
        check = read_timercheck(root).fields
        stored = dump["timerBefore"]["timercheck"]
        assert (check.last_read_time_ms, check.last_timer_log_flush_pos,
                check.last_timer_queue_offset, check.master_timer_queue_offset) == (
            stored["lastReadTimeMs"], stored["lastTimerLogFlushPos"],
            stored["lastTimerQueueOffset"], stored["masterTimerQueueOffset"])


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_a_week_old_store_reads_from_the_wheels_oldest_slot(fixture, tmp_path):
    """recover(): currReadTimeMs never lags `now` by more than slotsTotal - 60 slots."""
    root = timer_store_copy(fixture, tmp_path)
    last_read = load_dump(fixture)["timerBefore"]["timercheck"]["lastReadTimeMs"]
    now_ms = last_read + 8 * DAY_MS + 1234
    files = _open_files(fixture, root, now_ms)
    assert files.recovery.curr_read_time_ms == (now_ms // 1000 - 604_800 + 60) * 1000
    assert files.recovery.curr_read_time_ms > last_read


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_without_the_wheel_the_store_still_opens(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path, with_wheel=False)
    before = tree_fingerprint(root)
    store = MessageStore.open(store_config(fixture, root), read_only=True)
    try:
        assert store._parts.timer.state == "wheel missing"
        files = store._parts.timer.files()
        assert files.state == "wheel missing" and files.slots == {}
        # RocketMQ's recovery refills an all-zero wheel from the file holding lastFlushPos - size.
        begin = files.recovery.begin_offset
        revised = {int(p) for p in files.log.pos if p >= begin - begin % files.file_size_bytes}
        assert {s.last_pos for s in files.recovery.slots.values()} <= revised
        assert all(s.num == 0 for s in files.recovery.slots.values())
        assert store.get_message("g", "TimerA", 0, 0, 1).status.name  # the store works
    finally:
        store.close()
    assert tree_fingerprint(root) == before


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_wrong_sized_wheel_and_timer_log_file(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path, with_wheel=False)
    with open(os.path.join(root, "timerwheel"), "wb") as handle:
        handle.write(b"\0" * 1000)
    assert probe_timer_store(root) == "wheel wrong size"
    files = _open_files(fixture, root, 0)
    assert files.state == "wheel wrong size" and "38707200" in files.problems[0]
    first = sorted(os.listdir(os.path.join(root, "timerlog")))[0]
    with open(os.path.join(root, "timerlog", first), "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(CorruptDataError, match=first):
        _open_files(fixture, root, 0)


def test_stores_without_a_timer_store():
    for fixture in fixture_dirs():
        if "timerBefore" in load_dump(fixture):
            continue
        root = os.path.join(fixture, "store")
        assert probe_timer_store(root) == "absent"


@pytest.mark.parametrize("fixture", [f for f in fixture_dirs() if "timerBefore" not in load_dump(f)],
                         ids=fixture_id)
def test_other_fixtures_open_with_no_or_an_absent_timer(fixture, tmp_path):
    root = copy_store(fixture, tmp_path)
    store = MessageStore.open(store_config(fixture, root), read_only=True)
    try:
        timer = store._parts.timer
        assert timer is None if store.style == "4.9" else timer.state == "absent"
        if timer is not None:
            assert timer.files().log is None
    finally:
        store.close()


def test_vectorized_revise_equals_reviseslot_one_by_one():
    """revise_many (used by recovery) = TimerWheel.reviseSlot(.., IGNORE, pos, force) per unit, in
    order, including slots that already hold the same or another time (other wheel rounds)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from store.timer.codec import WheelSlot
    from store.timer.timer_recovery import _revise, revise_many
    base_s = 1_795_668_732
    second = st.integers(0, 3)
    rounds = st.integers(0, 2)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(second, rounds), min_size=1, max_size=40),
           st.lists(st.tuples(second, rounds, st.integers(0, 99), st.integers(0, 99),
                              st.integers(0, 9)), max_size=4))
    def check(units, initial):
        import numpy as np
        slots = {}
        for sec, rnd, first, last, num in initial:
            t = base_s + sec + rnd * 1_209_600
            slots[t % 1_209_600] = WheelSlot(t % 1_209_600, t, t * 1000, first, last, num, 0)
        due = np.array([(base_s + s + r * 1_209_600) * 1000 + 7 for s, r in units], dtype=np.int64)
        pos = np.arange(len(units), dtype=np.int64) * 52
        one_by_one, vectorized = dict(slots), dict(slots)
        for d, p in zip(due.tolist(), pos.tolist()):
            _revise(one_by_one, d, p, 1000)
        revise_many(vectorized, due, pos, 1000)
        assert vectorized == one_by_one
    check()
