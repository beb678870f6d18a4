"""The fast lookup paths give the same answers as the plain ones they replace.

* `search_nearest_units` / `search_boundary_units` (inlined file-CQ searches, with and without the
  store-time memo) against the generic `search_nearest` / `search_boundary`, on random and adversarial
  units: equal times, non-monotonic times, units below the min offset, unreadable store times;
* `query_key_hash` (compiled and pure-Python) against `index_key_hash`;
* `LookupsMixin._read_record` / `_store_time_reader` against `CommitLog.read_record` /
  `store_timestamp_at` at every kind of offset;
* `query_message` against the straightforward implementation (hash collisions included) and time
  lookups of a writable store (which remembers store times) against a read-only open (which does not).

No timing asserts: speed is measured by `python -m bench.lookups`.
"""

from __future__ import annotations

import random
import struct

import pytest

from store import Message, MessageStore
from store.codec.javahash import index_key_hash, java_string_hash
from store.codec.message import decode_message
from store.consumequeue.time_search import (
    LOWER,
    MEMO_DEPTH,
    UPPER,
    search_boundary,
    search_boundary_units,
    search_nearest,
    search_nearest_units,
)
from store.index.index_query import query_key_hash
from store.kernel import lookup as lookup_kernel
from store.lookups import FOREVER_MS
from tests.engine_util import FakeClock, small_config

UNIT = struct.Struct(">qiq")


# -- searches over CQ units --------------------------------------------------------------------------

def _units(rng: random.Random, count: int, kind: str):
    """(buffer of CQ units, store time per phy offset, min phy offset)."""
    phys = [1000 + 50 * i for i in range(count)]
    if kind == "monotonic":
        times = sorted(rng.randrange(1000, 1000 + 3 * count) for _ in range(count))
    elif kind == "plateaus":       # long runs of equal times
        times = sorted(rng.choice((1000, 1005, 1010, 1015)) for _ in range(count))
    elif kind == "noisy":          # non-monotonic
        times = [1000 + 2 * i + rng.randrange(-20, 21) for i in range(count)]
    else:                          # "broken": some store times unreadable
        times = [1000 + i if rng.random() > 0.05 else -1 for i in range(count)]
    buffer = b"".join(UNIT.pack(p, 100, 0) for p in phys)
    by_phy = dict(zip(phys, times))
    min_phy = rng.choice((0, 0, phys[rng.randrange(count)]))
    return buffer, by_phy, min_phy


def _plain(buffer, by_phy, calls):
    def phy_at(i):
        return UNIT.unpack_from(buffer, 20 * i)[0]

    def time_at(i):
        phy = UNIT.unpack_from(buffer, 20 * i)[0]
        calls.append(phy)
        return by_phy[phy]
    return phy_at, time_at


def _fast(by_phy, memo=None, floor=0):
    def store_time_of(phy, size):
        assert size == 100
        return by_phy[phy]
    if memo is not None:
        store_time_of.memo = memo
        store_time_of.floor = floor
    return store_time_of


@pytest.mark.parametrize("kind", ["monotonic", "plateaus", "noisy", "broken"])
def test_unit_searches_match_the_generic_ones(kind):
    rng = random.Random(sum(map(ord, kind)))
    for _case in range(150):
        count = rng.choice((1, 2, 3, 7, 64, 500, 5000))
        buffer, by_phy, min_phy = _units(rng, count, kind)
        memo: dict[int, int] = {}
        floor = rng.choice((0, 0, 1000 + 50 * rng.randrange(count)))
        targets = [min(by_phy.values()) - 1, max(by_phy.values()) + 1] + \
            [rng.choice(list(by_phy.values())) + rng.randrange(-2, 3) for _ in range(12)]
        for ts in targets:
            low = rng.randrange(count) if rng.random() < 0.2 else 0
            high = count - 1
            calls: list[int] = []
            phy_at, time_at = _plain(buffer, by_phy, calls)
            want = search_nearest(phy_at, time_at, low, high, ts, min_phy)
            for fast in (_fast(by_phy), _fast(by_phy, memo, floor)):
                assert search_nearest_units(buffer, fast, low, high, ts, min_phy) == want
            for boundary in (LOWER, UPPER):
                base = rng.randrange(0, 10_000)
                want = search_boundary(phy_at, time_at, low, high, ts, min_phy, boundary, base, base)
                for fast in (_fast(by_phy), _fast(by_phy, memo, floor)):
                    assert search_boundary_units(buffer, fast, low, high, ts, min_phy, boundary,
                                                 base, base) == want
        # the memo holds only what was read, from the first probes, at or above its floor
        assert all(by_phy[phy] == t and phy >= floor and t >= 0 for phy, t in memo.items())


