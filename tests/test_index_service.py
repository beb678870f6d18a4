"""IndexService: build (spec §5.6), files (§5.7), query (§5.8), load after a crash (§11.1), cleanup
(§12.3), and golden tests against every real RocketMQ fixture."""

from __future__ import annotations

import os
import struct
import time

import pytest

from store.codec import index_codec as ic
from store.errors import CorruptDataError, ReadOnlyStoreError
from store.index.index_service import IndexService, index_file_name
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, tree_fingerprint

try:
    from store.codec.message import DispatchRequest
except ImportError:                                        # pragma: no cover - before message.py
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class DispatchRequest:                                 # type: ignore[no-redef]
        topic: str
        queue_id: int
        commit_log_offset: int
        msg_size: int
        tags_code: int
        store_timestamp: int
        consume_queue_offset: int
        keys: str
        uniq_key: str | None
        sys_flag: int
        prepared_transaction_offset: int
        properties: dict

FOREVER = 2**63 - 1
FIXTURES = fixture_dirs()
CHECKPOINT_INDEX_MSG_TIMESTAMP_POSITION = 16


def request(phy_offset, store_ts, keys="", uniq_key=None, topic="T", sys_flag=0):
    return DispatchRequest(topic, 0, phy_offset, 100, 0, store_ts, 0, keys, uniq_key, sys_flag, 0, {})


class Clock:
    def __init__(self, now_ms=1_700_000_000_000):
        self.now_ms = now_ms

    def __call__(self):
        return self.now_ms


def service(directory, slots=4, entries=5, **kwargs) -> IndexService:
    kwargs.setdefault("clock_ms", Clock())
    index_service = IndexService(directory, slots, entries, **kwargs)
    index_service.load()
    return index_service


# -- unit behaviour ----------------------------------------------------------------------------------

