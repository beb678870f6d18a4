"""IndexFile: insert (spec §5.5), query (§5.8), the new-file quirk (§5.7), read-only and corruption."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec import index_codec as ic
from store.codec.javahash import index_key_hash
from store.errors import CorruptDataError, ReadOnlyStoreError, StoreClosedError
from store.index.index_file import IndexFile

FOREVER = 2**63 - 1
UNIQ = "TopicTest#7F00000130391B6D358647B760000000"


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def read_at(path, position: int, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(position)
        return handle.read(size)


def new_file(tmp_path, slots=8, entries=16, name="20240101000000000", **kwargs) -> IndexFile:
    return IndexFile(tmp_path / name, slots, entries, create=True, **kwargs)


def digest(path) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def test_vector_a_default_dimensions(tmp_path):
    """Spec §14.10 byte for byte, in a (sparse) 420,000,040-byte file."""
    index_file = new_file(tmp_path, 5_000_000, 20_000_000)
    for key in (UNIQ, "TopicTest#k1", "TopicTest#k2"):
        assert index_file.put_key(key, 0, 1700000000123)
    index_file.flush()
    path = index_file.path
    assert os.path.getsize(path) == 420_000_040
    assert read_at(path, 0, 40) == unhex(
        "0000018bcfe5687b 0000018bcfe5687b 0000000000000000 0000000000000000 00000003 00000004")
    assert read_at(path, 16189760, 4) == unhex("00000001")
    assert read_at(path, 10984136, 4) == unhex("00000002")
    assert read_at(path, 10984140, 4) == unhex("00000003")
    assert read_at(path, 20000060, 20) == unhex("2f07e886 0000000000000000 00000000 00000000")
    assert read_at(path, 20000080, 20) == unhex("0029e6a8 0000000000000000 00000000 00000000")
    assert read_at(path, 20000100, 20) == unhex("0029e6a9 0000000000000000 00000000 00000000")

    assert index_file.put_key("TopicTest#k1", 177, 1700000005123)
    index_file.flush()
    assert read_at(path, 20000120, 20) == unhex("0029e6a8 00000000000000b1 00000005 00000002")
    assert read_at(path, 10984136, 4) == unhex("00000004")
    assert read_at(path, 0, 40) == unhex(
        "0000018bcfe5687b 0000018bcfe57c03 0000000000000000 00000000000000b1 00000003 00000005")

    result: list[int] = []
    index_file.select(result, "TopicTest#k1", 64, 0, FOREVER)
    assert result == [177, 0]
    result = []
    index_file.select(result, "TopicTest#k1", 64, 1700000004000, FOREVER)
    assert result == [177]
    index_file.close()


def test_header_written_on_every_put_without_flush(tmp_path):
    index_file = new_file(tmp_path)
    assert read_at(index_file.path, 36, 4) == b"\x00\x00\x00\x00"     # brand new: 0 on disk
    assert index_file.index_count == 1                                  # ... 1 in memory
    index_file.put_key("T#a", 10, 1000)
    assert read_at(index_file.path, 0, 40) == ic.encode_header(ic.IndexHeader(1000, 1000, 10, 10, 1, 2))
    index_file.close()


def test_flush_of_empty_file_writes_index_count_one(tmp_path):
    index_file = new_file(tmp_path)
    index_file.flush()
    assert ic.decode_header(read_at(index_file.path, 0, 40)).index_count == 1
    index_file.close()


def test_new_file_quirk(tmp_path):
    """Spec §5.7: begin/end initialised from the previous file's ends; first timeDiff relative to it."""
    index_file = new_file(tmp_path, prev_end_phy_offset=5000, prev_end_timestamp=1_000_000)
    assert index_file.header() == ic.IndexHeader(1_000_000, 1_000_000, 5000, 5000, 0, 0)
    index_file.put_key("T#a", 5000, 1_003_500)
    entry = ic.decode_entry(read_at(index_file.path, ic.entry_position(8, 1), 20))
    assert entry.time_diff_s == 3                          # relative to the previous end time
    assert index_file.header() == ic.IndexHeader(1_003_500, 1_003_500, 5000, 5000, 1, 2)
    index_file.put_key("T#b", 5100, 1_004_600)
    entry = ic.decode_entry(read_at(index_file.path, ic.entry_position(8, 2), 20))
    assert entry.time_diff_s == 1                          # now relative to the first entry's time
    index_file.close()


