"""Consume-queue behaviour, every test run against BOTH backends (file and RocksDB) unless its name says
it is about one backend's own format. Files are 5 units (100 bytes) so rolling is easy to reach."""

from __future__ import annotations

import os
import random

import pytest

from store.codec.message import DispatchRequest
from store.consumequeue.base import STORE_TYPE_FILE, STORE_TYPE_ROCKSDB, ConsumeQueueSettings
from store.consumequeue.factory import open_consume_queue_store
from store.errors import ReadOnlyStoreError
from tests.fixtures_util import tree_fingerprint

UNITS_PER_FILE = 5
FILE_SIZE = UNITS_PER_FILE * 20
BACKENDS = [STORE_TYPE_FILE, STORE_TYPE_ROCKSDB]


def request(topic, queue_id, queue_offset, phy_offset, size=100, tags=0, store_time=None):
    return DispatchRequest(topic=topic, queue_id=queue_id, commit_log_offset=phy_offset,
                           msg_size=size, tags_code=tags,
                           store_timestamp=store_time if store_time is not None else 1000 + phy_offset,
                           consume_queue_offset=queue_offset, keys="", uniq_key=None, sys_flag=0,
                           prepared_transaction_offset=0, properties={})


def open_store(root, backend, *, read_only=False, style="5.x", file_size=FILE_SIZE):
    cq_store = open_consume_queue_store(ConsumeQueueSettings(
        root_dir=str(root), file_size_bytes=file_size, store_type=backend, read_only=read_only,
        style=style))
    cq_store.load()
    cq_store.recover()
    return cq_store


def stream(topic="T", queue_id=0, count=12, start_phy=0, start_offset=0, size=100):
    return [request(topic, queue_id, start_offset + i, start_phy + i * size, size, tags=i)
            for i in range(count)]


def store_time_of_requests(requests):
    times = {r.commit_log_offset: r.store_timestamp for r in requests}
    return lambda phy_offset, size: times.get(phy_offset, -1)


def all_units(cq_store, topic, queue_id):
    out, offset = [], cq_store.get_min_offset(topic, queue_id)
    while offset < cq_store.get_max_offset(topic, queue_id):
        units = cq_store.get_units(topic, queue_id, offset, 1000)
        assert units is not None and len(units)
        out += [(offset + i, int(u["phy_offset"]), int(u["size"]), int(u["tags_code"]))
                for i, u in enumerate(units)]
        offset += len(units)
    return out


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def cq(tmp_path, backend):
    cq_store = open_store(tmp_path, backend)
    yield cq_store
    cq_store.close()


def test_empty_store(cq):
    assert cq.queues() == [] and cq.recover() == -1
    assert (cq.get_min_offset("T", 0), cq.get_max_offset("T", 0), cq.get_max_phy_end("T", 0)) == \
        (0, 0, -1)
    assert cq.get_unit("T", 0, 0) is None and cq.get_units("T", 0, 0, 10) is None
    assert cq.get_offset_in_queue_by_time("T", 0, 5, "lower", lambda p, s: 0) == 0


def test_put_and_read(cq, backend):
    cq.put_units(stream(count=12) + stream("U", 3, count=2, start_phy=5000))
    assert sorted(cq.queues()) == [("T", 0), ("U", 3)]
    assert (cq.get_min_offset("T", 0), cq.get_max_offset("T", 0)) == (0, 12)
    assert cq.get_max_phy_end("T", 0) == 1200 and cq.get_max_phy_end("U", 3) == 5200
    unit = cq.get_unit("T", 0, 7)
    assert (unit.phy_offset, unit.size, unit.tags_code) == (700, 100, 7)
    assert cq.get_unit("T", 0, 12) is None
    units = cq.get_units("T", 0, 3, 100)
    # Spec §10.1: a pull never crosses a CQ file; RocksDB has no files.
    assert len(units) == (2 if backend == STORE_TYPE_FILE else 9)
    assert units["phy_offset"].tolist()[:2] == [300, 400]
    assert len(cq.get_units("T", 0, 0, 3)) == 3
    assert [u[1] for u in all_units(cq, "T", 0)] == [i * 100 for i in range(12)]


