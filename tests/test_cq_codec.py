"""Consume-queue unit codec and RocksDB CQ key/value codec: spec vectors and round trips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec import rocksdb_cq as rc
from store.codec.cq_unit import (CQ_UNIT_DTYPE, CQ_UNIT_SIZE, PREFILL_SIZE, PREFILL_UNIT, CqUnit,
                                 is_prefill_unit, is_valid_unit, pack_unit, pack_units, roll_next_file,
                                 units_from_buffer, unpack_unit, valid_prefix_length)
from store.codec.javahash import tags_code
from store.errors import CorruptDataError

LONGS = st.integers(-(1 << 63), (1 << 63) - 1)
INTS = st.integers(-(1 << 31), (1 << 31) - 1)
TOPICS = st.text(min_size=1, max_size=40)


# -- spec §14.9 ----------------------------------------------------------------------------------

def test_vector_a_unit_bytes():
    assert tags_code("TagA") == 2598919
    assert pack_unit(0, 177, 2598919).hex() == "0000000000000000" "000000b1" "000000000027a807"
    assert pack_unit(0, 178, 2598919)[8:12].hex() == "000000b2"  # vector B


def test_prefill_unit_bytes():
    assert PREFILL_UNIT.hex() == "0000000000000000" "7fffffff" "0000000000000000"
    assert is_prefill_unit(0, PREFILL_SIZE, 0) and is_valid_unit(0, PREFILL_SIZE)


def test_negative_tags_code_is_sign_extended():
    assert pack_unit(0, 1, -687264706)[12:].hex() == "ffffffffd7092c3e"


@pytest.mark.parametrize("phy_offset,size,valid", [(0, 0, False), (0, 1, True), (-1, 5, False),
                                                   (5, -1, False), (1 << 40, 100, True)])
def test_valid_unit_rule(phy_offset, size, valid):
    assert is_valid_unit(phy_offset, size) is valid


def test_struct_sizes():
    assert CQ_UNIT_SIZE == CQ_UNIT_DTYPE.itemsize == 20
    assert rc.CQ_VALUE_DTYPE.itemsize == rc.CQ_VALUE_SIZE == 28


def test_unpack_truncated_raises():
    with pytest.raises(CorruptDataError):
        unpack_unit(b"\x00" * 19, 0)
    with pytest.raises(CorruptDataError):
        unpack_unit(b"\x00" * 40, 21)


def test_pack_out_of_range_raises():
    with pytest.raises(ValueError):
        pack_unit(0, 1 << 31, 0)


@pytest.mark.parametrize("queue_offset,expected", [(0, 100), (99, 100), (100, 200), (250, 300)])
def test_roll_next_file(queue_offset, expected):
    assert roll_next_file(queue_offset, 100) == expected


def test_valid_prefix_length():
    data = pack_unit(1, 2, 3) + PREFILL_UNIT + bytes(20) + pack_unit(9, 9, 9)
    assert valid_prefix_length(units_from_buffer(data)) == 2
    assert valid_prefix_length(units_from_buffer(pack_unit(1, 2, 3))) == 1


@given(LONGS, INTS, LONGS)
def test_unit_round_trip(phy_offset, size, tags):
    data = pack_unit(phy_offset, size, tags)
    assert len(data) == 20
    assert unpack_unit(b"xx" + data, 2) == CqUnit(phy_offset, size, tags)
    view = units_from_buffer(data)
    assert (int(view["phy_offset"][0]), int(view["size"][0]), int(view["tags_code"][0])) == \
        (phy_offset, size, tags)


@given(st.lists(st.tuples(LONGS, INTS, LONGS), max_size=30))
def test_pack_units_matches_pack_unit(rows):
    packed = pack_units([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    assert packed == b"".join(pack_unit(*r) for r in rows)


# -- spec §14.11 ---------------------------------------------------------------------------------

def test_rocksdb_vector_a():
    key = rc.cq_key("TopicTest", 1, 0)
    assert key.hex() == "00000009" "01" "546f70696354657374" "01" "00000001" "01" "0000000000000000"
    assert len(key) == 28
    value = rc.cq_value(0, 177, 2598919, 1700000000123)
    assert value.hex() == "0000000000000000" "000000b1" "000000000027a807" "0000018bcfe5687b"
    max_key = rc.offset_key("TopicTest", 1, "max")
    assert max_key.hex() == "00000009" "01" "546f70696354657374" "01" "6d6178" "01" "00000001"
    assert len(max_key) == 23
    assert rc.offset_value(0, 0).hex() == "00" * 16
    assert rc.offset_key("TopicTest", 1, "min").hex() == \
        "00000009" "01" "546f70696354657374" "01" "6d696e" "01" "00000001"
    assert rc.checkpoint_key().hex() == \
        "00000010" "01" "434845434b504f494e545f544f504943" "01" "6d6178" "01" "00000000"
    assert len(rc.checkpoint_key()) == 30
    assert rc.checkpoint_value(177).hex() == "00000000000000b1"
    begin, end = rc.queue_range_bounds("TopicTest", 1)
    assert begin.hex() == "00000009" "01" "546f70696354657374" "01" "00000001" "00"
    assert end.hex() == "00000009" "01" "546f70696354657374" "01" "00000001" "02"


def test_range_bounds_enclose_every_key_of_the_queue_only():
    begin, end = rc.queue_range_bounds("T", 3)
    for offset in (0, 1, (1 << 63) - 1):
        assert begin <= rc.cq_key("T", 3, offset) < end
    assert not begin <= rc.cq_key("T", 4, 0) < end
    assert not begin <= rc.cq_key("T", 2, (1 << 63) - 1) < end


def test_keys_sort_by_queue_offset():
    keys = [rc.cq_key("Topic", 0, offset) for offset in (0, 1, 255, 256, 1 << 40)]
    assert keys == sorted(keys)


@given(TOPICS, INTS, st.integers(0, (1 << 63) - 1))
def test_cq_key_round_trip(topic, queue_id, queue_offset):
    key = rc.cq_key(topic, queue_id, queue_offset)
    assert len(key) == 19 + len(topic.encode("utf-8"))
    assert rc.decode_cq_key(key) == (topic, queue_id, queue_offset)
    assert key.startswith(rc.cq_key_prefix(topic, queue_id))


@given(LONGS, INTS, LONGS, LONGS)
def test_cq_value_round_trip(phy_offset, size, tags, store_time):
    value = rc.cq_value(phy_offset, size, tags, store_time)
    assert rc.decode_cq_value(value) == rc.CqValue(phy_offset, size, tags, store_time)
    array = rc.decode_cq_values([value, value])
    units = rc.values_to_units(array)
    assert units.dtype == CQ_UNIT_DTYPE and int(units["size"][1]) == size


@given(TOPICS, INTS, st.sampled_from(["max", "min"]), LONGS, LONGS)
def test_offset_key_value_round_trip(topic, queue_id, kind, phy_offset, queue_offset):
    key = rc.offset_key(topic, queue_id, kind)
    assert len(key) == 14 + len(topic.encode("utf-8"))
    assert rc.decode_offset_key(key) == (topic, kind, queue_id)
    assert rc.decode_offset_value(rc.offset_value(phy_offset, queue_offset)) == \
        rc.OffsetValue(phy_offset, queue_offset)


@given(LONGS)
def test_checkpoint_value_round_trip(value):
    assert rc.decode_checkpoint_value(rc.checkpoint_value(value)) == value


@pytest.mark.parametrize("bad", [b"", b"\x00\x00\x00\x05\x01ab", b"\x00\x00\x00\x01\x02T\x01" + bytes(13)])
def test_decode_bad_keys_raise(bad):
    with pytest.raises(CorruptDataError):
        rc.decode_cq_key(bad)


@pytest.mark.parametrize("decoder,size", [(rc.decode_cq_value, 27), (rc.decode_offset_value, 8),
                                          (rc.decode_checkpoint_value, 16)])
def test_decode_bad_value_lengths_raise(decoder, size):
    with pytest.raises(CorruptDataError):
        decoder(bytes(size))


def test_offset_key_kind_checked():
    with pytest.raises(ValueError):
        rc.offset_key("T", 0, "mid")
    assert np.frombuffer(rc.cq_value(1, 2, 3, 4), dtype=rc.CQ_VALUE_DTYPE)["store_timestamp"][0] == 4
