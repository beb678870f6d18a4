"""store.kernel.lookup: the compiled index walk and nearest time search give their twins' answers.

* `index_select` against `index_select_py` on the index files of a store with many hash collisions
  (64 slots), and on random files (cycles, prev out of range, negative times, cut-short buffers,
  ints at their edges), through the fuzz driver's generator;
* `cq_search_nearest` against `cq_search_nearest_py` and the Python `search_nearest_units` (with its
  memo) on a store of several 64 KiB commit-log segments with IPv4 and IPv6 born hosts (the segments
  it found full remembered in the reader's `full_segments`, none on a read-only store), and on random
  fake segments (records cut by the read position, destroyed or unmapped segments);
* `cq_nearest_queue` against `cq_nearest_queue_py` and the store's Python path
  (`nearest_offset_by_time`) on the queues of a store whose queues are one file each, with their min
  offsets moved, and on random fake queues; a queue of several files and a reader without segments
  are asked of the Python path; `cq_nearest_in` (the store's entry point) against its twin, under its
  lock, with the Python fallback for queues of several files;
* `cq_search_boundary` ([5.x] LOWER / UPPER) against `cq_search_boundary_py` and the Python
  `search_boundary_units` on the same store (windows inside files, plateaus of equal times), on random
  fake segments, and asking the twin where the Python path raises;
* `read_message` against `read_message_py` (store.codec.message.decode_message) at every position of
  a store's commit log and on damaged records (flipped bytes, cut limits, IPv6 hosts, non-ASCII
  topics and properties);
* the "ask the twin" answers: a probe outside the units, an entry outside the file, a non-int.

The sanitized fuzzing of the same functions is tests/test_kernel_fuzz.py.
"""

from __future__ import annotations

import random
import struct
import threading

import pytest

from store import Message, MessageStore
from store.codec.index_codec import build_key
from store.codec.message import MessageRecord, decode_message, encode_message
from store.codec.properties import decode_properties, encode_properties
from store.consumequeue.file.time_search import nearest_offset_by_time
from store.consumequeue.time_search import search_boundary_units, search_nearest_units
from store.index.index_query import query_key_hash
from store.kernel import _native
from store.kernel import lookup
from tests.engine_util import FakeClock, small_config
from tests.kernel_fuzz import lookup_targets

needs_kernel = pytest.mark.skipif(not lookup.COMPILED, reason="the kernel is not built")


class _Driver:
    """What lookup_targets needs of the fuzz driver."""

    class Disagreement(AssertionError):
        pass

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.native = _native
        self.disagreement = self.Disagreement
        self.last_input: dict = {}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("lookup-kernel")
    clock = FakeClock(1_700_000_000_000)
    with MessageStore.open(small_config(root), clock_ms=clock) as opened:
        for n in range(900):
            clock.advance(_step_ms(n))
            assert opened.put_message(Message(
                "T", b"x" * (n % 97), queue_id=n % 3, keys=[f"k{n}", f"k{n % 50}"],
                born_host="[::1]:5" if n % 7 == 0 else None)).ok
        while opened.dispatch_behind_bytes() > 0:
            opened.dispatch_pending()
        yield opened


def _step_ms(n: int) -> int:
    """Store-time steps with plateaus (equal times) and jumps."""
    return (0, 0, 1, 3, 250)[n % 5]


@needs_kernel
def test_index_select_matches_its_twin_on_a_store(store):
    files = store.index_service.files
    assert len(files) > 1
    rng = random.Random(5)
    keys = [f"k{n}" for n in range(0, 900, 7)] + ["nope", "k3", "k49"]
    first = store.get_earliest_message_time()
    for index_file in files:
        buf = index_file._require_map()
        for key in keys:
            key_hash = query_key_hash(build_key("T", key))
            for max_num in (1, 3, 64):
                begin_ms = rng.choice((0, first + 500, first + 5000))
                end_ms = rng.choice((2**63 - 1, first + 8000))
                args = (buf, key_hash, index_file.max_hash_slot_num, index_file.max_index_num,
                        index_file.index_count, index_file.begin_timestamp, max_num, begin_ms,
                        end_ms)
                got, want = [7], [7]
                assert _native.index_select(*args, got) is None
                lookup.index_select_py(*args, want)
                assert got == want, (key, max_num, begin_ms, end_ms)


