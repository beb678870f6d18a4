"""Checkpoint codec (spec §6.1, §14.12) and CheckpointFile."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec.checkpoint_codec import (CHECKPOINT_FILE_SIZE_BYTES, Checkpoint, decode_checkpoint,
                                          encode_checkpoint, min_timestamp, min_timestamp_index)
from store.errors import CorruptDataError, ReadOnlyStoreError
from store.meta.checkpoint import CheckpointFile
from tests.fixtures_util import fixture_dirs, fixture_id, load_dump

FIXTURES = fixture_dirs()
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def style_of(fixture: str) -> str:
    return "4.9" if "4.9" in load_dump(fixture)["rocketmqVersion"] else "5.x"


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_golden_decode_matches_read_dump(fixture):
    before = load_dump(fixture)["before"]["checkpoint"]
    with open(os.path.join(fixture, "store", "checkpoint"), "rb") as f:
        raw = f.read()
    assert len(raw) == before["fileSize"] == CHECKPOINT_FILE_SIZE_BYTES
    cp = decode_checkpoint(raw)
    assert cp.physic_msg_timestamp == before["physicMsgTimestamp"]
    assert cp.logics_msg_timestamp == before["logicsMsgTimestamp"]
    assert cp.index_msg_timestamp == before["indexMsgTimestamp"]
    assert cp.master_flushed_offset == before.get("masterFlushedOffset", 0)
    assert cp.confirm_phy_offset == before.get("confirmPhyOffset", 0)
    # The writer's own style re-encodes the file byte for byte.
    assert encode_checkpoint(cp, style_of(fixture)) == raw


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_golden_min_timestamps_after_recovery(fixture):
    after = load_dump(fixture)["checkpointAfterRecovery"]
    cp = Checkpoint(after["physicMsgTimestamp"], after["logicsMsgTimestamp"], after["indexMsgTimestamp"])
    assert min_timestamp(cp) == after["minTimestamp"]
    assert min_timestamp_index(cp) == after["minTimestampIndex"]


def test_spec_vector_14_12():
    cp = Checkpoint(1700000000123, 1700000000123, 0, 0, 177)
    data = encode_checkpoint(cp, "5.x")
    assert data[:40].hex() == ("0000018bcfe5687b" "0000018bcfe5687b" "0000000000000000"
                               "0000000000000000" "00000000000000b1")
    assert data[40:] == bytes(4056)
    assert decode_checkpoint(data) == cp


@given(longs, longs, longs, longs, longs)
def test_round_trip_5x(a, b, c, d, e):
    cp = Checkpoint(a, b, c, d, e)
    data = encode_checkpoint(cp, "5.x")
    assert len(data) == CHECKPOINT_FILE_SIZE_BYTES and data[40:] == bytes(4056)
    assert decode_checkpoint(data) == cp


@given(longs, longs, longs, longs, longs)
def test_round_trip_4_9_writes_24_bytes(a, b, c, d, e):
    data = encode_checkpoint(Checkpoint(a, b, c, d, e), "4.9")
    assert len(data) == CHECKPOINT_FILE_SIZE_BYTES and data[24:] == bytes(4072)
    assert decode_checkpoint(data) == Checkpoint(a, b, c)


@given(st.binary(max_size=64))
def test_decode_short_or_any_bytes(data):
    if len(data) < 24:
        with pytest.raises(CorruptDataError):
            decode_checkpoint(data)
    else:
        assert isinstance(decode_checkpoint(data), Checkpoint)


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, True, 1.5])
def test_encode_rejects_non_long(bad):
    with pytest.raises(ValueError):
        encode_checkpoint(Checkpoint(bad, 0, 0))


def test_encode_rejects_unknown_style():
    with pytest.raises(ValueError):
        encode_checkpoint(Checkpoint(), "auto")


@pytest.mark.parametrize("physic, logics, index, expected_min, expected_index", [
    (0, 5000, 100, 0, 0),               # crash: physic 0 clamps to 0
    (10000, 20000, 0, 7000, 0),         # no full index file yet
    (10000, 20000, 9000, 7000, 7000),
    (20000, 10000, 6000, 7000, 6000),
    (2000, 2000, 5000, 0, 0),           # never negative
])
def test_min_timestamps(physic, logics, index, expected_min, expected_index):
    cp = Checkpoint(physic, logics, index)
    assert min_timestamp(cp) == expected_min
    assert min_timestamp_index(cp) == expected_index


# ---------------------------------------------------------------------------------- CheckpointFile

def test_missing_file_read_only_reads_zeros_and_creates_nothing(tmp_path):
    path = tmp_path / "checkpoint"
    cpf = CheckpointFile(path, read_only=True)
    assert cpf.load() == Checkpoint()
    assert not path.exists() and cpf.file_size_bytes is None
    with pytest.raises(ReadOnlyStoreError):
        cpf.flush()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("style, used", [("4.9", 24), ("5.x", 40)])
def test_missing_file_writable_is_created_and_flushed(tmp_path, style, used):
    path = tmp_path / "checkpoint"
    cpf = CheckpointFile(path, read_only=False, style=style)
    cpf.load()
    assert path.read_bytes() == bytes(4096)
    cpf.physic_msg_timestamp = 1700000000123
    cpf.logics_msg_timestamp = 1700000000456
    cpf.index_msg_timestamp = 1700000000001
    cpf.master_flushed_offset = 7
    cpf.confirm_phy_offset = 177
    cpf.flush()
    data = path.read_bytes()
    assert len(data) == 4096 and data[used:] == bytes(4096 - used)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]   # no .tmp left
    again = CheckpointFile(path, read_only=True, style=style).load()
    assert again.physic_msg_timestamp == 1700000000123
    assert again.confirm_phy_offset == (177 if style == "5.x" else 0)
    assert cpf.min_timestamp == 1700000000123 - 3000
    assert cpf.min_timestamp_index == 1700000000123 - 3000   # min(min_timestamp, index)


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_fixture_file_loads_read_only_without_writing(fixture):
    path = os.path.join(fixture, "store", "checkpoint")
    before = os.stat(path).st_mtime_ns
    cpf = CheckpointFile(path, read_only=True, style=style_of(fixture))
    cp = cpf.load()
    assert cpf.checkpoint == cp and cpf.file_size_bytes == 4096
    with open(path, "rb") as f:
        assert cpf.encode() == f.read()
    assert os.stat(path).st_mtime_ns == before


def test_short_file_reads_zero_padded(tmp_path):
    path = tmp_path / "checkpoint"
    path.write_bytes((1234).to_bytes(8, "big"))
    cpf = CheckpointFile(path, read_only=True)
    assert cpf.load() == Checkpoint(1234, 0, 0)
    assert cpf.file_size_bytes == 8


def test_unknown_style_rejected(tmp_path):
    with pytest.raises(ValueError):
        CheckpointFile(tmp_path / "checkpoint", read_only=True, style="4.8")