def test_duplicates_and_already_built_are_ignored(cq):
    cq.put_units(stream(count=6))
    cq.put_units(stream(count=6))                       # same units again: phy end <= max
    cq.put_units([request("T", 0, 3, 10_000)])          # queue offset already built
    assert cq.get_max_offset("T", 0) == 6 and cq.get_max_phy_end("T", 0) == 600
    cq.put_units([request("T", 0, 6, 600)])
    assert cq.get_max_offset("T", 0) == 7


def test_queue_starting_past_zero_is_prefilled(cq, backend, tmp_path):
    cq.put_units([request("T", 0, 7, 0), request("T", 0, 8, 100)])
    assert (cq.get_min_offset("T", 0), cq.get_max_offset("T", 0)) == (7, 9)
    assert cq.get_unit("T", 0, 6) is None and cq.get_unit("T", 0, 7).phy_offset == 0
    if backend == STORE_TYPE_FILE:
        path = tmp_path / "consumequeue" / "T" / "0" / f"{100:020d}"
        data = path.read_bytes()
        assert data[:40] == bytes.fromhex("0000000000000000" "7fffffff" "0000000000000000") * 2
        assert os.listdir(path.parent) == [path.name]


def test_recover_after_reopen(tmp_path, backend):
    cq_store = open_store(tmp_path, backend)
    cq_store.put_units(stream(count=13) + stream("U", 1, count=3, start_phy=9000))
    cq_store.flush()
    cq_store.close()
    again = open_store(tmp_path, backend)
    try:
        assert again.recover() == 9300
        assert sorted(again.queues()) == [("T", 0), ("U", 1)]
        assert again.get_max_offset("T", 0) == 13 and again.get_max_phy_end("T", 0) == 1300
        assert [u[1] for u in all_units(again, "T", 0)] == [i * 100 for i in range(13)]
        again.put_units([request("T", 0, 13, 1300)])
        assert again.get_max_offset("T", 0) == 14
    finally:
        again.close()


def test_truncate_dirty(cq):
    cq.put_units(stream(count=12) + stream("U", 0, count=2, start_phy=100_000))
    cq.truncate_dirty(800)                               # cuts T after unit 7 (700..800)
    assert cq.get_max_offset("T", 0) == 8 and cq.get_max_phy_end("T", 0) == 800
    assert cq.get_unit("T", 0, 8) is None
    assert cq.get_max_offset("U", 0) == 0
    cq.put_units([request("T", 0, 8, 800, size=50)])
    assert cq.get_unit("T", 0, 8).phy_offset == 800 and cq.get_max_offset("T", 0) == 9


@pytest.mark.parametrize("style", ["4.9", "5.x"])
def test_delete_expired_and_min_offset(tmp_path, backend, style):
    cq_store = open_store(tmp_path, backend, style=style)
    cq_store.put_units(stream(count=12))
    deleted = cq_store.delete_expired(650)               # units 0..6 are below the log's min
    assert cq_store.get_min_offset("T", 0) == 7
    assert cq_store.get_unit("T", 0, 6) is None and cq_store.get_unit("T", 0, 7).phy_offset == 700
    if backend == STORE_TYPE_FILE:
        assert deleted == 1 and len(os.listdir(tmp_path / "consumequeue" / "T" / "0")) == 2
    cq_store.delete_expired(5000)                        # everything expired, never the last file
    # 4.9.7 scans only the first remaining file; finding nothing there it keeps the old value.
    expected_min = 12 if (style == "5.x" or backend == STORE_TYPE_ROCKSDB) else 7
    assert cq_store.get_min_offset("T", 0) == expected_min
    assert cq_store.get_max_offset("T", 0) == 12
    cq_store.close()


def test_get_units_none_when_file_gone(tmp_path):
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.put_units(stream(count=12))
    cq_store.delete_expired(650)
    cq_store.correct_min_offset(0)  # a min offset that points into the deleted file
    assert cq_store.get_units("T", 0, 2, 10) is None
    cq_store.close()


