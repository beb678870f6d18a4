"""config/delayOffset.json (store/meta/delay_offset.py): the real 4.9.7 files byte for byte, the
ConcurrentHashMap order, the .bak fallback, bad input, and a property-based round trip."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import CorruptDataError, ReadOnlyStoreError
from store.meta.delay_offset import DelayOffsetTable, concurrent_hash_map_order
from tests.fixtures_util import fixture_dirs, fixture_id

FIXTURE_FILES = [os.path.join(d, "store", "config", "delayOffset.json") for d in fixture_dirs()]
FIXTURE_FILES = [f for f in FIXTURE_FILES if os.path.exists(f)]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: fixture_id(p.split("/store/")[0]))
def test_real_files_load_and_encode_to_the_same_bytes(path):
    table = DelayOffsetTable(os.path.dirname(path), read_only=True)
    table.load()
    with open(path, "rb") as f:
        assert table.encode().encode("utf-8") == f.read()


def test_some_real_4_9_7_file_was_checked():
    assert any("4.9.7" in f for f in FIXTURE_FILES)


def test_written_form_matches_fastjson_pretty_format(tmp_path):
    table = DelayOffsetTable(tmp_path, read_only=False)
    table.persist()
    assert (tmp_path / "delayOffset.json").read_bytes() == b'{\n\t"offsetTable":{}\n}'
    for level, offset in ((3, 12), (1, 5), (2, 0)):
        table.set(level, offset)
    table.persist()
    assert (tmp_path / "delayOffset.json").read_bytes() == \
        b'{\n\t"offsetTable":{1:5,2:0,3:12\n\t}\n}'
    assert (tmp_path / "delayOffset.json.bak").read_bytes() == b'{\n\t"offsetTable":{}\n}'


@pytest.mark.parametrize("keys, expected", [
    ([18, 3, 1], [1, 3, 18]),
    ([18, 3, 1, 64, 65], [64, 1, 65, 3, 18]),      # 64 and 65 share bins 0 and 1 with 0 and 1
    ([2, -1], [-1, 2]),                            # spread(-1) = 0x7fff0000: bin 0
])
def test_concurrent_hash_map_order(keys, expected):
    assert concurrent_hash_map_order(keys) == expected


def test_a_table_past_three_quarters_grows(tmp_path):
    keys = list(range(100, 0, -1))
    assert concurrent_hash_map_order(keys) == sorted(keys)   # 128 bins after growth


def test_quoted_keys_and_5x_members_load_and_are_kept(tmp_path):
    (tmp_path / "delayOffset.json").write_text(
        '{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":5},"offsetTable":{"4":9}}')
    table = DelayOffsetTable(tmp_path, read_only=False)
    assert table.load() == {4: 9}
    assert table.encode() == ('{\n\t"dataVersion":{\n\t\t"counter":2,\n\t\t"stateVersion":0,'
                              '\n\t\t"timestamp":5\n\t},\n\t"offsetTable":{4:9\n\t}\n}')


def test_a_bad_file_falls_back_to_the_bak(tmp_path):
    (tmp_path / "delayOffset.json").write_text('{"offsetTable":{1:')
    (tmp_path / "delayOffset.json.bak").write_text('{"offsetTable":{1:3}}')
    table = DelayOffsetTable(tmp_path, read_only=True)
    assert table.load() == {1: 3} and table.file.source == "bak"


@pytest.mark.parametrize("text", ['{"offsetTable":{1:"x"}}', '{"offsetTable":[1]}', "[]",
                                  '{"offsetTable":{"a":1}}', '{"offsetTable":{1:true}}',
                                  '{"offsetTable":{9999999999:1}}', '{"offsetTable":{1:2'])
def test_bad_bak_raises_naming_the_file_and_changes_nothing(tmp_path, text):
    (tmp_path / "delayOffset.json").write_text(text)
    (tmp_path / "delayOffset.json.bak").write_text(text)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(CorruptDataError) as caught:
        DelayOffsetTable(tmp_path, read_only=False).load()
    assert caught.value.path.endswith("delayOffset.json.bak")
    assert "delayOffset.json.bak" in str(caught.value)
    assert sorted(os.listdir(tmp_path)) == before


def test_a_missing_file_is_an_empty_table_and_read_only_never_writes(tmp_path):
    table = DelayOffsetTable(tmp_path, read_only=True)
    assert table.load() == {}
    with pytest.raises(ReadOnlyStoreError):
        table.persist()
    assert os.listdir(tmp_path) == []


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
                       max_size=40))
def test_round_trip(tmp_path_factory, table_in):
    directory = tmp_path_factory.mktemp("rt")
    table = DelayOffsetTable(directory, read_only=False)
    for level, offset in table_in.items():
        table.set(level, offset)
    table.persist()
    again = DelayOffsetTable(directory, read_only=True)
    assert again.load() == table_in
    assert again.encode() == table.encode()
