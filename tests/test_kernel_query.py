"""store.kernel.query: the compiled key query (c/query.c) gives its twin's answers.

* `query_keys` against `query_keys_py` on a store with many small index files (256 entries, 64 slots:
  hash collisions) over several 64 KiB commit-log segments, for keys that hit, collide or miss, with
  max_num and time windows at their edges (the C answers, it does not ask), after the oldest segments
  expired, and on the read-only open of the same store (each index file's header re-read);
* the fuzz target (tests/kernel_fuzz/query_target.py) run unsanitized: damaged index files,
  damaged records, destroyed segments, gaps, closed files, ints past int64;
* where the C asks its twin: a closed index file (the twin raises StoreClosedError), a gap in the
  segment list, an argument past int64; and the dispatchers without the kernel.

The sanitized fuzzing of the same function is tests/test_kernel_fuzz.py.
"""

from __future__ import annotations

import random

import pytest

from store import Message, MessageStore
from store.errors import StoreClosedError
from store.kernel import _native
from store.kernel import query
from store.lookups import FOREVER_MS
from tests.engine_util import FakeClock, small_config
from tests.kernel_fuzz import query_target

needs_kernel = pytest.mark.skipif(not query.COMPILED, reason="the kernel is not built")
DECODERS = query_target.DECODERS


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("query-kernel")
    clock = FakeClock(1_700_000_000_000)
    with MessageStore.open(small_config(root), clock_ms=clock) as store:
        for n in range(1200):
            clock.advance((0, 1, 7, 250)[n % 4])
            assert store.put_message(Message(
                "T" if n % 9 else "U", b"x" * (n % 300), queue_id=n % 3,
                keys=[f"k{n}", f"k{n % 40}", "Aa" if n % 2 else "BB"],
                born_host="[::1]:5" if n % 7 == 0 else None)).ok
        while store.dispatch_behind_bytes() > 0:
            store.dispatch_pending()
    return root


def _both(store, topic, key, max_num, begin_ms, end_ms):
    index = store.index_service
    with index.lock:
        args = (index.live_files, topic, key, max_num, begin_ms, end_ms,
                store.commit_log.mapped_files, DECODERS)
        return _native.query_keys(*args), query.query_keys_py(*args)


def _windows(store):
    first = store.get_earliest_message_time()
    return [(0, FOREVER_MS), (first + 20_000, first + 40_000), (first + 60_000, FOREVER_MS),
            (0, first - 1), (FOREVER_MS, 0), (first + 30_000, first + 30_000)]


@needs_kernel
def test_query_keys_matches_its_twin_on_a_store(root):
    with MessageStore.open(small_config(root)) as store:
        assert len(store.index_service.files) > 5 and len(store.commit_log.mapped_files.files) > 3
        compared = collided = 0
        for key in ("k5", "k39", "k1199", "Aa", "BB", "nope", "", "ké"):
            for topic in ("T", "U"):
                for max_num in (1, 3, 32, 64, 10_000):
                    for begin_ms, end_ms in _windows(store):
                        got, want = _both(store, topic, key, max_num, begin_ms, end_ms)
                        assert got is not NotImplemented, (key, max_num, begin_ms)
                        assert got == want, (key, max_num, begin_ms, end_ms)
                        compared += got[1] > 0
                        collided += got[1] > len(got[0])
        assert compared > 50 and collided > 10, (compared, collided)


