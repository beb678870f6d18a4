"""The inspection API (store/inspect/): what the dashboard, the tour and `rmqstore dump` read.

Each view is checked against an independent answer: the segment files on disk, the decoded messages
the facade returns, the real RocketMQ fixtures' read dumps.
"""

from __future__ import annotations

import os

import pytest

from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, store_config
from store import Message, MessageStore, StoreConfig
from store.codec import message as msgcodec
from store.codec import record_check
from store.codec.index_codec import build_key
from store.errors import StoreError
from store.inspect.raw import dump_index_entries, dump_queue_units, dump_records

SEGMENT_BYTES = 4096
TOPIC = "InspectTopic"


@pytest.fixture()
def written(tmp_path):
    """A store with three rolled segments (BLANK fillers), two queues, keys in the index."""
    config = StoreConfig.from_dict({}, store_path_root_dir=str(tmp_path / "store"),
                                   mapped_file_size_commit_log=SEGMENT_BYTES,
                                   mapped_file_size_consume_queue=400, max_hash_slot_num=32,
                                   max_index_num=64)
    store = MessageStore.open(config)
    results = []
    for number in range(40):
        results.append(store.put_message(Message(TOPIC, b"x" * (100 + number), queue_id=number % 2,
                                                 tags=f"t{number % 3}", keys=[f"k{number}"])))
    store.dispatch_pending()
    yield store, results
    store.close()


def test_segments_are_the_files_on_disk_with_their_pointers(written):
    store, _ = written
    segments = store.inspect.segments()
    on_disk = sorted(os.listdir(store.config.commit_log_dir))
    names = [s.name for s in segments]
    assert names == [name for name in on_disk if name in names]
    # Beside them at most the segment AllocateMappedFileService made ahead of the writer (RocketMQ keeps
    # the next one on disk too): after the last segment, all zero, not part of the log yet; while the
    # service makes it, under its temporary name.
    ahead = [name for name in on_disk if name not in names]
    assert len(ahead) <= 1
    for name in ahead:
        assert int(name.removesuffix(".creating")) == segments[-1].file_from_offset + SEGMENT_BYTES
        try:
            with open(os.path.join(store.config.commit_log_dir, name), "rb") as handle:
                assert not any(handle.read())
        except FileNotFoundError:       # the service renamed it meanwhile
            assert name.endswith(".creating")
    on_disk = names
    assert all(s.file_size_bytes == SEGMENT_BYTES for s in segments)
    assert [s.file_from_offset for s in segments] == [int(name) for name in on_disk]
    assert all(s.is_full for s in segments[:-1]) and not segments[-1].is_full
    last = segments[-1]
    assert last.file_from_offset + last.wrote_position == store.pointers()["wrote"]
    assert store.inspect.segment_holding(last.file_from_offset + 1) == last
    assert store.inspect.segment_holding(10**12) is None


def test_segment_layouts_count_every_record_and_the_fillers(written):
    store, results = written
    layouts = [store.inspect.segment_layout(s.name) for s in store.inspect.segments()]
    assert sum(layout.records for layout in layouts) == len(results)
    for segment, layout in zip(store.inspect.segments()[:-1], layouts):
        assert layout.filler_bytes > 0
        assert layout.data_bytes + layout.filler_bytes == segment.file_size_bytes
    with pytest.raises(StoreError, match="no commit-log segment"):
        store.inspect.segment_layout("00000000000000000007")
    with pytest.raises(StoreError, match="no commit-log segment"):
        store.inspect.segment_layout("not-a-segment")


def test_records_walk_from_an_offset_and_stop_at_the_cap(written):
    store, results = written
    walked = [(phy, r.size) for phy, r in store.inspect.records(0, check_crc=True)
              if r.kind == record_check.CHECK_RECORD]
    assert walked == [(r.wrote_offset, r.wrote_bytes) for r in results]
    capped = list(store.inspect.records(results[3].wrote_offset, check_crc=False, max_records=2))
    assert [phy for phy, r in capped if r.kind == record_check.CHECK_RECORD] == \
        [results[3].wrote_offset, results[4].wrote_offset]


def test_record_bytes_read_and_size(written):
    store, results = written
    put = results[7]
    raw = store.inspect.record_bytes(put.wrote_offset)
    assert len(raw) == put.wrote_bytes == store.inspect.record_size_at(put.wrote_offset)
    assert msgcodec.decode_message(raw).keys == "k7"
    assert store.inspect.read(put.wrote_offset, 8) == raw[:8]
    assert store.inspect.record_bytes(store.pointers()["wrote"] + 1000) is None