@needs_kernel
def test_index_select_matches_its_twin_on_random_files():
    driver = _Driver(1)
    compared = sum(lookup_targets.index_select(driver) for _ in range(3000))
    assert compared > 500


@needs_kernel
def test_index_select_asks_the_twin_where_python_raises():
    buf = bytearray(40 + 4 * 4 + 20 * 8)
    struct.pack_into(">i", buf, 40 + 4 * 1, 3)                     # slot 1 -> entry 3
    struct.pack_into(">iqii", buf, 40 + 16 + 20 * 3, 1, 99, 0, 0)
    result = [1]
    assert _native.index_select(bytes(buf[:100]), 1, 4, 8, 5, 0, 10, 0, 10**6, result) \
        is NotImplemented
    assert result == [1]                                          # nothing left behind
    with pytest.raises(struct.error) as twin_error:
        lookup.index_select_py(bytes(buf[:100]), 1, 4, 8, 5, 0, 10, 0, 10**6, [])
    with pytest.raises(struct.error) as error:
        lookup.index_select(bytes(buf[:100]), 1, 4, 8, 5, 0, 10, 0, 10**6, [])
    assert str(error.value) == str(twin_error.value)
    assert _native.index_select(bytes(buf), 1, 4, 8, 5, 0, 10, 0, 2**64, []) is NotImplemented
    assert _native.index_select(bytes(buf), 1, 4, 8, 5, 0, 10, 0, 1.5, []) is NotImplemented
    out = []
    lookup.index_select(bytes(buf), 1, 4, 8, 5, 0, 10, 0, 2**64, out)
    assert out == [99]


def _probes(store, seed: int, randoms: int):
    """(rng, queue id, CQ file, its units, a time) over every file of the fixture's queues, for the
    times just around the stored ones and `randoms` inside them."""
    first = store.get_earliest_message_time()
    last = store.get_message_store_timestamp("T", 0, store.get_max_offset_in_queue("T", 0) - 1)
    rng = random.Random(seed)
    stamps = [first - 1, first, last, last + 1] + [rng.randint(first, last) for _ in range(randoms)]
    for queue_id in range(3):
        for mapped in store.consume_queues._queues[("T", queue_id)].mapped_files.files:
            for timestamp_ms in stamps:
                yield rng, queue_id, mapped, mapped.read_position // 20, timestamp_ms


@needs_kernel
def test_cq_search_nearest_matches_its_twin_and_the_python_search_on_a_store(store):
    assert len(store.commit_log.mapped_files.files) > 1
    reader = store._store_time_reader()
    assert reader.segments[3] == len(store.commit_log.mapped_files.files)
    plain = store._make_store_time_reader()
    del plain.segments                                  # the Python search, with its memo
    checked = 0
    for rng, queue_id, mapped, count, timestamp_ms in _probes(store, 9, 60):
        units = mapped.buffer
        low = rng.choice((0, 0, rng.randrange(count)))
        min_phy = rng.choice((0, 0, rng.randrange(store.commit_log.max_offset())))
        got = _native.cq_search_nearest(units, low, count - 1, timestamp_ms, min_phy,
                                        *reader.segments, reader)
        want = lookup.cq_search_nearest_py(units, low, count - 1, timestamp_ms, min_phy,
                                           *reader.segments, reader)
        python = search_nearest_units(units, plain, low, count - 1, timestamp_ms, min_phy)
        assert got == want == python, (queue_id, timestamp_ms, low, min_phy)
        checked += 1
    assert checked > 300
    # The C remembered each full segment it read (later searches skip its attributes): all but the
    # last, which is still being written.
    files = store.commit_log.mapped_files.files
    assert reader.full_segments[:-1] == [(f.file_from_offset, f.buffer) for f in files[:-1]]
    assert reader.full_segments[-1] is None


def test_a_read_only_store_time_reader_remembers_no_segments(store):
    with MessageStore.open(small_config(store.config.store_path_root_dir), read_only=True) as viewer:
        reader = viewer._store_time_reader()
        assert not hasattr(reader, "full_segments")      # its writer may recover and cut them
        assert viewer.get_offset_in_queue_by_time("T", 0, store.get_earliest_message_time() + 9) \
            == store.get_offset_in_queue_by_time("T", 0, store.get_earliest_message_time() + 9)


