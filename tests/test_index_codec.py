"""Index codec (spec §5.1-§5.5, vectors §14.10)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec import index_codec as ic
from store.errors import CorruptDataError

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)

# Spec §14.10: vector A in a fresh file with maxHashSlotNum 5,000,000 and maxIndexNum 20,000,000.
VECTOR_SLOTS = 5_000_000
VECTOR_ENTRIES = 20_000_000
VECTOR_KEYS = [
    # key string, keyHash, slot, slot file offset, entry #, entry file offset, entry bytes
    ("TopicTest#7F00000130391B6D358647B760000000", 789047430, 4047430, 16189760, 1, 20000060,
     "2f07e886 0000000000000000 00000000 00000000"),
    ("TopicTest#k1", 2746024, 2746024, 10984136, 2, 20000080,
     "0029e6a8 0000000000000000 00000000 00000000"),
    ("TopicTest#k2", 2746025, 2746025, 10984140, 3, 20000100,
     "0029e6a9 0000000000000000 00000000 00000000"),
]
VECTOR_HEADER = ("0000018bcfe5687b 0000018bcfe5687b 0000000000000000 0000000000000000 "
                 "00000003 00000004")
VECTOR_CHAINED_ENTRY = "0029e6a8 00000000000000b1 00000005 00000002"
VECTOR_CHAINED_HEADER = ("0000018bcfe5687b 0000018bcfe57c03 0000000000000000 00000000000000b1 "
                         "00000003 00000005")


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_sizes():
    assert ic.INDEX_HEADER_SIZE == ic.HEADER_STRUCT.size == 40
    assert ic.INDEX_ENTRY_SIZE == ic.ENTRY_STRUCT.size == ic.ENTRY_DTYPE.itemsize == 20
    assert ic.index_file_size(VECTOR_SLOTS, VECTOR_ENTRIES) == 420_000_040


@pytest.mark.parametrize("key_string,key_hash,slot,slot_pos,entry_no,entry_pos,entry_hex",
                         VECTOR_KEYS)
def test_vector_positions_and_entries(key_string, key_hash, slot, slot_pos, entry_no, entry_pos,
                                      entry_hex):
    assert ic.key_hash_and_slot(key_string, VECTOR_SLOTS) == (key_hash, slot)
    assert ic.slot_position(slot) == slot_pos
    assert ic.entry_position(VECTOR_SLOTS, entry_no) == entry_pos
    entry = ic.IndexEntry(key_hash, 0, 0, 0)
    assert ic.encode_entry(entry) == unhex(entry_hex)
    assert ic.decode_entry(unhex(entry_hex)) == entry


def test_vector_header():
    header = ic.IndexHeader(1700000000123, 1700000000123, 0, 0, 3, 4)
    assert ic.encode_header(header) == unhex(VECTOR_HEADER)
    assert ic.decode_header(unhex(VECTOR_HEADER)) == header
    chained = ic.IndexHeader(1700000000123, 1700000005123, 0, 177, 3, 5)
    assert ic.encode_header(chained) == unhex(VECTOR_CHAINED_HEADER)
    assert ic.encode_entry(ic.IndexEntry(2746024, 177, 5, 2)) == unhex(VECTOR_CHAINED_ENTRY)


def test_build_key():
    assert ic.build_key("TopicTest", "k1") == "TopicTest#k1"


@pytest.mark.parametrize("store_ts,begin_ts,expected", [
    (1700000005123, 1700000000123, 5),
    (1700000001999, 1700000000000, 1),          # 1.999 s -> 1 (truncation)
    (1700000000999, 1700000000000, 0),
    (1700000000000, 1700000000001, 0),          # -1 ms: Java division gives 0, clamp keeps 0
    (1699999998001, 1700000000000, 0),          # -1.999 s -> -1 -> clamped to 0
    (5, 0, 0),                                  # no begin time yet
    (5, -7, 0),
    (2**62, 1, 2**31 - 1),                      # clamped to Integer.MAX_VALUE
    ((2**31) * 1000 + 1, 1, 2**31 - 1),
    ((2**31 - 1) * 1000 + 1, 1, 2**31 - 1),
])
def test_time_diff_seconds(store_ts, begin_ts, expected):
    assert ic.time_diff_seconds(store_ts, begin_ts) == expected


@given(store_ts=INT64, begin_ts=INT64)
def test_time_diff_matches_java_semantics(store_ts, begin_ts):
    diff = store_ts - begin_ts
    java_quotient = int(abs(diff) // 1000) * (1 if diff >= 0 else -1)
    expected = 0 if begin_ts <= 0 else max(0, min(2**31 - 1, java_quotient))
    assert ic.time_diff_seconds(store_ts, begin_ts) == expected


@given(st.builds(ic.IndexHeader, INT64, INT64, INT64, INT64, INT32, INT32))
def test_header_round_trip(header):
    data = ic.encode_header(header)
    assert len(data) == 40
    assert ic.decode_header(data) == header
    assert ic.decode_header(b"\x00" * 3 + data, 3) == header


@given(st.builds(ic.IndexEntry, INT32, INT64, INT32, INT32))
def test_entry_round_trip(entry):
    data = ic.encode_entry(entry)
    assert len(data) == 20
    assert ic.decode_entry(data) == entry
    assert ic.decode_entry(data + b"\xff", 0) == entry


@given(data=st.binary(max_size=64), position=st.integers(-5, 70))
def test_decode_arbitrary_bytes(data, position):
    for decode in (ic.decode_header, ic.decode_entry):
        try:
            value = decode(data, position)
        except CorruptDataError as error:
            assert error.path is None
            assert error.position == position
        else:
            assert isinstance(value, (ic.IndexHeader, ic.IndexEntry))


@pytest.mark.parametrize("decode,size", [(ic.decode_header, 40), (ic.decode_entry, 20)])
def test_short_buffer_is_corrupt(decode, size):
    with pytest.raises(CorruptDataError):
        decode(b"\x00" * (size - 1))
    decode(b"\x00" * size)


def test_entry_dtype_matches_struct():
    import numpy as np

    raw = unhex(VECTOR_CHAINED_ENTRY)
    row = np.frombuffer(raw, dtype=ic.ENTRY_DTYPE)[0]
    assert (int(row["key_hash"]), int(row["phy_offset"]), int(row["time_diff_s"]),
            int(row["prev_index"])) == (2746024, 177, 5, 2)
