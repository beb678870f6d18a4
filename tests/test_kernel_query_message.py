"""store.kernel.query's query_message (c/query_message.c): a whole key query under the index lock,
its QueryMessageResult built in the same call, gives its twin's answers.

* on a store (small index files: collisions; several segments), for keys that hit, collide or miss,
  max_num and windows at their edges: the C's result is the twin's and the dataclass's own (the same
  type, fields, field order, equality and repr), and `MessageStore.query_message` returns it;
* the transient store pool: a record past a segment's committed position (its wrote position
  ahead) is not read, by the C nor the twin (read_position is read from its fields);
* the lock: held while the files are read, free again afterwards, also when the query raises;
* where the C asks its twin (result_type not a type, a closed index file), and the fuzz target
  (tests/kernel_fuzz/query_target.py's query_message) run unsanitized.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from store import Message, MessageStore
from store.api import QueryMessageResult
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
    root = tmp_path_factory.mktemp("query-message")
    clock = FakeClock(1_700_000_000_000)
    with MessageStore.open(small_config(root), clock_ms=clock) as store:
        for n in range(900):
            clock.advance((0, 1, 7, 250)[n % 4])
            assert store.put_message(Message(
                "T" if n % 9 else "U", b"x" * (n % 300), queue_id=n % 3,
                keys=[f"k{n}", f"k{n % 40}", "Aa" if n % 2 else "BB"])).ok
        while store.dispatch_behind_bytes() > 0:
            store.dispatch_pending()
    return root


def _both(store, *args):
    full = (store.index_service,) + args[:5] + (store.commit_log.mapped_files, DECODERS,
                                                 QueryMessageResult, args[5])
    return _native.query_message(*full), query.query_message_py(*full)


def _by_init(store, topic, key, max_num, begin_ms, end_ms, truncate_at):
    index = store.index_service
    with index.lock:
        messages, hits, last_ts, last_phy = query.query_keys_py(
            index.live_files, topic, key, max_num, begin_ms, end_ms,
            store.commit_log.mapped_files, DECODERS)
    return QueryMessageResult(messages, last_ts, last_phy, truncated=hits >= truncate_at,
                              collisions_filtered=hits - len(messages))


def _same(got, want):
    assert type(got) is type(want) is QueryMessageResult
    assert list(vars(got).items()) == list(vars(want).items())
    assert got == want and repr(got) == repr(want)
    assert list(vars(got)) == [f.name for f in dataclasses.fields(QueryMessageResult)]


@needs_kernel
def test_query_message_is_its_twin_and_the_dataclass_on_a_store(root):
    with MessageStore.open(small_config(root)) as store:
        first = store.get_earliest_message_time()
        windows = [(0, FOREVER_MS), (first + 20_000, first + 40_000), (0, first - 1),
                   (FOREVER_MS, 0)]
        truncated = collided = 0
        for key in ("k5", "k39", "k899", "Aa", "BB", "nope", "", "ké"):
            for topic in ("T", "U"):
                for max_num, truncate_at in ((1, 1), (3, 5), (32, 32), (10_000, 10_000)):
                    for begin_ms, end_ms in windows:
                        args = (topic, key, max_num, begin_ms, end_ms, truncate_at)
                        got, twin = _both(store, *args)
                        _same(got, twin)
                        _same(got, _by_init(store, *args))
                        truncated += got.truncated
                        collided += got.collisions_filtered > 0
                if max_num == truncate_at <= 32:      # below both caps
                    _same(store.query_message(topic, key, max_num), _by_init(
                        store, topic, key, max_num, 0, FOREVER_MS, max_num))
        assert truncated > 5 and collided > 5, (truncated, collided)


@needs_kernel
@pytest.mark.parametrize("pool", [True, False])
def test_a_record_past_the_committed_position_is_not_read_with_the_pool(tmp_path, pool):
    config = small_config(tmp_path / "s", transient_store_pool_enable=pool)
    store = MessageStore.open(config, start_services=False)
    try:
        for n in range(3):
            assert store.put_message(Message("T", b"body%d" % n, keys=[f"key{n}"])).ok
        store.commit_log.mapped_files.commit(0)
        while store.dispatch_behind_bytes() > 0:
            store.dispatch_pending()
        assert len(store.query_message("T", "key2").messages) == 1
        mapped = store.commit_log.mapped_files.last_file()
        assert (mapped.write_buffer is not None) is pool
        record_at = store.query_message("T", "key2").messages[0].commit_log_offset
        mapped.committed_position = record_at - mapped.file_from_offset   # wrote stays ahead
        got, twin = _both(store, "T", "key2", 32, 0, FOREVER_MS, 32)
        _same(got, twin)
        assert len(got.messages) == (0 if pool else 1)
        assert len(_both(store, "T", "key1", 32, 0, FOREVER_MS, 32)[0].messages) == 1
        mapped.committed_position = mapped.wrote_position
    finally:
        store.close()


@needs_kernel
def test_the_lock_is_held_during_the_query_and_free_after_it_even_when_it_raises():
    rng = random.Random(5)
    while True:
        args = query_target.make_args(rng)
        if args[0] and args[6].files:
            break
    service = query_target.FakeIndexService(args[0])
    held = []
    newest = args[0][-1]
    newest.read_only = True
    newest.refresh = lambda: held.append(service.lock._is_owned())
    full = (service,) + args[1:] + (QueryMessageResult, 32)
    for function in (_native.query_message, query.query_message_py):
        result = function(*full)
        assert result is not NotImplemented and not service.lock._is_owned()

    def fails():
        raise OSError("header unreadable")
    newest.refresh = fails
    for function in (_native.query_message, query.query_message_py):
        with pytest.raises(OSError, match="header unreadable"):
            function(*full)
        assert not service.lock._is_owned()
    assert held == [True, True]


@needs_kernel
def test_query_message_asks_its_twin_where_python_raises():
    rng = random.Random(3)
    while True:
        args = query_target.make_args(rng)
        if args[0] and args[6].files:
            break
    service = query_target.FakeIndexService(args[0])
    args[0][-1]._map = None
    args[0][-1].begin_timestamp = args[0][-1].end_timestamp = 0
    full = (service, args[1], args[2], 32, 0, FOREVER_MS) + args[6:] + (QueryMessageResult, 32)
    assert _native.query_message(*full) is NotImplemented
    assert not service.lock._is_owned()
    with pytest.raises(StoreClosedError):
        query.query_message_py(*full)
    not_a_type = full[:8] + (QueryMessageResult(1, 2, 3), 32)
    assert _native.query_message(*not_a_type) is NotImplemented
    with pytest.raises(TypeError):
        _native.query_message(*full[:9])


@needs_kernel
@pytest.mark.parametrize("seed", range(4))
def test_query_message_matches_its_twin_on_fuzzed_inputs(seed):
    class Driver:
        rng = random.Random(seed)
        native = _native
        disagreement = AssertionError
        last_input: dict = {}

    compared = sum(query_target.query_message(Driver) for _ in range(300))
    assert compared > 100


def test_the_dispatcher_is_the_twin_without_the_kernel():
    if _native is None or not hasattr(_native, "query_message"):
        assert query.query_message_fast is query.query_message_py
    else:
        assert query.query_message_fast is _native.query_message