def test_time_lookup_boundaries(cq):
    times = [10, 10, 20, 20, 20, 30, 40, 40, 50, 60, 60, 70]
    requests = [request("T", 0, i, i * 100, store_time=t) for i, t in enumerate(times)]
    cq.put_units(requests)
    store_time_of = store_time_of_requests(requests)
    for timestamp in range(0, 80, 5):
        lower = next((i for i, t in enumerate(times) if t >= timestamp), len(times))
        upper = max((i for i, t in enumerate(times) if t <= timestamp), default=0)
        assert cq.get_offset_in_queue_by_time("T", 0, timestamp, "lower", store_time_of) == lower
        assert cq.get_offset_in_queue_by_time("T", 0, timestamp, "upper", store_time_of) == upper
    with pytest.raises(ValueError):
        cq.get_offset_in_queue_by_time("T", 0, 5, "middle", store_time_of)


def test_nearest_single_file(tmp_path, backend):
    cq_store = open_store(tmp_path, backend, file_size=2000)
    times = [10, 20, 20, 40, 80]
    requests = [request("T", 0, i, i * 100, store_time=t) for i, t in enumerate(times)]
    cq_store.put_units(requests)
    store_time_of = store_time_of_requests(requests)
    for timestamp, expected in [(0, 0), (10, 0), (14, 0), (15, 0), (16, 1), (20, 1), (30, 2),
                                (31, 3), (60, 3), (61, 4), (99, 4)]:
        got = cq_store.get_offset_in_queue_by_time("T", 0, timestamp, "nearest", store_time_of)
        assert (timestamp, got) == (timestamp, expected) or \
            (timestamp == 20 and got in (1, 2)) or (timestamp == 30 and got == 3)
    cq_store.close()


def test_file_nearest_picks_file_by_mtime(tmp_path):
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    requests = [request("T", 0, i, i * 100, store_time=1_000_000 + i * 1000) for i in range(10)]
    cq_store.put_units(requests)
    directory = tmp_path / "consumequeue" / "T" / "0"
    os.utime(directory / f"{0:020d}", (1_000, 1_004.5))       # mtime ms = 1_004_500
    os.utime(directory / f"{100:020d}", (2_000, 2_000))
    store_time_of = store_time_of_requests(requests)
    assert cq_store.get_offset_in_queue_by_time("T", 0, 1_002_000, "nearest", store_time_of) == 2
    assert cq_store.get_offset_in_queue_by_time("T", 0, 1_005_000, "nearest", store_time_of) == 5
    os.utime(directory / f"{0:020d}", (1, 1))                 # old mtime: the last file is chosen
    assert cq_store.get_offset_in_queue_by_time("T", 0, 1_002_000, "nearest", store_time_of) == 5
    cq_store.close()


def test_read_only_writes_nothing_and_refresh_follows_writer(tmp_path, backend):
    writer = open_store(tmp_path, backend)
    writer.put_units(stream(count=3))
    writer.flush()
    fingerprint = tree_fingerprint(str(tmp_path))
    reader = open_store(tmp_path, backend, read_only=True)
    try:
        assert reader.get_max_offset("T", 0) == 3
        with pytest.raises(ReadOnlyStoreError):
            reader.put_units(stream(count=4))
        reader.truncate_dirty(150)
        reader.delete_expired(100)
        assert reader.get_max_offset("T", 0) == 2
        if backend == STORE_TYPE_FILE:
            assert tree_fingerprint(str(tmp_path)) == fingerprint
        writer.put_units([request("T", 0, i, i * 100) for i in range(3, 8)] + stream("V", 2, count=1))
        writer.flush()
        reader.refresh()
        assert reader.get_max_offset("T", 0) == 8 and ("V", 2) in reader.queues()
        assert reader.get_unit("T", 0, 7).phy_offset == 700
    finally:
        reader.close()
        writer.close()


def test_rocksdb_read_only_uses_a_shadow(tmp_path):
    writer = open_store(tmp_path, STORE_TYPE_ROCKSDB)
    writer.put_units(stream(count=3))
    writer.close()
    os.remove(tmp_path / "consumequeue" / "rocksdict-config.json")  # as in a RocketMQ-written DB
    fingerprint = tree_fingerprint(str(tmp_path))
    reader = open_store(tmp_path, STORE_TYPE_ROCKSDB, read_only=True)
    assert reader.get_max_offset("T", 0) == 3 and reader.recover() == 300
    reader.close()
    assert tree_fingerprint(str(tmp_path)) == fingerprint


