"""store.check.timer: the timer store against itself and the commit log, on damaged copies of the
real 5.3.3 timer fixtures (a corrupted slot, a broken chain, entries past a cut commit log)."""

from __future__ import annotations

import os
import struct

import pytest

from store import MessageStore
from store.timer.codec import UNIT_SIZE
from store.tools.check_directory import check_config
from tests.fixtures_util import fixture_id, load_dump, store_config, tree_fingerprint
from tests.test_timer_util import timer_fixtures, timer_store_copy

FIXTURES = timer_fixtures()


def timer_findings(findings):
    return [f for f in findings if f.component == "timer"]


def _units(fixture):
    return [u for u in load_dump(fixture)["timerBefore"]["timerlogUnits"] if not u.get("blank")]


def _write(path, position, data):
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(data)


def _timerlog_path(root, unit):
    return os.path.join(root, "timerlog", unit["file"]), unit["pos"] - int(unit["file"])


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_clean_copy_has_no_timer_findings_and_stays_untouched(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path)
    before = tree_fingerprint(root)
    assert timer_findings(check_config(store_config(fixture, root))) == []
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        assert timer_findings(store.check()) == []
    assert tree_fingerprint(root) == before


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_corrupted_slot_num_and_last_pos(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path)
    slots = load_dump(fixture)["timerBefore"]["timerwheelSlots"]
    multi = next(s for s in slots if s["num"] > 1)
    other = next(s for s in slots if s is not multi)
    wheel = os.path.join(root, "timerwheel")
    _write(wheel, multi["index"] * 32 + 24, struct.pack(">i", multi["num"] + 3))
    _write(wheel, other["index"] * 32 + 16, struct.pack(">q", other["lastPos"] + 7))
    found = timer_findings(check_config(store_config(fixture, root)))
    errors = [f for f in found if f.severity == "error"]
    assert any(f.position == multi["index"] * 32 + 24 and f"num is {multi['num'] + 3}" in f.message
               for f in errors), found
    assert any(f.position == other["index"] * 32 + 8 and "corrupted slot" in f.message
               for f in errors), found
    assert all(f.path == wheel for f in found)


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_broken_chain(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path)
    chained = next(u for u in _units(fixture) if u["prevPos"] != -1)
    path, position = _timerlog_path(root, chained)
    _write(path, position + 4, struct.pack(">q", chained["prevPos"] + 1))   # inside a unit
    found = [f for f in timer_findings(check_config(store_config(fixture, root)))
             if f.severity == "error"]
    assert any(f.path == path and f.position == position + 4 and "broken slot chain" in f.message
               for f in found), found
    assert any("not a unit" in f.message for f in found), found


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_chain_cut_short_leaves_unreachable_units(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path)
    dump = load_dump(fixture)
    read_time = dump["timerBefore"]["timercheck"]["lastReadTimeMs"]
    units = {u["pos"]: u for u in _units(fixture)}
    cut = next(u for u in units.values()
               if u["prevPos"] != -1 and u["delayedTimeMs"] >= read_time)
    lost = cut["prevPos"]
    path, position = _timerlog_path(root, cut)
    _write(path, position + 4, struct.pack(">q", -1))
    found = [f for f in timer_findings(check_config(store_config(fixture, root)))
             if f.severity == "error"]
    assert any(f"unit {lost} " in f.message and "in no slot chain" in f.message for f in found), found
    assert any("first_pos" in f.message for f in found), found


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_entries_past_a_cut_commit_log_are_orphaned(fixture, tmp_path):
    """apache/rocketmq#10668: the commit log lost its tail, the timer log still points into it."""
    root = timer_store_copy(fixture, tmp_path)
    units = _units(fixture)
    victim = max(units, key=lambda u: u["offsetPy"])
    commitlog = os.path.join(root, "commitlog")
    name = sorted(os.listdir(commitlog))[-1]
    segment = os.path.join(commitlog, name)
    cut = victim["offsetPy"] - int(name)
    assert cut >= 0
    size = os.path.getsize(segment)
    _write(segment, cut, b"\0" * (size - cut))
    config = store_config(fixture, root)
    for findings in (check_config(config, open_store=False),
                     check_config(config)):
        past = [f for f in timer_findings(findings) if "past the commit log's end" in f.message]
        assert past and all(f.severity == "error" for f in past)
        assert any(f"unit {victim['pos']} " in f.message and "#10668" in f.message for f in past)
        assert all(f.position % UNIT_SIZE == 28 for f in past)


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_wheel_missing_is_info_and_wrong_size_is_an_error(fixture, tmp_path):
    root = timer_store_copy(fixture, tmp_path, with_wheel=False)
    found = timer_findings(check_config(store_config(fixture, root)))
    assert [f.severity for f in found] == ["info"] and "missing" in found[0].message
    with open(os.path.join(root, "timerwheel"), "wb") as handle:
        handle.write(b"\0" * 64)
    found = timer_findings(check_config(store_config(fixture, root)))
    assert any(f.severity == "error" and "38707200" in f.message for f in found)


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_missing_wheel_with_units_before_the_refill_is_one_info(fixture, tmp_path):
    """Without the wheel, recovery refills slots only from the file holding lastTimerLogFlushPos -
    file size: live units of earlier files are lost, reported once (one cause)."""
    root = timer_store_copy(fixture, tmp_path, with_wheel=False)
    files = sorted(os.listdir(os.path.join(root, "timerlog")))
    if len(files) < 2:
        pytest.skip("one timer-log file: the refill covers every unit")
    size = store_config(fixture, root).mapped_file_size_timer_log
    check = os.path.join(root, "config", "timercheck")
    with open(check, "rb") as handle:
        flush_pos = struct.unpack(">q", handle.read(16)[8:16])[0]
    _write(check, 8, struct.pack(">q", flush_pos + size))     # refill starts one file later
    found = timer_findings(check_config(store_config(fixture, root)))
    infos = [f for f in found if f.severity == "info" and "in no slot chain" in f.message]
    assert len(infos) == 1
    assert not [f for f in found if "in no slot chain" in f.message and f.severity != "info"]
    assert any(f.severity == "error" and "lastTimerLogFlushPos" in f.message for f in found)


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_a_wheel_flushed_before_the_last_enqueues_is_no_damage(fixture, tmp_path):
    """As after a crash: the wheel (flushed once a second) misses the units of the last file.
    Recovery revises last_pos from the log; only num stays behind (info)."""
    root = timer_store_copy(fixture, tmp_path)
    dump = load_dump(fixture)
    units = {u["pos"]: u for u in _units(fixture)}
    last_file = max(int(u["file"]) for u in units.values())
    wheel = os.path.join(root, "timerwheel")
    rolled_back = 0
    for slot in dump["timerBefore"]["timerwheelSlots"]:
        last = units[slot["lastPos"]]
        if int(last["file"]) != last_file:
            continue
        rolled_back += 1
        if last["prevPos"] == -1:
            _write(wheel, slot["index"] * 32, b"\0" * 32)
        else:
            _write(wheel, slot["index"] * 32 + 16, struct.pack(">qi", last["prevPos"], slot["num"] - 1))
    assert rolled_back
    found = timer_findings(check_config(store_config(fixture, root)))
    assert [f for f in found if f.severity != "info"] == []
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        recovered = {s.index: (s.first_pos, s.last_pos)
                     for s in store.inspect.timer_wheel(after_recovery=True)}
    assert recovered == {s["index"]: (s["firstPos"], s["lastPos"])
                         for s in dump["timerAfterRecovery"]["wheelSlotsInMemory"]}