@needs_kernel
def test_cq_search_boundary_matches_its_twin_and_the_python_search_on_a_store(store):
    reader = store._store_time_reader()
    plain = store._make_store_time_reader()
    del plain.segments                                  # the Python search, with its memo
    checked = 0
    # plateaus of equal store times (the fixture's steps 0, 0, 1, 3, 250) end the search on a hit
    for rng, queue_id, mapped, count, timestamp_ms in _probes(store, 11, 40):
        units = mapped.buffer
        base = mapped.file_from_offset // 20
        floor = rng.choice((0, 0, rng.randrange(count)))
        ceiling = rng.choice((count - 1, count - 1, rng.randrange(floor, count)))
        min_phy = rng.choice((0, 0, rng.randrange(store.commit_log.max_offset())))
        for upper in (False, True):
            args = (units, floor, ceiling, timestamp_ms, min_phy, *reader.segments, reader,
                    upper, base, base + floor)
            got = _native.cq_search_boundary(*args)
            want = lookup.cq_search_boundary_py(*args)
            python = search_boundary_units(units, plain, floor, ceiling, timestamp_ms, min_phy,
                                           "upper" if upper else "lower", base,
                                           all_later_lower=base + floor)
            assert got == want == python, (queue_id, timestamp_ms, floor, ceiling, upper)
            checked += 1
    assert checked > 500


@needs_kernel
def test_cq_search_boundary_matches_its_twin_on_random_segments():
    driver = _Driver(3)
    compared = sum(lookup_targets.cq_search_boundary(driver) for _ in range(3000))
    assert compared > 300


@needs_kernel
def test_cq_search_boundary_asks_the_twin_where_python_raises(store):
    reader = store._store_time_reader()
    units = struct.pack(">qiq", 0, 100, 0) * 3
    args = (units, 0, 9, 5, 0, *reader.segments, reader, False, 0, 0)
    assert _native.cq_search_boundary(*args) is NotImplemented       # unit 9 is past the buffer
    with pytest.raises(struct.error) as twin_error:
        lookup.cq_search_boundary_py(*args)
    with pytest.raises(struct.error) as error:
        lookup.cq_search_boundary(*args)
    assert str(error.value) == str(twin_error.value)


@needs_kernel
def test_cq_search_nearest_matches_its_twin_on_random_segments():
    driver = _Driver(2)
    compared = sum(lookup_targets.cq_search_nearest(driver) for _ in range(3000))
    assert compared > 300


@needs_kernel
def test_cq_nearest_queue_matches_its_twin_and_the_python_path(tmp_path):
    clock = FakeClock(1_700_000_000_000)
    config = small_config(tmp_path, mapped_file_size_consume_queue=20 * 1000)
    with MessageStore.open(config, clock_ms=clock) as opened:
        for n in range(600):
            clock.advance(_step_ms(n))
            assert opened.put_message(Message("T", b"y" * (n % 61), queue_id=n % 2,
                                              born_host="[::1]:5" if n % 5 == 0 else None)).ok
        while opened.dispatch_behind_bytes() > 0:
            opened.dispatch_pending()
        assert len(opened.commit_log.mapped_files.files) > 1
        reader = opened._store_time_reader()
        first = opened.get_earliest_message_time()
        last = clock() + 10
        rng = random.Random(4)
        stamps = [0, first - 1, first, last] + [rng.randint(first, last) for _ in range(80)]
        checked = 0
        for queue_id in range(2):
            queue = opened.consume_queues._queues[("T", queue_id)]
            assert len(queue.mapped_files.files) == 1
            saved = queue.min_logic_offset, queue.commit_log_min_offset
            try:
                for min_logic, min_phy in ((0, 0), (20 * 7, 0), (0, 30_000), (20 * 299, 70_000),
                                           (20 * 400, 0)):
                    queue.min_logic_offset, queue.commit_log_min_offset = min_logic, min_phy
                    for timestamp_ms in stamps:
                        got = _native.cq_nearest_queue(queue, timestamp_ms, reader)
                        assert got == lookup.cq_nearest_queue_py(queue, timestamp_ms, reader) == \
                            nearest_offset_by_time(queue, timestamp_ms, reader), \
                            (queue_id, min_logic, min_phy, timestamp_ms)
                        checked += 1
            finally:
                queue.min_logic_offset, queue.commit_log_min_offset = saved
            # what the store answers goes the same way
            assert opened.get_offset_in_queue_by_time("T", queue_id, first + 5_000) == \
                nearest_offset_by_time(queue, first + 5_000, reader)
        assert checked == 2 * 5 * len(stamps)


