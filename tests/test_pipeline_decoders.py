"""The vectorised decoders and the pandas/Arrow path, against read-dump.json of every fixture."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pyarrow as pa
import pytest

from store.codec.javahash import index_key_hash
from store.pipeline.commitlog_decoder import COMMITLOG_COLUMNS, COMMITLOG_SCHEMA
from store.pipeline.commitlog_scan import END_BLANK, END_INVALID, END_ZEROS
from store.pipeline.cq_decoder import CQ_SCHEMA
from store.pipeline.frames import commitlog_table, consume_queue_table, index_table, read_commitlog, read_consume_queues
from store.pipeline.index_decoder import INDEX_SCHEMAS
from tests.pipeline_util import compare_with_dump, copy_store, dump_units, fixture_dirs, fixture_id, read_dump

FIXTURES = fixture_dirs()
by_fixture = pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])


def test_fixtures_are_found():
    assert len(FIXTURES) >= 5


@by_fixture
def test_commitlog_matches_read_dump(fixture):
    table = commitlog_table(fixture / "store")
    assert table.schema.equals(COMMITLOG_SCHEMA)
    assert compare_with_dump(table.to_pylist(), fixture, fixture / "store") == []
    assert table.num_rows >= read_dump(fixture)["totalMessages"]


@by_fixture
def test_commitlog_ends_where_recovery_ends(fixture):
    ends = []
    commitlog_table(fixture / "store", columns=["phy_offset"], ends=ends)
    last_with_records = [e for e in ends if e.records][-1]
    assert last_with_records.phy_offset == read_dump(fixture)["commitLog"]["maxPhyOffset"]
    assert all(e.kind == END_BLANK for e in ends[: ends.index(last_with_records)])


@by_fixture
def test_pandas_path_equals_arrow_path(fixture):
    frame = read_commitlog(fixture / "store")
    table = commitlog_table(fixture / "store")
    assert list(frame.columns) == COMMITLOG_SCHEMA.names
    assert frame["phy_offset"].tolist() == table.column("phy_offset").to_pylist()
    assert frame["properties"].tolist() == [dict(p) for p in table.column("properties").to_pylist()]
    assert frame["body"].tolist() == table.column("body").to_pylist()


@by_fixture
def test_small_splits_give_the_same_rows(fixture):
    whole = commitlog_table(fixture / "store")
    split = commitlog_table(fixture / "store", split_bytes=4096)
    assert split.equals(whole)


@by_fixture
def test_consume_queue_units_match_read_dump(fixture):
    table = consume_queue_table(fixture / "store")
    assert table.schema.equals(CQ_SCHEMA)
    got = sorted(zip(*[table.column(c).to_pylist() for c in
                       ("topic", "queue_id", "queue_offset", "phy_offset", "size", "tags_code")]))
    assert got == dump_units(fixture)
    assert len(read_consume_queues(fixture / "store")) == table.num_rows


@by_fixture
def test_index_entries_answer_read_dump_queries(fixture):
    entries = index_table(fixture / "store")
    assert entries.schema.equals(INDEX_SCHEMAS["entries"])
    headers = index_table(fixture / "store", "headers").to_pylist()
    assert entries.num_rows == sum(max(h["index_count"], 1) - 1 for h in headers)
    pairs = set(zip(entries.column("key_hash").to_pylist(), entries.column("phy_offset").to_pylist()))
    for query in read_dump(fixture)["queries"]:
        key_hash = index_key_hash(f"{query['topic']}#{query['key']}")
        for hit in query["hits"]:
            assert (key_hash, hit["commitLogOffset"]) in pairs


@by_fixture
def test_index_geometry_is_inferred_without_config(fixture, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(fixture / "store" / "index", store / "index")
    expected = index_table(fixture / "store", "headers")
    inferred = index_table(store, "headers")
    assert inferred.column("max_hash_slot_num").equals(expected.column("max_hash_slot_num"))
    assert inferred.column("max_index_num").equals(expected.column("max_index_num"))


def test_column_subset_and_filters():
    fixture = FIXTURES[0]
    table = commitlog_table(fixture / "store", columns=["topic", "store_timestamp", "msg_id"], topics=["TopicA"])
    assert table.schema.names == ["topic", "store_timestamp", "msg_id"]
    assert set(table.column("topic").to_pylist()) == {"TopicA"}
    stamps = sorted(table.column("store_timestamp").to_pylist())
    middle = stamps[len(stamps) // 2]
    later = commitlog_table(fixture / "store", columns=["store_timestamp"], topics=["TopicA"],
                            store_time_range_ms=(middle, None))
    assert sorted(later.column("store_timestamp").to_pylist()) == [s for s in stamps if s >= middle]
    with pytest.raises(ValueError):
        commitlog_table(fixture / "store", columns=["nope"])


def _last_segment_with_records(store):
    ends = []
    commitlog_table(store, columns=["phy_offset"], ends=ends)
    return [e for e in ends if e.records][-1]


@pytest.mark.parametrize("damage", ["garbage_tail", "torn_record", "bad_length", "bad_magic"])
def test_damaged_tail_stops_at_the_last_good_record(tmp_path, damage):
    fixture = FIXTURES[0]
    store = copy_store(fixture, tmp_path)
    full = commitlog_table(store, columns=["phy_offset", "store_size", "file_name", "position"]).to_pylist()
    last = full[-1]
    path = store / "commitlog" / last["file_name"]
    with open(path, "r+b") as handle:
        if damage == "garbage_tail":
            handle.seek(last["position"] + last["store_size"])
            handle.write(b"\xde\xad\xbe\xef" * 64)
            expected_rows = len(full)
        elif damage == "torn_record":
            handle.seek(last["position"] + 40)
            handle.write(b"\x00" * (last["store_size"] - 40))  # only the header reached the page cache
            expected_rows = len(full) - 1
        elif damage == "bad_length":
            handle.seek(last["position"])
            handle.write(struct.pack(">i", last["store_size"] + 4))
            expected_rows = len(full) - 1
        else:
            handle.seek(last["position"] + 4)
            handle.write(b"\x00\x00\x00\x01")
            expected_rows = len(full) - 1
    ends = []
    damaged = commitlog_table(store, columns=["phy_offset"], ends=ends)
    assert damaged.num_rows == expected_rows
    assert damaged.column("phy_offset").to_pylist() == [r["phy_offset"] for r in full[:expected_rows]]
    assert [e for e in ends if e.records][-1].kind == END_INVALID


def test_zero_filled_tail_is_reported_as_zeros():
    end = _last_segment_with_records(FIXTURES[0] / "store")
    assert end.kind == END_ZEROS


def test_crc_check_stops_at_a_corrupt_body(tmp_path):
    fixture = FIXTURES[0]
    store = copy_store(fixture, tmp_path)
    rows = commitlog_table(store, columns=["phy_offset", "file_name", "position"]).to_pylist()
    victim = rows[len(rows) // 2]
    with open(store / "commitlog" / victim["file_name"], "r+b") as handle:
        handle.seek(victim["position"] + 100)  # inside the body (bodies start at 88)
        byte = handle.read(1)
        handle.seek(victim["position"] + 100)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert commitlog_table(store, columns=["phy_offset"]).num_rows == len(rows)
    checked = commitlog_table(store, columns=["phy_offset"], check_crc=True)
    assert checked.column("phy_offset").to_pylist() == [r["phy_offset"] for r in rows if r["phy_offset"] < victim["phy_offset"]]


def test_schema_declares_every_column_once():
    assert len(set(COMMITLOG_COLUMNS)) == len(COMMITLOG_SCHEMA)
    assert isinstance(COMMITLOG_SCHEMA.field("properties").type, pa.MapType)
    assert np.dtype("int64") == COMMITLOG_SCHEMA.field("phy_offset").type.to_pandas_dtype()


def test_the_file_name_column_is_right_for_batches_of_any_size_in_any_order():
    # Built once per decoder for the largest batch yet and sliced for smaller ones.
    from store import kernel
    from store.pipeline.commitlog_decoder import RecordDecoder, ScanLayout
    decoder = RecordDecoder(np.zeros(64, dtype=np.uint8), 1 << 30, "00000000001073741824")
    for n in (5, 3, 0, 9, 9, 1, 12):
        column = decoder.column("file_name", ScanLayout(np.zeros((n, kernel.SCAN_FIELDS), np.int64)))
        column.validate(full=True)
        assert column.type == pa.string() and column.null_count == 0
        assert column.to_pylist() == ["00000000001073741824"] * n
    batch = pa.RecordBatch.from_arrays([column.slice(2, 4)], names=["file_name"])
    assert pa.Table.from_batches([batch]).column(0).to_pylist() == ["00000000001073741824"] * 4
