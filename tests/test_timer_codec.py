"""store.timer.codec: the timer-log unit, BLANK, wheel slot and timercheck layouts, against the real
5.3.3 files (the timer fixtures' raw dumps) and round trips."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec.javahash import java_string_hash
from store.errors import CorruptDataError
from store.timer import codec as c
from tests.fixtures_util import fixture_id, load_dump
from tests.test_timer_util import timer_fixtures

FIXTURES = timer_fixtures()

int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)


def test_constants_are_rocketmqs():
    assert c.UNIT_SIZE == 52 and c.SLOT_SIZE == 32 and c.MIN_BLANK_LEN == 16
    assert c.BLANK_MAGIC == -875286124                  # 0xCBD43194
    assert c.WHEEL_SLOTS == 1_209_600 and c.WHEEL_FILE_SIZE_BYTES == 38_707_200
    assert c.is_magic_ok(1) and c.is_magic_ok(3) and c.is_magic_ok(5) and c.is_magic_ok(0)
    assert not c.is_magic_ok(16) and not c.is_magic_ok(c.BLANK_MAGIC) and not c.is_magic_ok(-1)


@given(int64, int32, int64, int32, int64, int32, int32, int64)
def test_unit_round_trip(prev_pos, magic, write_ms, delay_ms, offset_py, size_py, topic_hash,
                         reserved):
    raw = c.pack_unit(prev_pos=prev_pos, magic=magic, curr_write_time_ms=write_ms,
                      delay_ms=delay_ms, offset_py=offset_py, size_py=size_py,
                      topic_hash=topic_hash, reserved=reserved)
    unit = c.unpack_unit(b"xx" + raw, 2, pos=1000)
    assert (unit.pos, unit.size, unit.prev_pos, unit.magic, unit.curr_write_time_ms, unit.delay_ms,
            unit.offset_py, unit.size_py, unit.topic_hash, unit.reserved) == (
        1000, 52, prev_pos, magic, write_ms, delay_ms, offset_py, size_py, topic_hash, reserved)


def test_short_buffers_are_corrupt_data():
    with pytest.raises(CorruptDataError, match="52 bytes"):
        c.unpack_unit(b"\0" * 51)
    with pytest.raises(CorruptDataError):
        c.decode_timercheck(b"\0" * 55)
    with pytest.raises(CorruptDataError):
        c.unpack_slot(b"\0" * 31, 0, 1000)


@given(st.integers(0, 2**40), st.integers(-1, 2**40), st.integers(-1, 2**40), int32, int32)
def test_slot_round_trip(time_ms, first, last, num, magic):
    index = c.slot_index(time_ms, 1000)
    wheel = bytearray(c.SLOT_SIZE * (index + 1))
    wheel[index * 32:(index + 1) * 32] = c.pack_slot(time_ms, 1000, first, last, num, magic)
    slot = c.unpack_slot(wheel, index, 1000)
    assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num, slot.magic) == (
        time_ms // 1000 * 1000, first, last, num, magic)


@given(st.tuples(*(int64 for _ in range(7))))
def test_timercheck_round_trip(values):
    fields = c.TimerCheckpointFields(*values)
    raw = c.encode_timercheck(fields)
    assert len(raw) == 4096 and raw[56:] == b"\0" * 4040
    assert c.decode_timercheck(raw) == fields


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_real_units_blanks_and_timercheck_decode_as_dumped(fixture):
    dump = load_dump(fixture)["timerBefore"]
    directory = os.path.join(fixture, "store", "timerlog")
    for want in dump["timerlogUnits"]:
        with open(os.path.join(directory, want["file"]), "rb") as handle:
            data = handle.read()
        position = want["pos"] - int(want["file"])
        if want.get("blank"):
            assert data[position:position + 16] == c.pack_blank(want["size"])
            assert want["size"] == len(data) - position
            continue
        unit = c.unpack_unit(data, position, pos=want["pos"])
        assert (unit.size, unit.prev_pos, unit.magic, unit.curr_write_time_ms, unit.delay_ms,
                unit.due_time_ms, unit.offset_py, unit.size_py, unit.topic_hash, unit.reserved) == (
            want["size"], want["prevPos"], want["magic"], want["currWriteTimeMs"],
            want["delayMsRel"], want["delayedTimeMs"], want["offsetPy"], want["sizePy"],
            want["realTopicHash"], want["reserved"])
        assert data[position:position + 52] == c.pack_unit(
            prev_pos=unit.prev_pos, magic=unit.magic, curr_write_time_ms=unit.curr_write_time_ms,
            delay_ms=unit.delay_ms, offset_py=unit.offset_py, size_py=unit.size_py,
            topic_hash=unit.topic_hash)
    with open(os.path.join(fixture, "store", "config", "timercheck"), "rb") as handle:
        raw = handle.read()
    check = dump["timercheck"]
    fields = c.decode_timercheck(raw)
    assert (fields.last_read_time_ms, fields.last_timer_log_flush_pos,
            fields.last_timer_queue_offset, fields.master_timer_queue_offset, fields.state_version,
            fields.data_version_timestamp, fields.data_version_counter) == (
        check["lastReadTimeMs"], check["lastTimerLogFlushPos"], check["lastTimerQueueOffset"],
        check["masterTimerQueueOffset"], check["dataVersionStateVersion"],
        check["dataVersionTimestamp"], check["dataVersionCounter"])
    assert c.encode_timercheck(fields) == raw


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_topic_hash_is_java_string_hash_of_the_real_topic(fixture):
    dump = load_dump(fixture)
    by_offset = {m["commitLogOffset"]: m for m in dump["timerPending"] + dump["timerDelivered"]}
    real = {r["commitLogOffset"]: r for r in dump["commitLogRecords"]}
    units = [u for u in dump["timerBefore"]["timerlogUnits"] if not u.get("blank")]
    assert units
    for unit in units:
        assert real[unit["offsetPy"]]["topic"] == c.TIMER_TOPIC
        pending = by_offset.get(unit["offsetPy"])
        if pending is not None:
            assert java_string_hash(pending["realTopic"]) == unit["realTopicHash"]