@needs_kernel
def test_cq_nearest_queue_asks_for_several_files_and_readers_without_segments(store):
    reader = store._store_time_reader()
    queue = store.consume_queues._queues[("T", 0)]
    assert len(queue.mapped_files.files) > 1              # 100-unit files: the mtime decides
    assert _native.cq_nearest_queue(queue, 1_700_000_000_000, reader) is NotImplemented
    assert lookup.cq_nearest_queue_py(queue, 1_700_000_000_000, reader) is NotImplemented
    plain = store._make_store_time_reader()
    del plain.segments
    assert _native.cq_nearest_queue(queue, 1_700_000_000_000, plain) is NotImplemented
    assert _native.cq_nearest_queue(queue, 2**64, reader) is NotImplemented


@needs_kernel
def test_cq_nearest_queue_matches_its_twin_on_random_queues():
    driver = _Driver(5)
    compared = sum(lookup_targets.cq_nearest_queue(driver) for _ in range(3000))
    assert compared > 600


class _CountingLock:
    """An RLock that says how often it was taken and whether it is held."""

    def __init__(self):
        self.lock = threading.RLock()
        self.taken = 0

    def acquire(self):
        self.taken += 1
        return self.lock.acquire()

    def release(self):
        self.lock.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()


@needs_kernel
def test_cq_nearest_in_answers_as_its_twin_under_the_lock(store):
    reader = store._store_time_reader()
    queues = store.consume_queues._queues
    first = store.get_earliest_message_time()
    asked = []

    def fallback(queue, timestamp_ms, reader):      # several files per queue: the Python path
        asked.append(queue)
        assert lock.lock._is_owned()
        return nearest_offset_by_time(queue, timestamp_ms, reader)

    lock = _CountingLock()
    for queue_id in (0, 1, 2, 7):
        for timestamp_ms in (0, first, first + 700, first + 10**9):
            got = _native.cq_nearest_in(queues, lock, fallback, "T", queue_id, timestamp_ms, reader)
            want = lookup.cq_nearest_in_py(queues, lock, fallback, "T", queue_id, timestamp_ms,
                                           reader)
            assert got == want
            assert got == (0 if queue_id == 7 else store.get_offset_in_queue_by_time(
                "T", queue_id, timestamp_ms))
            assert not lock.lock._is_owned()
    assert lock.taken == 2 * 3 * 4 and len(asked) == 2 * 3 * 4     # queue 7 takes no lock

    def failing(queue, timestamp_ms, reader):
        raise OSError("the fallback failed")

    with pytest.raises(OSError, match="the fallback failed"):
        _native.cq_nearest_in(queues, lock, failing, "T", 0, first, reader)
    assert not lock.lock._is_owned()               # released, as a `with` block would
    with pytest.raises(TypeError):
        _native.cq_nearest_in([], lock, fallback, "T", 0, first, reader)


@needs_kernel
def test_cq_search_nearest_asks_the_twin_where_python_raises(store):
    reader = store._store_time_reader()
    units = struct.pack(">qiq", 0, 100, 0) * 3
    assert _native.cq_search_nearest(units, 0, 9, 5, 0, *reader.segments, reader) \
        is NotImplemented
    with pytest.raises(struct.error) as twin_error:
        lookup.cq_search_nearest_py(units, 0, 9, 5, 0, *reader.segments, reader)
    with pytest.raises(struct.error) as error:
        lookup.cq_search_nearest(units, 0, 9, 5, 0, *reader.segments, reader)
    assert str(error.value) == str(twin_error.value)
    assert _native.cq_search_nearest(units, 0, 2, 2**63, 0, *reader.segments, reader) \
        is NotImplemented
    assert lookup.cq_search_nearest(units, 0, 2, 2**63, 0, *reader.segments, reader) == \
        lookup.cq_search_nearest_py(units, 0, 2, 2**63, 0, *reader.segments, reader)


def test_the_dispatchers_are_the_twins_without_the_kernel():
    if lookup.COMPILED:
        assert lookup.index_select is not lookup.index_select_py
        assert lookup.cq_search_nearest is not lookup.cq_search_nearest_py
    else:
        assert lookup.index_select is lookup.index_select_py
        assert lookup.cq_search_nearest is lookup.cq_search_nearest_py


# -- read_message ------------------------------------------------------------------------------------