def test_memo_is_used_for_the_first_probes_only():
    count = 1 << 14
    phys = [1000 + 50 * i for i in range(count)]
    by_phy = {p: 2 * i for i, p in enumerate(phys)}      # strictly increasing, even
    buffer = b"".join(UNIT.pack(p, 100, 0) for p in phys)
    memo: dict[int, int] = {}
    read: list[int] = []

    def store_time_of(phy, size):
        read.append(phy)
        return by_phy[phy]
    store_time_of.memo = memo
    store_time_of.floor = 0
    answer = search_nearest_units(buffer, store_time_of, 0, count - 1, 2 * 777 + 1, 0)
    first = len(read)
    assert answer in (777, 778) and first > MEMO_DEPTH and len(memo) == MEMO_DEPTH
    read.clear()
    assert search_nearest_units(buffer, store_time_of, 0, count - 1, 2 * 777 + 1, 0) == answer
    assert len(read) == first - MEMO_DEPTH


# -- key hash ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("compiled", [True, False])
def test_query_key_hash_is_index_key_hash(monkeypatch, compiled):
    from store.index import index_query
    if not compiled:
        monkeypatch.setattr(index_query, "_native_hashes", None)
    elif index_query._native_hashes is None:
        pytest.skip("the compiled kernel is not built")
    assert java_string_hash("polygenelubricants") == -(2 ** 31)
    rng = random.Random(7)
    samples = ["", "a", "T#", "T#polygenelubricants"[2:], "polygenelubricants", "x" * 5000,
               "TopicA#ü€𝄞", "Topic#\x00\x7f"] + \
        ["".join(chr(rng.randrange(0, 128)) for _ in range(rng.randrange(0, 60)))
         for _ in range(3000)]
    for text in samples:
        for prefix_length in {0, 1, len(text) // 2, len(text)}:
            assert query_key_hash(text, prefix_length) == index_key_hash(text), (text, prefix_length)


# -- records and store times -------------------------------------------------------------------------

def _filled_store(tmp_path, count=300, **overrides):
    store = MessageStore.open(small_config(tmp_path / "s", **overrides),
                              clock_ms=FakeClock(step_ms=7))
    for n in range(count):
        # two keys that collide in Java's hash ("Aa" / "BB"), and a body size that varies
        keys = ["Aa" if n % 2 else "BB", f"k{n}"]
        result = store.put_message(Message("T", b"x" * (n % 13), queue_id=n % 3, tags="t",
                                           keys=keys))
        assert result.ok
    while store.dispatch_behind_bytes() > 0:
        store.dispatch_pending()
    return store


def test_read_record_and_store_times_match_the_commit_log(tmp_path):
    with _filled_store(tmp_path) as store:
        log = store.commit_log
        end = log.max_offset()
        record_starts = []
        offset = log.min_offset()
        while offset < end:
            raw = log.read_record(offset)
            if raw is None:      # a blank at the end of a segment
                offset = log.next_file_start(offset)
                continue
            record_starts.append(offset)
            offset += len(raw)
        assert len(record_starts) == 300
        reader = store._store_time_reader()
        probes = set(record_starts) | {-1, 0, 1, 7, end, end - 1, end + 100, 10 ** 12}
        probes |= {o + d for o in record_starts[::17] for d in (1, 3, 40)}
        probes |= {f.file_from_offset + f.file_size_bytes - d for f in log.mapped_files.files
                   for d in (1, 8, 40, 60)}
        for offset in sorted(probes):
            assert store._read_record(offset) == log.read_record(offset), offset
            want = -1 if offset < log.min_offset() else log.store_timestamp_at(offset, 0)
            assert reader(offset, 0) == want, offset
            assert store._store_time_of(offset, 0) == want, offset


def _query_message_plain(store, topic, key, max_num=32, begin_ms=0, end_ms=FOREVER_MS):
    """query_message as it was written before the fast paths (the reference)."""
    max_num = max(1, min(max_num, store.config.max_msgs_num_batch))
    hits = []
    last_ts = last_phy = 0
    round_end = end_ms
    for _round in range(3):
        offsets = store.index_service.query_offsets(topic, key, max_num, begin_ms, round_end)
        last_ts, last_phy = offsets.last_update_timestamp, offsets.last_update_phy_offset
        if not offsets.phy_offsets:
            break
        first_time = None
        for phy_offset in sorted(offsets.phy_offsets):
            raw = store.commit_log.read_record(phy_offset)
            if raw is None:
                continue
            record = decode_message(raw)
            if first_time is None:
                first_time = record.store_timestamp
            hits.append(record)
        if hits or first_time is None or first_time < begin_ms:
            break
        round_end = first_time
    messages = [m for m in hits if m.topic == topic and (key == m.uniq_key or key in m.key_list)]
    return (messages, last_ts, last_phy, len(hits) >= max_num, len(hits) - len(messages))


def test_query_message_matches_the_plain_implementation(tmp_path):
    with _filled_store(tmp_path) as store:
        assert java_string_hash("T#Aa") == java_string_hash("T#BB")
        first = store.get_earliest_message_time()
        windows = [(0, FOREVER_MS), (first + 500, first + 900), (first + 2000, FOREVER_MS)]
        keys = ["Aa", "BB", "k0", "k5", "k299", "k300", "", "nope"]
        for key in keys:
            for max_num in (-3, 0, 1, 5, 32, 1000):
                for begin_ms, end_ms in windows:
                    got = store.query_message("T", key, max_num, begin_ms, end_ms)
                    want = _query_message_plain(store, "T", key, max_num, begin_ms, end_ms)
                    assert (got.messages, got.index_last_update_timestamp,
                            got.index_last_update_phy_offset, got.truncated,
                            got.collisions_filtered) == want, (key, max_num, begin_ms)
        collided = store.query_message("T", "Aa", 64)
        assert collided.messages and collided.collisions_filtered > 0
        assert store.query_message("Other", "Aa").messages == []


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "python"])
@pytest.mark.parametrize("store_type", ["default", "defaultRocksDB"])
def test_time_lookups_with_the_memo_match_a_read_only_open(tmp_path, store_type, kernel,
                                                           monkeypatch):
    # kernel=False: the nearest search stays in Python (with the memo) on the writable store, while
    # the read-only open below searches in C when the kernel is built.
    monkeypatch.setattr("store.lookups.KERNEL_COMPILED", kernel and lookup_kernel.COMPILED)
    store = _filled_store(tmp_path, count=600, store_type=store_type)
    try:
        first = store.get_earliest_message_time()
        last = first + 7 * 600
        rng = random.Random(11)
        stamps = [first - 5, first, last, last + 5] + [rng.randint(first, last) for _ in range(120)]
        asked = [(q, t, b) for q in range(3) for t in stamps for b in ("nearest", "lower", "upper")]
        # twice: the second round answers from the memo where the first one filled it
        writable = [store.get_offset_in_queue_by_time("T", q, t, b) for q, t, b in asked]
        assert writable == [store.get_offset_in_queue_by_time("T", q, t, b) for q, t, b in asked]
        if store_type == "default" and not kernel:
            assert store.__dict__.get("_store_times")
    finally:
        store.close()
    monkeypatch.setattr("store.lookups.KERNEL_COMPILED", lookup_kernel.COMPILED)
    with MessageStore.open(small_config(tmp_path / "s", store_type=store_type),
                           read_only=True) as reader:
        assert "_store_times" not in reader.__dict__
        assert [reader.get_offset_in_queue_by_time("T", q, t, b) for q, t, b in asked] == writable
        assert "_store_times" not in reader.__dict__