def test_queue_units_point_at_their_records(written):
    store, results = written
    queue_one = [r for number, r in enumerate(results) if number % 2 == 1]
    unit = store.inspect.queue_unit(TOPIC, 1, 2)
    assert (unit.phy_offset, unit.size) == (queue_one[2].wrote_offset, queue_one[2].wrote_bytes)
    units = store.inspect.queue_units(TOPIC, 1, 0, 5)
    assert [int(u["phy_offset"]) for u in units] == [r.wrote_offset for r in queue_one[:len(units)]]
    assert store.inspect.queue_max_phy_end(TOPIC, 1) == queue_one[-1].wrote_offset + queue_one[-1].wrote_bytes
    files = store.inspect.queue_file_names(TOPIC, 1)
    assert files == sorted(os.listdir(os.path.join(store.config.consume_queue_dir, TOPIC, "1")))
    assert store.inspect.queue_file_names("NoSuchTopic", 0) == []
    assert store.inspect.rocksdb_stats() is None


def test_index_views_find_a_key_through_its_chain(written):
    store, results = written
    headers = store.inspect.index_headers()
    assert headers and sum(h.index_count - 1 for _, h in headers) == len(results)   # one key each, no UNIQ_KEY
    entries = store.inspect.index_entries(headers[-1][0])
    assert len(entries) >= headers[-1][1].index_count
    assert len(store.inspect.index_slots()) == store.config.max_hash_slot_num
    chain = store.inspect.index_chain(TOPIC, "k5")
    hits = [step.phy_offset for _, steps in chain for step in steps if step.hash_matches]
    assert results[5].wrote_offset in hits
    assert build_key(TOPIC, "k5") == f"{TOPIC}#k5"


def test_dispatch_state_and_recovery(written):
    store, _ = written
    state = store.inspect.dispatch_state()
    assert state["reput_offset"] == state["max_phy_offset"] == store.pointers()["max_phy_offset"]
    assert state["behind_bytes"] == 0
    assert store.inspect.recovery is store.recovery_report


def test_raw_dumps_read_the_files_without_an_open_store(written):
    store, results = written
    config = store.config
    rows = dump_records(config, start_phy_offset=0, limit=5, verify=True)
    assert [row["phyOffset"] for row in rows] == [r.wrote_offset for r in results[:5]]
    assert all(row["valid"] for row in rows)
    units = dump_queue_units(config, TOPIC, 0, limit=3, verify=True)
    assert [u["phyOffset"] for u in units] == [r.wrote_offset for r in results[0:6:2]]
    assert all(u["valid"] for u in units)
    entries = dump_index_entries(config, limit=4)
    assert len(entries) == 4 and all(e["entry"] >= 1 for e in entries)
    with pytest.raises(StoreError, match="no consume queue directory"):
        dump_queue_units(config, "NoSuchTopic", 0)
    with pytest.raises(StoreError, match="no index file"):
        dump_index_entries(config, file_name="nope")


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=fixture_id)
def test_inspector_agrees_with_the_real_store(fixture, tmp_path):
    """On every real RocketMQ store: the consume-queue units are the ones the real store dumped, each
    points at a record of that size and topic, and the segment layouts count the records walked."""
    root = copy_store(fixture, str(tmp_path))
    dump = load_dump(fixture)
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == dump["commitLog"]["maxPhyOffset"]
        for queue in dump["queues"]:
            expected = queue["cq"][:64]
            if not expected:
                continue
            got = []
            while len(got) < len(expected):
                units = store.inspect.queue_units(queue["topic"], queue["queueId"],
                                                  expected[0]["queueOffset"] + len(got),
                                                  len(expected) - len(got))
                assert units is not None and len(units) > 0
                got += [(int(u["phy_offset"]), int(u["size"]), int(u["tags_code"])) for u in units]
            assert got == [(u["commitLogOffset"], u["size"], u["tagsCode"]) for u in expected]
            for phy_offset, size, _ in got[:8]:
                raw = store.inspect.record_bytes(phy_offset)
                assert raw is not None and len(raw) == size
                assert msgcodec.decode_message(raw).topic == queue["topic"]
        counted = sum(store.inspect.segment_layout(s.name).records for s in store.inspect.segments())
        walked = sum(1 for _, r in store.inspect.records(store.pointers()["min_phy_offset"],
                                                         check_crc=False, max_records=10**6)
                     if r.kind == record_check.CHECK_RECORD)
        assert counted >= walked >= dump["totalMessages"] > 0