def _read_message_both(buffer, position, limit):
    """(C answer, twin answer) as outcomes: ("ok", value) or ("raise", type, message)."""
    def outcome(function):
        try:
            return ("ok", function(buffer, position, limit, MessageRecord, decode_properties,
                                   decode_message))
        except Exception as error:
            return ("raise", type(error).__name__, str(error))
    return outcome(lookup.read_message), outcome(lookup.read_message_py)


@needs_kernel
def test_read_message_matches_its_twin_on_every_record_of_a_store(store):
    log = store.commit_log
    seen = 0
    for mapped in log.mapped_files.files:
        buffer, limit = mapped.buffer, mapped.read_position
        for position in range(0, limit, 1 if seen < 3000 else 7):   # record starts and everything between
            fast = _native.read_message(buffer, position, limit, MessageRecord, decode_properties,
                                        decode_message)
            got, want = _read_message_both(buffer, position, limit)
            assert got == want, position
            if want[0] == "ok" and want[1] is not None:
                assert fast is not NotImplemented and fast == want[1]
                seen += 1
    assert seen >= 900


@needs_kernel
def test_read_message_matches_its_twin_on_damaged_records():
    rng = random.Random(4)
    properties = [None, {"UNIQ_KEY": "U1", "a": "b"}, {"é": "ü\U0001F600", "x": "\x01y"},
                  {"KEYS": "k1 k2"}]
    hosts = ["10.1.2.3:77", "[::1]:5", "[2001:db8:0:0:0:0:0:ff01]:65535"]
    for case in range(1500):
        props = rng.choice(properties)
        record = bytearray(encode_message(
            topic=rng.choice(["T", "tö", "t" * 127]), queue_id=case % 5,
            body=rng.randbytes(rng.randrange(40)),
            properties_raw=encode_properties(props) if props else b"",
            queue_offset=case, phy_offset=case * 7, born_timestamp=case,
            born_host=rng.choice(hosts), store_timestamp=1_700_000_000_000 + case,
            store_host=rng.choice(hosts), version=rng.choice([1, 2])))
        for _ in range(rng.choice([0, 1, 1, 2])):
            at = rng.randrange(len(record))
            record[at] = rng.choice([0, 0xFF, 0x80, 1, 2, record[at] ^ 0x10])
        buffer = bytes(rng.randbytes(rng.choice([0, 3])) + record + rng.randbytes(rng.choice([0, 9])))
        position = rng.choice([0, 3, 1, -1]) if rng.random() < 0.3 else buffer.find(record[:8])
        limit = rng.choice([len(buffer), len(buffer) - 1, position + 40, len(buffer) + 5, 0])
        got, want = _read_message_both(buffer, position, limit)
        assert got == want, (case, position, limit)


def test_query_message_past_int64_times_takes_the_twins_and_agrees(store):
    # end_ms past int64: the C index walk asks its twin (query_offsets runs it)
    for key in ("k7", "k49", "k500", "nope"):
        usual = store.query_message("T", key, 64)
        wide = store.query_message("T", key, 64, 0, 2**64)
        assert [m.commit_log_offset for m in wide.messages] == \
            [m.commit_log_offset for m in usual.messages]
        assert wide.messages == usual.messages


@pytest.mark.timeout(60)
@pytest.mark.parametrize("matching", [False, True])
def test_a_chain_cycle_under_a_huge_index_count_ends(matching):
    # Found by the fuzz driver (CI hung in query.c's walk): entries 1 and 2 point at each other and
    # the count claims 2**62 entries (IndexFile's load refuses that; a caller of the kernel may
    # not). The walk takes at most min(index_count, max_index) steps, in the C and the twin alike.
    slots, max_index, key_hash = 4, 8, 1
    buf = bytearray(40 + 4 * slots + 20 * max_index)
    struct.pack_into(">i", buf, 40 + 4 * (key_hash % slots), 2)          # slot -> entry 2
    hashes = key_hash if matching else key_hash + 1
    struct.pack_into(">iqii", buf, 40 + 4 * slots + 20 * 1, hashes, 100, 0, 2)
    struct.pack_into(">iqii", buf, 40 + 4 * slots + 20 * 2, hashes, 200, 0, 1)
    args = (bytes(buf), key_hash, slots, max_index, 2**62, 0, 10**6, 0, 10**6)
    want = []
    lookup.index_select_py(*args, want)
    assert want == ([200, 100] * 4 if matching else [])
    if lookup.COMPILED:
        got = []
        assert _native.index_select(*args, got) is None
        assert got == want