def test_file_name_is_local_time(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert index_file_name(1700000000123) == "20231114221320123"
        assert index_file_name(1700000000007) == "20231114221320007"
    finally:
        monkeypatch.undo()
        time.tzset()
    expected = time.strftime("%Y%m%d%H%M%S", time.localtime(1700000000)) + "123"
    assert index_file_name(1700000000123) == expected


def test_what_is_indexed(tmp_path):
    index_service = service(tmp_path / "index", slots=16, entries=64)
    index_service.build_index([
        request(0, 1000, keys="a  b ", uniq_key="U0"),
        request(100, 2000, keys="a", sys_flag=0x04),        # PREPARED: indexed
        request(200, 3000, keys="a", sys_flag=0x08),        # COMMIT: indexed
        request(300, 4000, keys="a", sys_flag=0x0C),        # ROLLBACK: skipped
        request(400, 5000, keys="", uniq_key=None),         # nothing to index
        request(150, 6000, keys="a"),                       # below endPhyOffset: skipped
    ])
    (only,) = index_service.files
    keys = [(int(e["key_hash"]), int(e["phy_offset"])) for e in only.entries()[1:]]
    hash_of = lambda key: ic.key_hash_and_slot("T#" + key, 16)[0]   # noqa: E731
    assert keys == [(hash_of("U0"), 0), (hash_of("a"), 0), (hash_of("b"), 0),
                    (hash_of("a"), 100), (hash_of("a"), 200)]
    assert index_service.query_offsets("T", "a", 64, 0, FOREVER).phy_offsets == [200, 100, 0]
    assert index_service.query_offsets("T", "U0", 64, 0, FOREVER).phy_offsets == [0]
    assert index_service.query_offsets("Other", "a", 64, 0, FOREVER).phy_offsets == []
    index_service.close()


def test_same_offset_as_end_is_indexed_again(tmp_path):
    """Only offsets *below* endPhyOffset are skipped: re-dispatching the last record re-indexes it."""
    index_service = service(tmp_path / "index", slots=16, entries=64)
    index_service.build_index([request(0, 1000, keys="a"), request(50, 1000, keys="a")])
    index_service.build_index([request(50, 1000, keys="a")])
    assert index_service.query_offsets("T", "a", 64, 0, FOREVER).phy_offsets == [50, 50, 0]
    index_service.close()


def test_rollover_quirk_names_and_callback(tmp_path):
    clock = Clock()
    full_times: list[int] = []
    index_service = service(tmp_path / "index", entries=3, clock_ms=clock,
                            on_file_full=full_times.append)
    # 2 entries per file. A record's keys may straddle two files.
    index_service.build_index([request(0, 10_000, keys="a b c")])
    files = index_service.files
    assert [f.name for f in files] == [index_file_name(clock.now_ms),
                                       index_file_name(clock.now_ms + 1)]   # name taken: +1 ms
    assert full_times == [10_000]
    assert files[1].header() == ic.IndexHeader(10_000, 10_000, 0, 0, 1, 2)
    # The second file is full after one more key; a keyless record then opens the third file,
    # whose header starts from the second file's ends (spec §5.7) with indexCount 0 on disk.
    index_service.build_index([request(500, 12_500, keys="d"), request(900, 14_000)])
    third = index_service.files[2]
    assert third.header() == ic.IndexHeader(12_500, 12_500, 500, 500, 0, 0)
    assert full_times == [10_000, 12_500]
    index_service.build_index([request(950, 15_900, keys="e")])
    entry = third.entries()[1]
    assert int(entry["time_diff_s"]) == 3                   # (15900 - 12500) / 1000, truncated
    assert third.header() == ic.IndexHeader(15_900, 15_900, 950, 950, 1, 2)
    assert index_service.query_offsets("T", "d", 64, 0, FOREVER).phy_offsets == [500]
    index_service.close()


def test_query_max_num_is_capped_and_newest_first(tmp_path):
    index_service = service(tmp_path / "index", slots=8, entries=40)
    index_service.build_index([request(phy, 1000 + phy, keys="k") for phy in range(100)])
    result = index_service.query_offsets("T", "k", 1000, 0, FOREVER)
    assert result.phy_offsets == list(range(99, 35, -1))    # 64 newest, across files
    assert (result.last_update_timestamp, result.last_update_phy_offset) == (1099, 99)
    assert index_service.query_offsets("T", "k", 5, 0, FOREVER).phy_offsets == [99, 98, 97, 96, 95]
    index_service.close()


def test_query_time_window(tmp_path):
    index_service = service(tmp_path / "index", slots=8, entries=4)
    index_service.build_index([request(phy, 1_000_000 + phy * 1000, keys="k") for phy in range(9)])
    window = index_service.query_offsets("T", "k", 64, 1_002_000, 1_005_000).phy_offsets
    assert window == [5, 4, 3, 2]
    assert index_service.query_offsets("T", "k", 64, 2_000_000, FOREVER).phy_offsets == []
    index_service.close()


def test_empty_service_query(tmp_path):
    index_service = service(tmp_path / "missing", read_only=True)
    result = index_service.query_offsets("T", "k", 64, 0, FOREVER)
    assert (result.phy_offsets, result.last_update_timestamp, result.last_update_phy_offset) == (
        [], 0, 0)
    assert not os.path.exists(tmp_path / "missing")


def _three_files(directory) -> list[str]:
    writer = service(directory, entries=3)
    writer.build_index([request(phy * 100, 10_000 + phy * 1000, keys="k") for phy in range(5)])
    names = [f.name for f in writer.files]
    assert len(names) == 3
    writer.flush()
    writer.close()
    return names


def test_load_after_crash_deletes_newer_files(tmp_path):
    names = _three_files(tmp_path / "index")          # end times 11000, 13000, 14000
    index_service = IndexService(tmp_path / "index", 4, 3, clock_ms=Clock())
    index_service.load(False, 13_000)
    assert [f.name for f in index_service.files] == names[:2]
    assert index_service.deleted_on_load == names[2:]
    assert sorted(os.listdir(tmp_path / "index")) == names[:2]
    index_service.close()


def test_read_only_load_after_crash_keeps_files(tmp_path):
    names = _three_files(tmp_path / "index")
    before = tree_fingerprint(str(tmp_path / "index"))
    index_service = IndexService(tmp_path / "index", 4, 3, read_only=True)
    index_service.load(False, 0)
    assert [f.name for f in index_service.files] == names
    assert index_service.stale_files == names
    assert index_service.query_offsets("T", "k", 64, 0, FOREVER).phy_offsets == [400, 300, 200, 100, 0]
    for call in (lambda: index_service.build_index([request(900, 1, keys="x")]),
                 lambda: index_service.delete_expired(10_000)):
        with pytest.raises(ReadOnlyStoreError):
            call()
    index_service.flush()
    index_service.close()
    assert tree_fingerprint(str(tmp_path / "index")) == before


def test_delete_expired_never_the_last(tmp_path):
    directory = tmp_path / "index"
    names = _three_files(directory)                   # end phy offsets 100, 300, 400
    index_service = IndexService(directory, 4, 3, clock_ms=Clock())
    index_service.load()
    assert index_service.delete_expired(100) == 0     # first file's end is not below 100
    assert index_service.delete_expired(301) == 2
    assert [f.name for f in index_service.files] == names[2:]
    assert index_service.delete_expired(10_000) == 0  # the last file stays
    assert sorted(os.listdir(directory)) == names[2:]
    index_service.close()


def test_refresh_follows_a_writer(tmp_path):
    directory = tmp_path / "index"
    writer = service(directory, entries=3)
    writer.build_index([request(0, 1000, keys="k")])
    reader = IndexService(directory, 4, 3, read_only=True)
    reader.load()
    writer.build_index([request(phy * 100, 1000 + phy, keys="k") for phy in range(1, 5)])
    assert reader.query_offsets("T", "k", 64, 0, FOREVER).phy_offsets == [100, 0]
    reader.refresh()
    assert len(reader.files) == 3
    assert reader.query_offsets("T", "k", 64, 0, FOREVER).phy_offsets == [400, 300, 200, 100, 0]
    assert writer.delete_expired(250) == 1
    reader.refresh()
    assert [f.name for f in reader.files] == [f.name for f in writer.files]
    writer.close()
    reader.close()


def test_corrupt_file_names_the_file(tmp_path):
    directory = tmp_path / "index"
    names = _three_files(directory)
    path = directory / names[1]
    with open(path, "r+b") as handle:
        handle.truncate(100)
    index_service = IndexService(directory, 4, 3, read_only=True)
    with pytest.raises(CorruptDataError) as info:
        index_service.load()
    assert info.value.path == str(path)
    assert index_service.files == []


def test_other_files_are_ignored(tmp_path):
    directory = tmp_path / "index"
    _three_files(directory)
    (directory / "notes.txt").write_text("x")
    (directory / "20240101000000000.tmp").write_text("x")
    index_service = IndexService(directory, 4, 3, read_only=True)
    index_service.load()
    assert len(index_service.files) == 3
    index_service.close()


def test_dashboard_helpers(tmp_path):
    directory = tmp_path / "index"
    names = _three_files(directory)
    index_service = IndexService(directory, 4, 3, read_only=True)
    index_service.load()
    headers = index_service.headers()
    assert [name for name, _ in headers] == names
    assert headers[0][1].index_count == 3
    assert index_service.slot_table(names[0]).shape == (4,)
    assert len(index_service.entries()) == index_service.files[-1].index_count
    chains = index_service.walk_chain("T", "k")
    assert [name for name, _ in chains] == names[::-1]
    assert [step.phy_offset for step in chains[-1][1]] == [100, 0]
    index_service.close()


def test_batch_throughput(tmp_path):
    """put_key is on the dispatch hot path: 30,000 keys must take well under a few seconds."""
    index_service = service(tmp_path / "index", slots=5000, entries=20_000)
    batch = [request(phy * 200, 1_000_000 + phy, keys=f"order-{phy} shared",
                     uniq_key=f"{phy:032X}") for phy in range(10_000)]
    started = time.perf_counter()
    index_service.build_index(batch)
    elapsed_s = time.perf_counter() - started
    assert len(index_service.files) == 2
    assert elapsed_s < 5.0
    index_service.close()


# -- golden tests against the real RocketMQ stores ---------------------------------------------------

def fixture_settings(fixture: str) -> tuple[int, int]:
    properties = {}
    with open(os.path.join(fixture, "store.properties"), encoding="utf-8") as handle:
        for line in handle:
            if "=" in line and not line.lstrip().startswith("#"):
                name, value = line.strip().split("=", 1)
                properties[name.strip()] = value.strip()
    return (int(properties.get("maxHashSlotNum", 5_000_000)),
            int(properties.get("maxIndexNum", 20_000_000)))


def fixture_requests(dump: dict) -> list[DispatchRequest]:
    """Every message of the dump as a DispatchRequest, in commit log order."""
    messages = sorted((m for q in dump["queues"] for m in q["messages"]),
                      key=lambda m: m["commitLogOffset"])
    return [DispatchRequest(m["topic"], m["queueId"], m["commitLogOffset"], m["storeSize"], 0,
                            m["storeTimestamp"], m["queueOffset"], m["properties"].get("KEYS", ""),
                            m["properties"].get("UNIQ_KEY"), m["sysFlag"],
                            m["preparedTransactionOffset"], m["properties"])
            for m in messages]


def checkpoint_index_msg_timestamp(store_root: str) -> int:
    with open(os.path.join(store_root, "checkpoint"), "rb") as handle:
        data = handle.read(24)
    return struct.unpack_from(">q", data, CHECKPOINT_INDEX_MSG_TIMESTAMP_POSITION)[0]


@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_golden_queries(fixture, tmp_path):
    """query_offsets reproduces every read-dump query.

    The dump records the broker's answers *after its own recovery*. After a clean shutdown that is
    the index as on disk. After a crash (abort file present) the broker deleted every index file
    newer than the checkpoint's indexMsgTimestamp (§11.1 step 5) and abnormal recovery re-dispatched
    the commit log; buildIndex skipped records below the new file's endPhyOffset (initialised from
    the previous file, §5.7) but re-indexed the record *at* it, so some keys appear twice in the
    dump (e.g. k244 in the crash fixtures). We reproduce exactly that: load(abnormal) + re-dispatch.

    The dump's `hits` come from queryMessage, which sorts the offsets ascending (§10.5), so they are
    compared sorted; the raw order is checked separately (newest first: non-increasing).
    """
    slots, entries = fixture_settings(fixture)
    dump = load_dump(fixture)
    store_root = copy_store(fixture, str(tmp_path))
    last_exit_ok = not os.path.exists(os.path.join(store_root, "abort"))
    index_service = IndexService(os.path.join(store_root, "index"), slots, entries,
                                 clock_ms=Clock(4_000_000_000_000))
    index_service.load(last_exit_ok, checkpoint_index_msg_timestamp(store_root))
    if not last_exit_ok:
        index_service.build_index(fixture_requests(dump))
    assert dump["queries"]
    for query in dump["queries"]:
        result = index_service.query_offsets(query["topic"], query["key"], query["maxNum"], 0, FOREVER)
        where = f"{query['topic']}#{query['key']}"
        assert sorted(result.phy_offsets) == [h["commitLogOffset"] for h in query["hits"]], where
        assert result.phy_offsets == sorted(result.phy_offsets, reverse=True), where
        assert result.last_update_timestamp == query["indexLastUpdateTimestamp"], where
        assert result.last_update_phy_offset == query["indexLastUpdatePhyoffset"], where
    index_service.close()


@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_golden_queries_read_only_on_the_original(fixture):
    """Read-only, on the fixture itself: nothing changes, and the answers match the broker's.

    After a crash a read-only reader keeps the files the broker would delete (`stale_files`), so it
    lacks only the duplicates the broker's re-dispatch added: the *set* of hits is the same whenever
    the broker's answer was not cut at maxNum.
    """
    slots, entries = fixture_settings(fixture)
    dump = load_dump(fixture)
    store_root = os.path.join(fixture, "store")
    index_dir = os.path.join(store_root, "index")
    last_exit_ok = not os.path.exists(os.path.join(store_root, "abort"))
    index_msg_timestamp = checkpoint_index_msg_timestamp(store_root)
    before = tree_fingerprint(index_dir)
    index_service = IndexService(index_dir, slots, entries, read_only=True)
    index_service.load(last_exit_ok, index_msg_timestamp)
    assert [f.name for f in index_service.files] == sorted(os.listdir(index_dir))
    expected_stale = [] if last_exit_ok else [
        f.name for f in index_service.files if f.end_timestamp > index_msg_timestamp]
    assert index_service.stale_files == expected_stale
    for query in dump["queries"]:
        result = index_service.query_offsets(query["topic"], query["key"], query["maxNum"],
                                             0, FOREVER)
        hits = [h["commitLogOffset"] for h in query["hits"]]
        if last_exit_ok:
            assert sorted(result.phy_offsets) == hits
        elif len(hits) < query["maxNum"]:
            assert set(result.phy_offsets) == set(hits)
    index_service.close()
    assert tree_fingerprint(index_dir) == before


@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_golden_rebuild_is_byte_identical(fixture, tmp_path):
    """Dispatching the fixture's messages into an empty index gives the fixture's files byte for byte.

    This holds for the crash fixtures too: their index files on disk are the pre-crash ones, written
    by ordinary dispatch (the broker was halted, the page cache still reached the disk). Only names
    differ (they are creation times).
    """
    slots, entries = fixture_settings(fixture)
    requests = fixture_requests(load_dump(fixture))
    fixture_index = os.path.join(fixture, "store", "index")
    originals = sorted(os.listdir(fixture_index))
    full_times: list[int] = []
    index_service = IndexService(tmp_path / "index", slots, entries,
                                 clock_ms=Clock(1_700_000_000_000), on_file_full=full_times.append)
    index_service.load()
    index_service.build_index(requests)
    rebuilt = index_service.files
    assert len(rebuilt) == len(originals)
    for original_name, index_file in zip(originals, rebuilt):
        with open(os.path.join(fixture_index, original_name), "rb") as handle:
            original = handle.read()
        assert index_file.read_bytes() == original, f"{original_name} differs"
    assert full_times == [f.end_timestamp for f in rebuilt[:-1]]
    index_service.close()


@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_golden_rebuild_in_batches(fixture, tmp_path):
    """Batch boundaries do not change the bytes (dispatch hands over varying batch sizes)."""
    slots, entries = fixture_settings(fixture)
    requests = fixture_requests(load_dump(fixture))
    one = IndexService(tmp_path / "one", slots, entries, clock_ms=Clock())
    one.load()
    one.build_index(requests)
    many = IndexService(tmp_path / "many", slots, entries, clock_ms=Clock())
    many.load()
    for start in range(0, len(requests), 7):
        many.build_index(requests[start:start + 7])
    assert [f.read_bytes() for f in one.files] == [f.read_bytes() for f in many.files]
    one.close()
    many.close()


def test_lock_and_live_files_are_the_service_own_objects(tmp_path):
    # Properties over attrgetter (a key query reads both): the lock, the current list (not a copy),
    # neither assignable.
    index_service = service(str(tmp_path / "index"))
    assert index_service.lock is index_service._lock
    assert index_service.live_files is index_service._files
    index_service.build_index([request(100, 1_700_000_000_000, keys="a")])
    assert index_service.live_files is index_service._files and len(index_service.live_files) == 1
    for name in ("lock", "live_files"):
        with pytest.raises(AttributeError):
            setattr(index_service, name, None)
    index_service.close()
    assert index_service.live_files == []