def test_the_store_time_reader_is_made_again_when_the_segments_change(tmp_path):
    with _filled_store(tmp_path, count=30) as store:
        reader = store._store_time_reader()
        assert store._store_time_reader() is reader          # same segment list: reused
        files = store.commit_log.mapped_files.files
        while store.commit_log.mapped_files.files is files:   # until a new segment is added
            assert store.put_message(Message("T", b"y" * 4000, queue_id=0, keys=["roll"])).ok
        while store.dispatch_behind_bytes() > 0:
            store.dispatch_pending()
        fresh = store._store_time_reader()
        assert fresh is not reader
        last = store.commit_log.mapped_files.files[-1]
        assert fresh(last.file_from_offset, 0) == store.commit_log.store_timestamp_at(
            last.file_from_offset)
        newest = store.get_max_offset_in_queue("T", 0) - 1
        newest_ms = store.get_message_store_timestamp("T", 0, newest)
        assert store.get_offset_in_queue_by_time("T", 0, newest_ms + 10**6) == newest


def test_the_nearest_shortcut_answers_as_the_general_time_search(tmp_path, monkeypatch):
    # FileConsumeQueueStore sends "nearest" straight to its search, and that search calls the C
    # directly (the twin when the C says NotImplemented); both give the general path's answers.
    from store.consumequeue.file import time_search as file_time_search
    with _filled_store(tmp_path, count=400) as store:
        first = store.get_earliest_message_time()
        stamps = [first - 5, first, first + 7 * 400 + 5] + list(range(first, first + 7 * 400, 13))
        reader = store._store_time_reader()
        queues = store.consume_queues
        general = [file_time_search.offset_by_time(queues._queues[("T", q)], t, "nearest", reader)
                   for q in range(3) for t in stamps]
        shortcut = [store.get_offset_in_queue_by_time("T", q, t) for q in range(3) for t in stamps]
        assert shortcut == general
        assert [store.get_offset_in_queue_by_time("T", q, t, "nearest")
                for q in range(3) for t in stamps] == general
        assert store.get_offset_in_queue_by_time("T", 9, first) == 0      # no such queue
        with pytest.raises(ValueError, match="boundary must be one of"):
            store.get_offset_in_queue_by_time("T", 0, first, "nearer")
        monkeypatch.setattr(file_time_search, "cq_search_nearest_fast",
                            lambda *args: NotImplemented)
        assert [store.get_offset_in_queue_by_time("T", q, t)
                for q in range(3) for t in stamps] == general