def test_new_file_quirk_ignores_non_positive(tmp_path):
    index_file = new_file(tmp_path, prev_end_phy_offset=0, prev_end_timestamp=-5)
    assert index_file.header() == ic.IndexHeader(0, 0, 0, 0, 0, 0)
    index_file.close()


def test_full_after_max_minus_one_entries(tmp_path):
    index_file = new_file(tmp_path, slots=4, entries=5)
    for number in range(4):
        assert not index_file.is_full()
        assert index_file.put_key(f"T#k{number}", number, 1000 + number)
    assert index_file.is_full()
    before = index_file.read_bytes()
    assert index_file.put_key("T#more", 99, 2000) is False
    assert index_file.read_bytes() == before
    assert index_file.header().index_count == 5
    index_file.close()


def test_time_diff_clamped(tmp_path):
    index_file = new_file(tmp_path)
    index_file.put_key("T#a", 0, 10_000)
    index_file.put_key("T#b", 1, 5_000)                    # earlier than begin -> 0
    index_file.put_key("T#c", 2, 10_000 + 2**31 * 1000)    # too far -> Integer.MAX_VALUE
    entries = index_file.entries()
    assert list(entries["time_diff_s"][1:]) == [0, 0, 2**31 - 1]
    index_file.close()


def test_select_stops_at_begin_and_honours_max_num(tmp_path):
    index_file = new_file(tmp_path, slots=1)
    for number in range(6):
        index_file.put_key("T#k", number * 100, 1_000_000 + number * 1000)
    result: list[int] = []
    index_file.select(result, "T#k", 3, 0, FOREVER)
    assert result == [500, 400, 300]
    result = []
    index_file.select(result, "T#k", 64, 1_002_000, 1_004_000)
    assert result == [400, 300, 200]
    result = [7]
    index_file.select(result, "T#k", 1, 0, FOREVER)        # already at max_num
    assert result == [7]
    index_file.close()


def test_collisions_and_walk_chain(tmp_path):
    index_file = new_file(tmp_path, slots=1)                # every key shares slot 0
    index_file.put_key("T#a", 10, 1000)
    index_file.put_key("T#b", 20, 2000)
    index_file.put_key("T#a", 30, 3000)
    result: list[int] = []
    index_file.select(result, "T#a", 64, 0, FOREVER)
    assert result == [30, 10]
    steps = index_file.walk_chain("T#a")
    assert [(s.entry_number, s.phy_offset, s.prev_index, s.hash_matches) for s in steps] == [
        (3, 30, 2, True), (2, 20, 1, False), (1, 10, 0, True)]
    assert steps[0].slot == 0
    assert steps[0].key_hash == index_key_hash("T#a")
    assert steps[0].store_time_ms == 1000 + 2 * 1000
    assert index_file.walk_chain("T#zz")[0].hash_matches is False
    index_file.close()


def test_numpy_views(tmp_path):
    index_file = new_file(tmp_path, slots=8)
    index_file.put_key("T#a", 10, 1000)
    index_file.put_key("T#b", 20, 2000)
    slots = index_file.slot_table()
    assert slots.dtype == np.int32 and slots.shape == (8,)
    for number, key in ((1, "T#a"), (2, "T#b")):
        assert slots[index_key_hash(key) % 8] == number
    entries = index_file.entries()
    assert entries.dtype == ic.ENTRY_DTYPE and len(entries) == 3
    assert list(entries["phy_offset"]) == [0, 10, 20]
    index_file.close()                                     # copies: no exported buffer blocks close
    with pytest.raises(StoreClosedError):
        index_file.slot_table()


def _corrupt_cycle(tmp_path) -> IndexFile:
    index_file = new_file(tmp_path, slots=1, entries=8)
    for number in range(3):
        index_file.put_key("T#a", number, 1000)
    index_file.close()
    # entry 1's prev -> 3: the chain 3 -> 2 -> 1 -> 3 -> ... never ends in the broker.
    with open(index_file.path, "r+b") as handle:
        handle.seek(ic.entry_position(1, 1) + 16)
        handle.write(ic.SLOT_STRUCT.pack(3))
    return IndexFile(index_file.path, 1, 8)