def test_rocksdb_layout_on_disk(tmp_path):
    from rocksdict import AccessType, Options, Rdict

    from store.codec import rocksdb_cq as rc
    cq_store = open_store(tmp_path, STORE_TYPE_ROCKSDB)
    cq_store.put_units([request("TopicTest", 1, 0, 0, 177, 2598919, 1700000000123)])
    cq_store.get_min_offset("TopicTest", 1)                      # writes the min entry lazily
    cq_store.close()
    path = str(tmp_path / "consumequeue")
    db = Rdict(path, Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)},
               access_type=AccessType.read_only())
    offsets = db.get_column_family("offset")
    assert db[rc.cq_key("TopicTest", 1, 0)].hex() == \
        "0000000000000000000000b1000000000027a8070000018bcfe5687b"
    assert offsets[rc.offset_key("TopicTest", 1, "max")] == bytes(16)
    assert offsets[rc.offset_key("TopicTest", 1, "min")] == bytes(16)
    assert offsets[rc.checkpoint_key()].hex() == "00000000000000b1"
    db.close()


def _offset_entries(path):
    from rocksdict import AccessType, Options, Rdict
    db = Rdict(path, Options(raw_mode=True), column_families={"offset": Options(raw_mode=True)},
               access_type=AccessType.read_only())
    offsets = db.get_column_family("offset")
    entries = dict(offsets.items())
    offsets.close()
    db.close()
    return entries


def test_rocksdb_new_queue_min_entries_are_written_by_a_full_flush(tmp_path):
    """As RocketMQ, creating a queue writes its `max` entry, not its `min` one; here the `min`
    entries of the new queues are written together by a full flush (shutdown), not one write each
    when first asked for. A queue starting past 0, or refilled after a truncation to nothing, gets
    its `min` entry with its units."""
    from store.codec import rocksdb_cq as rc
    path = str(tmp_path / "consumequeue")
    cq_store = open_store(tmp_path, STORE_TYPE_ROCKSDB)
    cq_store.put_units(stream("A", 0, count=2) +
                       stream("B", 3, count=2, start_phy=1000, start_offset=7))
    assert (cq_store.get_min_offset("A", 0), cq_store.get_min_offset("B", 3)) == (0, 7)
    assert cq_store._offsets.get(rc.offset_key("A", 0, "min")) is None       # not at creation
    assert cq_store._offsets[rc.offset_key("B", 3, "min")] == rc.offset_value(1000, 7)
    cq_store.flush()
    assert cq_store._offsets[rc.offset_key("A", 0, "min")] == rc.offset_value(0, 0)
    cq_store.put_units(stream("C", 1, count=1, start_phy=2000) +
                       stream("D", 2, count=3, start_phy=3000))
    cq_store.delete_expired(3100)                            # C's only unit and D's first expired
    assert (cq_store.get_min_offset("C", 1), cq_store.get_min_offset("D", 2)) == (1, 1)
    cq_store.truncate_dirty(1000)                            # B emptied; A kept
    cq_store.put_units([request("B", 3, 0, 1000)])           # refilled from 0: min written at once
    assert cq_store._offsets[rc.offset_key("B", 3, "min")] == rc.offset_value(1000, 0)
    cq_store.put_units(stream("E", 0, count=1, start_phy=9000))
    cq_store.close()                                         # writes E's min
    entries = _offset_entries(path)
    assert entries[rc.offset_key("E", 0, "min")] == rc.offset_value(9000, 0)
    assert entries[rc.offset_key("C", 1, "min")] == rc.offset_value(3100, 1)
    assert entries[rc.offset_key("D", 2, "min")] == rc.offset_value(3100, 1)
    cq_store = open_store(tmp_path, STORE_TYPE_ROCKSDB)
    # (A expired with the commit log's min at 3100: its corrected entry was written then)
    assert [cq_store.get_min_offset(*queue) for queue in (("A", 0), ("B", 3), ("E", 0))] == [2, 0, 0]
    cq_store.close()