def test_a_full_store_time_memo_is_cleared_by_the_next_time_lookup(tmp_path, monkeypatch):
    monkeypatch.setattr("store.lookups.KERNEL_COMPILED", False)    # the Python search fills it
    monkeypatch.setattr("store.lookups.STORE_TIME_MEMO_MAX", 4)
    with _filled_store(tmp_path, count=200) as store:
        first = store.get_earliest_message_time()
        store.get_offset_in_queue_by_time("T", 0, first + 500)
        memo = store.__dict__["_store_times"]
        assert len(memo) >= 4
        queue_0_probes = set(memo)        # queue 1's units are other records: no overlap
        store.get_offset_in_queue_by_time("T", 1, first + 900)
        assert store.__dict__["_store_times"] is memo and memo
        assert not queue_0_probes & set(memo)


def test_a_segment_unmapped_under_a_lookup_reads_as_gone_not_as_an_error(tmp_path):
    """Cleanup closes a segment's map before it marks the segment destroyed: a time lookup or a
    read that checked the flag in between found a closed map and raised ValueError (a stress of
    lookups beside forced cleanups did, before and after the C lookups). Now the map reads as gone,
    and the store-time reader asks the live log, which no longer has the segment."""
    clock = FakeClock(1_700_000_000_000)
    with MessageStore.open(small_config(tmp_path), clock_ms=clock) as opened:
        for n in range(400):
            clock.advance(1)
            assert opened.put_message(Message("T", b"z" * 300, queue_id=0)).ok
        files = opened.commit_log.mapped_files.files
        assert len(files) > 2
        first = files[0]
        reader = opened._make_store_time_reader()
        assert reader(first.file_from_offset, 0) == 1_700_000_000_001
        first.buffer.close()                  # the window: unmapped, `destroyed` not yet set
        assert not first.destroyed
        assert first.read(0, 8) is None
        assert reader(first.file_from_offset, 0) == -1
        assert opened.commit_log.store_timestamp_at(first.file_from_offset) == -1
        for boundary in ("nearest", "lower", "upper"):     # the C searches ask the same reader
            assert opened.get_offset_in_queue_by_time("T", 0, 1_700_000_000_002, boundary) >= 0