def test_select_is_bounded_on_a_corrupt_cycle(tmp_path):
    index_file = _corrupt_cycle(tmp_path)
    result: list[int] = []
    index_file.select(result, "T#a", 64, 0, FOREVER)
    assert len(result) == index_file.index_count           # bounded by indexCount steps
    assert len(index_file.walk_chain("T#a")) == index_file.index_count
    index_file.close()


def test_read_only_never_writes(tmp_path):
    writer = new_file(tmp_path)
    writer.put_key("T#a", 10, 1000)
    writer.flush()
    writer.close()
    os.chmod(writer.path, 0o444)
    before = digest(writer.path)
    reader = IndexFile(writer.path, 8, 16, read_only=True)
    with pytest.raises(ReadOnlyStoreError):
        reader.put_key("T#b", 20, 2000)
    with pytest.raises(TypeError):
        reader._map[0:1] = b"\x01"                         # the mapping itself is read-only
    result: list[int] = []
    reader.select(result, "T#a", 64, 0, FOREVER)
    assert result == [10]
    reader.flush()
    with pytest.raises(ReadOnlyStoreError):
        reader.destroy()
    reader.close()
    assert digest(writer.path) == before


def test_read_only_sees_a_concurrent_writer(tmp_path):
    writer = new_file(tmp_path)
    reader = IndexFile(writer.path, 8, 16, read_only=True)
    writer.put_key("T#a", 10, 1000)
    result: list[int] = []
    reader.select(result, "T#a", 64, 0, FOREVER)
    assert result == [10]
    assert reader.header().index_count == 2
    writer.close()
    reader.close()


def test_wrong_size_is_corrupt(tmp_path):
    path = tmp_path / "20240101000000000"
    path.write_bytes(b"\x00" * 100)
    with pytest.raises(CorruptDataError) as info:
        IndexFile(path, 8, 16, read_only=True)
    assert info.value.path == str(path)


def test_index_count_above_max_is_corrupt(tmp_path):
    index_file = new_file(tmp_path)
    index_file.close()
    with open(index_file.path, "r+b") as handle:
        handle.seek(ic.INDEX_COUNT_POSITION)
        handle.write(ic.SLOT_STRUCT.pack(17))
    with pytest.raises(CorruptDataError) as info:
        IndexFile(index_file.path, 8, 16, read_only=True)
    assert info.value.path == index_file.path
    assert info.value.position == ic.INDEX_COUNT_POSITION


def test_negative_index_count_loads_as_one(tmp_path):
    index_file = new_file(tmp_path)
    index_file.close()
    with open(index_file.path, "r+b") as handle:
        handle.seek(ic.INDEX_COUNT_POSITION)
        handle.write(ic.SLOT_STRUCT.pack(-3))
    reopened = IndexFile(index_file.path, 8, 16)
    assert reopened.index_count == 1
    assert reopened.put_key("T#a", 1, 1000)
    assert reopened.header().index_count == 2
    reopened.close()


def test_create_refuses_existing_file(tmp_path):
    new_file(tmp_path).close()
    with pytest.raises(FileExistsError):
        new_file(tmp_path)


PUTS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f"]),
                          st.integers(0, 5000)), min_size=1, max_size=40)


@given(puts=PUTS, slots=st.integers(1, 5), max_num=st.integers(1, 64))
def test_select_matches_a_model(tmp_path_factory, puts, slots, max_num):
    """Over all time, select returns the phy offsets of the entries with the same keyHash, newest
    first, up to max_num: collisions of slots never leak in, chains are never cut."""
    directory = tmp_path_factory.mktemp("model")
    index_file = IndexFile(directory / "f", slots, 64, create=True)
    model: list[tuple[str, int]] = []
    store_ts = 1_000_000
    for phy_offset, (key, step_ms) in enumerate(puts):
        store_ts += step_ms
        assert index_file.put_key("T#" + key, phy_offset, store_ts)
        model.append((key, phy_offset))
    for key in "abcdefg":
        result: list[int] = []
        index_file.select(result, "T#" + key, max_num, 0, FOREVER)
        wanted_hash = index_key_hash("T#" + key)
        expected = [p for k, p in reversed(model) if index_key_hash("T#" + k) == wanted_hash]
        assert result == expected[:max_num]
    header = index_file.header()
    assert header.index_count == len(puts) + 1
    assert header.hash_slot_count == len({index_key_hash("T#" + k) % slots for k, _ in model})
    index_file.close()