def test_rocksdb_queue_keys_match_the_key_layout():
    from store.codec import rocksdb_cq as rc
    for topic, queue_id in (("T", 0), ("%RETRY%g", 7), ("t\u00e9", 2**31 - 1)):
        assert rc.queue_keys(topic, queue_id) == (rc.cq_key_prefix(topic, queue_id),
                                                  rc.offset_key(topic, queue_id, "max"))


def test_rocksdb_multi_get_and_iterator_agree(tmp_path, monkeypatch):
    import store.consumequeue.rocksdb.queue_store as module
    cq_store = open_store(tmp_path, STORE_TYPE_ROCKSDB)
    cq_store.put_units(stream(count=100))
    via_multi_get = cq_store.get_units("T", 0, 5, 60)
    monkeypatch.setattr(module, "MULTI_GET_MAX_UNITS", 0)
    via_iterator = cq_store.get_units("T", 0, 5, 60)
    assert via_multi_get.tobytes() == via_iterator.tobytes() and len(via_iterator) == 60
    cq_store.close()


def test_file_skips_non_integer_queue_dirs(tmp_path):
    (tmp_path / "consumequeue" / "T" / "notanumber").mkdir(parents=True)
    (tmp_path / "consumequeue" / "T" / "2").mkdir(parents=True)
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    assert cq_store.queues() == [("T", 2)] and cq_store.get_max_offset("T", 2) == 0
    cq_store.close()