@needs_kernel
def test_query_keys_matches_its_twin_after_expiry_and_read_only(root, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    with MessageStore.open(small_config(copy)) as store:
        store.clean_expired_files(force=True)          # the oldest segment goes
        for key in ("k0", "k1", "k5", "Aa"):
            got, want = _both(store, "T", key, 64, 0, FOREVER_MS)
            assert got is not NotImplemented and got == want, key
        writable = {key: store.query_message("T", key, 64) for key in ("k3", "k17", "Aa")}
    with MessageStore.open(small_config(copy), read_only=True) as reader:
        for key, want in writable.items():
            got = reader.query_message("T", key, 64)
            assert got == want, key
            native, twin = _both(reader, "T", key, 64, 0, FOREVER_MS)
            assert native is not NotImplemented and native == twin


@needs_kernel
@pytest.mark.parametrize("seed", range(6))
def test_query_keys_matches_its_twin_on_fuzzed_inputs(seed):
    class Driver:
        rng = random.Random(seed)
        native = _native
        disagreement = AssertionError
        last_input: dict = {}

    compared = sum(query_target.query_keys(Driver) for _ in range(400))
    assert compared > 150


@needs_kernel
def test_query_keys_asks_its_twin_where_python_raises_or_scans():
    rng = random.Random(3)
    for _ in range(200):
        args = query_target.make_args(rng)
        files, segments = args[0], args[6]
        if files and segments.files:
            break
    files[-1]._map = None
    answer = _native.query_keys(*args)
    assert answer is NotImplemented or answer[0] == []   # asks, unless the walk stops before
    files[-1].begin_timestamp = files[-1].end_timestamp = 0
    args = (files, args[1], args[2], 32, 0, FOREVER_MS) + args[6:]
    assert _native.query_keys(*args) is NotImplemented
    with pytest.raises(StoreClosedError):
        query.query_keys(*args)
    wide = (files, args[1], args[2], 2**64, 0, FOREVER_MS) + args[6:]
    assert _native.query_keys(*wide) is NotImplemented
    for function in (_native.query_keys, query.query_keys_py):   # not a MappedFileQueue
        with pytest.raises(AttributeError):
            function(*(args[:6] + (object(),) + args[7:]))


def test_the_dispatchers_are_the_twin_without_the_kernel():
    if _native is None or not hasattr(_native, "query_keys"):
        assert query.query_keys is query.query_keys_py
        assert query.query_keys_fast is query.query_keys_py
    else:
        assert query.query_keys_fast is _native.query_keys


@pytest.mark.parametrize("text", ["T#k", "T#ké", "T#\U0001F600", "", "\ud800", "T#polygenelubricants"])
def test_the_twins_key_hash_is_the_index_key_hash(text):
    from store.codec.javahash import index_key_hash
    assert query.index_key_hash_py(text) == index_key_hash(text)


@pytest.mark.parametrize("fields", [([], 0, 0, False, 0), (["m"], 5, 7, True, 2)])
def test_query_result_is_the_dataclass_built_by_its_init(fields):
    import dataclasses
    from store.api import QueryMessageResult
    from store.lookups import query_result
    built = query_result(*fields)
    want = QueryMessageResult(*fields[:3], truncated=fields[3], collisions_filtered=fields[4])
    assert type(built) is QueryMessageResult and built == want and repr(built) == repr(want)
    assert list(vars(built)) == [f.name for f in dataclasses.fields(QueryMessageResult)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.truncated = not built.truncated


@needs_kernel
@pytest.mark.timeout(60)
def test_a_chain_cycle_under_a_huge_index_count_ends_in_query_keys():
    # query.c's own walk (the fuzz driver hung CI there): a two-entry cycle whose header claims
    # 2**62 entries stops after min(index_count, max_index) steps, as the twin does.
    import struct

    rng = random.Random(11)
    args = query_target.make_args(rng)
    topic, key = args[1], args[2]
    key_hash = query.index_key_hash_py(topic + "#" + key)
    slots, max_index = 4, 8
    buf = bytearray(40 + 4 * slots + 20 * max_index)
    struct.pack_into(">i", buf, 40 + 4 * (key_hash % slots), 2)
    struct.pack_into(">iqii", buf, 40 + 4 * slots + 20 * 1, key_hash + 1, 100, 0, 2)
    struct.pack_into(">iqii", buf, 40 + 4 * slots + 20 * 2, key_hash + 1, 200, 0, 1)
    cycle = query_target.FakeIndexFile(bytes(buf), slots, max_index, 2**62, query_target.BASE_MS,
                                       query_target.BASE_MS + 5000, 0, False)
    args = ([cycle], topic, key, 32, 0, FOREVER_MS) + args[6:]
    assert _native.query_keys(*args) == query.query_keys_py(*args)