def test_file_many_queues_do_not_hold_descriptors(tmp_path):
    """Each mapping holds a descriptor in Python 3.11: only the most recently used queues stay mapped."""
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.max_mapped_queues = 100
    before = len(os.listdir("/proc/self/fd"))
    for round_number in range(2):
        cq_store.put_units([request(f"T{i % 50}", i // 50, round_number, round_number * 10**6 + i * 100)
                            for i in range(2000)])
    assert len(os.listdir("/proc/self/fd")) - before <= 100 + 5
    assert len(cq_store.queues()) == 2000
    assert cq_store.get_unit("T7", 3, 1).phy_offset == 10**6 + (3 * 50 + 7) * 100
    cq_store.close()
    reopened = open_store(tmp_path, STORE_TYPE_FILE)
    reopened.max_mapped_queues = 100
    assert reopened.get_max_offset("T0", 0) == 2 and reopened.get_unit("T0", 0, 1) is not None
    reopened.close()


def _random_stream(seed):
    """Batches of dense per-queue units, with re-dispatches, truncations of the newest records (a
    commit-log cut always falls on a record boundary) and expiries."""
    rng = random.Random(seed)
    queues = [("A", 0), ("A", 1), ("B", 0)]
    live = []                         # every unit dispatched and not cut, in dispatch order
    phy, events, time_ms = 0, [], 1000
    for _ in range(rng.randint(30, 80)):
        next_offsets = {q: 0 for q in queues}
        for r in live:
            next_offsets[(r.topic, r.queue_id)] = r.consume_queue_offset + 1
        batch = []
        for _ in range(rng.randint(1, 6)):
            topic, queue_id = rng.choice(queues)
            size = rng.randint(50, 150)
            time_ms += rng.choice([0, 0, 1, 5])
            batch.append(request(topic, queue_id, next_offsets[(topic, queue_id)], phy, size,
                                 rng.randint(-5, 5), time_ms))
            next_offsets[(topic, queue_id)] += 1
            phy += size
        live += batch
        if rng.random() < 0.2:
            batch = batch + batch[: rng.randint(1, len(batch))]   # re-dispatch
        events.append(("put", batch))
        roll = rng.random()
        if roll < 0.1:
            cut = rng.choice(batch).commit_log_offset
            events.append(("truncate", cut))
            live = [r for r in live if r.commit_log_offset < cut]
            phy = cut
        elif roll < 0.2:
            events.append(("expire", rng.randint(0, phy // 2)))
    return events


@pytest.mark.parametrize("seed", range(12))
def test_backends_give_the_same_answers(tmp_path, seed):
    stores = [open_store(tmp_path / b, b) for b in BACKENDS]
    stores[0].max_mapped_queues = 1 + seed % 3   # also exercises unmapping and re-mapping queues
    seen = []
    min_offset = 0
    try:
        for kind, value in _random_stream(seed):
            for cq_store in stores:
                if kind == "put":
                    cq_store.put_units(value)
                elif kind == "truncate":
                    cq_store.truncate_dirty(value)
                else:
                    cq_store.delete_expired(max(min_offset, value))
            if kind == "put":
                seen += value
            elif kind == "expire":
                min_offset = max(min_offset, value)
        store_time_of = store_time_of_requests(seen)
        answers = []
        for cq_store in stores:
            answer = {}
            for topic, queue_id in sorted(cq_store.queues()):
                key = (topic, queue_id)
                answer[key] = (cq_store.get_min_offset(*key), cq_store.get_max_offset(*key),
                               cq_store.get_max_phy_end(*key), all_units(cq_store, *key),
                               [cq_store.get_offset_in_queue_by_time(*key, t, b, store_time_of)
                                for t in range(990, seen[-1].store_timestamp + 10, 7)
                                for b in ("lower", "upper")])
            answers.append({k: v for k, v in answer.items() if v[1] > 0})
        assert answers[0] == answers[1]
    finally:
        for cq_store in stores:
            cq_store.close()


def test_file_unmapped_queues_keep_state_and_flush(tmp_path):
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.max_mapped_queues = 1
    cq_store.put_units(stream("A", count=7))
    cq_store.put_units(stream("B", count=3, start_phy=10_000))     # unmaps A
    assert not cq_store.queue("A", 0).is_mapped
    assert cq_store.get_max_offset("A", 0) == 7                   # answered without mapping A
    assert not cq_store.queue("A", 0).is_mapped
    assert cq_store.queue("A", 0).unflushed_bytes() == 140
    cq_store.flush(0)                                              # fdatasync, still unmapped
    assert cq_store.queue("A", 0).unflushed_bytes() == 0 and not cq_store.queue("A", 0).is_mapped
    cq_store.put_units([request("A", 0, 7, 700)])                 # maps A again, appends
    assert all_units(cq_store, "A", 0)[-1] == (7, 700, 100, 0)
    cq_store.close()
    reader = open_store(tmp_path, STORE_TYPE_FILE, read_only=True)
    reader.max_mapped_queues = 1
    reader.truncate_dirty(300)                                     # in memory only
    assert reader.get_max_offset("A", 0) == 3
    reader.get_unit("B", 0, 0)                                     # unmaps A
    assert reader.get_max_offset("A", 0) == 3 and reader.get_unit("A", 0, 5) is None
    assert len(all_units(reader, "A", 0)) == 3
    reader.close()


def test_rocksdb_shadow_retries_a_copy_taken_during_a_flush(tmp_path, monkeypatch):
    """A flush between the shadow's listing and its MANIFEST copy leaves the copy naming an SST file
    it does not have (RocksDB: Corruption ... No such file): the snapshot is taken again."""
    from store.consumequeue.rocksdb import db as rocksdb_db
    writer = open_store(tmp_path, STORE_TYPE_ROCKSDB)
    writer.put_units(stream(count=3))
    writer.close()                          # flushed: the units are in an SST file
    path = str(tmp_path / "consumequeue")
    assert any(name.endswith(".sst") for name in os.listdir(path))
    fill, calls = rocksdb_db._fill_shadow, []

    def fill_missing_an_sst_once(source, shadow):
        fill(source, shadow)
        calls.append(shadow)
        if len(calls) == 1:
            for name in os.listdir(shadow):
                if name.endswith(".sst"):
                    os.remove(os.path.join(shadow, name))

    monkeypatch.setattr(rocksdb_db, "_fill_shadow", fill_missing_an_sst_once)
    database, shadow = rocksdb_db.open_read_only_shadow(path)
    try:
        assert len(calls) == 2 and not os.path.exists(calls[0])
        assert sum(1 for _ in database.keys()) == 3
    finally:
        database.close()
        rocksdb_db.remove_shadow(shadow)
