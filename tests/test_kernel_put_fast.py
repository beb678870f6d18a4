"""`put_fast` (store/kernel/c/put_fast.c) against its twin (store/kernel/put_fast.py) and against the
store's Python put path: the same results, refusals and sentences, and byte-identical store files,
over random puts, batches, segment rolls and a clock that steps back; and every uncommon case
declined (None) with nothing written.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time

import pytest

from store import Message, MessageStore
from store import kernel
from store import message_store as message_store_module
from store.api import PutMessageResult, PutMessageStatus
from store.kernel import put_fast as put_fast_module
from store.kernel.put_fast import put_fast_py, put_fast_state
from tests.engine_util import FakeClock, small_config

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
# The twin composes the compiled encode_put (which has no Python twin): both need the kernel.
FAST_FUNCTIONS = [pytest.param(put_fast_py, id="twin", marks=needs_native),
                  pytest.param(put_fast_module.put_fast, id="native", marks=needs_native)]


def _store_files(root) -> str:
    """A digest of the commit log, the consume queues and the index files' bytes (not the index
    files' names: they carry the clock's time when the dispatch thread made them, which the test's
    moving clock makes differ from run to run)."""
    digest = hashlib.sha256()
    index_files = []
    for directory, _dirs, files in sorted(os.walk(root)):
        part = os.path.relpath(directory, root).split(os.sep)[0]
        for name in sorted(files):
            path = os.path.join(directory, name)
            if part in ("commitlog", "consumequeue"):
                digest.update(path[len(str(root)):].encode())
                with open(path, "rb") as handle:
                    digest.update(handle.read())
            elif part == "index":
                with open(path, "rb") as handle:
                    index_files.append(handle.read())
    for data in sorted(index_files):
        digest.update(data)
    return digest.hexdigest()


def _message(rng: random.Random) -> Message:
    properties = {}
    if rng.random() < 0.6:
        properties["UNIQ_KEY"] = f"U{rng.randrange(10**6)}"
    if rng.random() < 0.05:
        properties["DELAY"] = "1"
    if rng.random() < 0.03:
        properties["a\x02"] = "x"          # refused by the Python path
    size = rng.choice((0, 5, 300, 1024, 3000, 9000))
    return Message(rng.choice(("TopicA", "TopicB", "TopicC")), bytes([rng.randrange(256)]) * size,
                   rng.randrange(4), tags=rng.choice((None, "", "tagA")),
                   keys=rng.choice(([], ["k1", "k2"])), properties=properties,
                   sys_flag=rng.choice((0, 0, 0, 0, 4, 8, 12)),
                   born_host=rng.choice((None, None, "10.1.2.3:4567")))


def _run(root, calls, mode: str, monkeypatch, tick_ms: int, pwrite: bool = False):
    """Puts through put_fast (native or twin), or with the fast path off; (results, files, taken).
    `pwrite`: the segments take put_fast's records by pwrite (as under SYNC_FLUSH)."""
    clock = FakeClock(step_ms=tick_ms)
    taken = []
    with monkeypatch.context() as patch:
        if mode != "off":
            function = put_fast_py if mode == "twin" else put_fast_module.put_fast

            def counting(store, message, state):
                answer = function(store, message, state)
                taken.append(answer is not None)
                return answer
            patch.setattr(message_store_module, "put_fast", counting)
        # A ticking clock with no service threads: they read it too, at times of their own.
        store = MessageStore.open(small_config(root, max_message_size=40000), clock_ms=clock,
                                  start_services=tick_ms == 0)
        if mode != "off":
            store._put_fast = put_fast_state(store, PutMessageResult, PutMessageStatus.PUT_OK)
        else:
            store._put_fast = None
        if pwrite:
            store.commit_log.mapped_files.use_pwrite_records()
        results = []
        try:
            for kind, step_ms, item in calls:
                clock.now += step_ms          # constant during a call: both paths read it alike
                results.append(store.put_message(item) if kind == "one" else store.put_messages(item))
            store.dispatch_pending()
        finally:
            store.close()
    return results, _store_files(root), sum(taken)


# tick_ms 1: every clock reading moves the clock, so both paths must read it equally often.
@pytest.mark.parametrize("seed, tick_ms", [(1, 0), (2, 0), (3, 1), (4, 1)])
def test_put_fast_gives_the_python_paths_results_and_bytes(tmp_path, monkeypatch, seed, tick_ms):
    rng = random.Random(seed)
    calls = []
    for _ in range(500):
        step = rng.choice((0, 1, 1, 7, -50))     # -50: store times must stay non-decreasing
        if rng.random() < 0.85:
            calls.append(("one", step, _message(rng)))
        else:
            message = _message(rng)
            calls.append(("batch", step, [message] * rng.choice((1, 3))))
    calls.append(("one", 0, Message("TopicA", b"y", 99999)))      # queue id out of range
    calls.append(("one", 0, Message("TopicA", b"y" * 50000, 1)))  # over maxMessageSize
    slow = _run(tmp_path / "off", calls, "off", monkeypatch, tick_ms)
    modes = ["twin", "native"] if kernel.COMPILED else []
    for mode in modes:
        results, files, taken = _run(tmp_path / mode, calls, mode, monkeypatch, tick_ms)
        assert results == slow[0]
        assert files == slow[1]
        assert taken >= 250                    # the common puts took the one call
    assert any(r.wrote_offset % 65536 == 0 and r.wrote_offset > 0 for r in slow[0])   # rolls
    assert {r.status for r in slow[0]} >= {PutMessageStatus.PUT_OK,
                                           PutMessageStatus.MESSAGE_ILLEGAL}


@needs_native
def test_records_written_by_pwrite_are_the_same_bytes(tmp_path, monkeypatch):
    """With the segments taking records by pwrite (SYNC_FLUSH's way), C and twin still give the
    Python path's results and byte-identical files, over rolls into new segments."""
    rng = random.Random(7)
    calls = [("one", rng.choice((0, 1, 7)), _message(rng)) for _ in range(300)]
    slow = _run(tmp_path / "off", calls, "off", monkeypatch, 1)
    for mode in ("twin", "native"):
        results, files, taken = _run(tmp_path / mode, calls, mode, monkeypatch, 1, pwrite=True)
        assert (results, files) == slow[:2] and taken >= 150
    assert any(r.wrote_offset % 65536 == 0 and r.wrote_offset > 0 for r in slow[0])   # rolls


def test_sync_flush_segments_take_records_by_pwrite(tmp_path):
    """Under SYNC_FLUSH the segment being written and every new one hold their descriptor and
    take put_fast's records by pwrite; the records read back through the map at once."""
    config = small_config(tmp_path, flush_disk_type="SYNC_FLUSH")
    with MessageStore.open(config) as store:
        results = [store.put_message(Message("TopicA", bytes([n]) * 3000, 1)) for n in range(60)]
        assert all(result.ok for result in results)
        files = store.commit_log.mapped_files.files
        assert len(files) > 1 and all(f.pwrite_records and f._sync_fd >= 0 for f in files)
        assert not any(f.ranged_sync for f in files)     # SYNC_FLUSH syncs by fdatasync only
        for n, result in enumerate(results):
            assert store.look_message_by_offset(result.wrote_offset).body == bytes([n]) * 3000
    with MessageStore.open(small_config(tmp_path)) as store:     # ASYNC_FLUSH: through the map
        files = store.commit_log.mapped_files.files
        assert not any(f.pwrite_records for f in files)
        assert all(f.ranged_sync for f in files) == kernel.COMPILED
        assert store.get_message("g", "TopicA", 1, 59, 1).messages[0].body == bytes([59]) * 3000


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_a_closed_descriptor_declines_and_a_failed_write_moves_nothing(store, function):
    mapped = store.commit_log.mapped_files.files[-1]
    mapped.pwrite_records = True                      # the flag on, the descriptor not open
    before = _snapshot(store)
    assert type(function(store, Message("TopicA", b"x", 1), _state(store))) is int
    assert _snapshot(store) == before
    mapped._sync_fd = os.open(mapped.path, os.O_RDONLY)     # a write fails: EBADF
    try:
        with pytest.raises(OSError) as raised:
            function(store, Message("TopicA", b"x", 1), _state(store))
        assert raised.value.errno == 9 and _snapshot(store) == before
        assert store.commit_log.put_lock.acquire(blocking=False)   # released after the error
        store.commit_log.put_lock.release()
    finally:
        os.close(mapped._sync_fd)
        mapped._sync_fd = -1
    mapped.write_records_by_pwrite()
    result = function(store, Message("TopicA", b"by pwrite", 1), _state(store))
    assert result.ok and store.look_message_by_offset(result.wrote_offset).body == b"by pwrite"


def test_closing_the_store_waits_for_the_put_lock(tmp_path):
    """The commit log's files (and the descriptors put_fast writes by) close under the put lock:
    never between a put's reading a descriptor and its write."""
    store = MessageStore.open(small_config(tmp_path, flush_disk_type="SYNC_FLUSH"))
    store.put_message(Message("TopicA", b"x", 1))
    store.commit_log.put_lock.acquire()
    closing = threading.Thread(target=store.close)
    closing.start()
    closing.join(0.3)
    still_open = closing.is_alive() and not store.commit_log.mapped_files.files[-1].destroyed
    store.commit_log.put_lock.release()
    closing.join()
    assert still_open and store.commit_log.mapped_files.files[-1].destroyed


@pytest.fixture
def store(tmp_path):
    opened = MessageStore.open(small_config(tmp_path), clock_ms=FakeClock())
    opened.put_message(Message("TopicA", b"first", 1))   # notes the queue, makes the segment
    yield opened
    opened.close()


def _state(store):
    return put_fast_state(store, PutMessageResult, PutMessageStatus.PUT_OK)


def _snapshot(store):
    mapped = store.commit_log.mapped_files.files[-1]
    return (mapped.wrote_position, dict(store.commit_log.queue_offsets),
            store.commit_log.last_store_timestamp, bytes(mapped.buffer[:4096]))


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_put_fast_answers_the_common_put(store, function):
    before = store.commit_log.mapped_files.files[-1].wrote_position
    result = function(store, Message("TopicA", b"second", 1, tags="t", keys=["a", "b"]), _state(store))
    assert result.ok and result.wrote_offset == before and result.queue_offset == 1
    assert result.msg_ids == (result.msg_id,) and result.message_count == 1 and result.error is None
    assert store.commit_log.queue_offsets[("TopicA", 1)] == 2
    got = store.look_message_by_offset(result.wrote_offset)
    assert got.body == b"second" and got.store_timestamp == result.store_timestamp


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_put_fast_puts_a_queues_first_message_and_notes_the_queue(store, function):
    """A queue not yet in topics.json (of a topic already put to): put, then noted as the Python
    path's _acknowledge notes it (topics.json's queue numbers, the store's noted queues)."""
    assert store.topics.get("TopicA").write_queue_nums == 8
    result = function(store, Message("TopicA", b"q", 11), _state(store))
    assert result.ok and result.queue_offset == 0
    assert 11 in store._noted_queues["TopicA"]
    config = store.topics.get("TopicA")
    assert (config.read_queue_nums, config.write_queue_nums) == (12, 12)
    assert store.commit_log.queue_offsets[("TopicA", 11)] == 1
    assert store.look_message_by_offset(result.wrote_offset).queue_id == 11
    assert store._noted_queues["TopicA"] == set(range(12))   # every queue topics.json now covers


def test_a_topics_queues_are_noted_at_its_first_put_and_a_larger_one_still_grows_it(store,
                                                                                     monkeypatch):
    """_note_topic notes every queue a topic's config covers at once (their first puts would not
    change topics.json); a queue past them is noted when it comes, and grows the config."""
    calls = []
    note = store._note_topic
    monkeypatch.setattr(store, "_note_topic", lambda *args: calls.append(args) or note(*args))
    for queue_id in (2, 0, 7, 5):
        assert store.put_message(Message("TopicB", b"x", queue_id)).ok
    assert calls == [("TopicB", 2)]
    assert store._noted_queues["TopicB"] == set(range(8))
    assert store.put_message(Message("TopicB", b"x", 9)).ok
    assert calls[1:] == [("TopicB", 9)]
    config = store.topics.get("TopicB")
    assert (config.read_queue_nums, config.write_queue_nums) == (10, 10)


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_an_error_noting_the_queue_comes_after_the_put_as_on_the_python_path(store, function,
                                                                              monkeypatch):
    def broken(topic, queue_id):
        raise OSError("topics.json: disk gone")
    monkeypatch.setattr(store, "_note_topic", broken)
    before = store.commit_log.mapped_files.files[-1].wrote_position
    with pytest.raises(OSError, match="disk gone"):   # a queue past the topic's configured ones
        function(store, Message("TopicA", b"q", 40), _state(store))
    assert store.commit_log.mapped_files.files[-1].wrote_position > before   # written
    assert store.commit_log.queue_offsets[("TopicA", 40)] == 1


def _disk_full(store):
    store.services.cleanup.disk_full = True


def _hold_put_lock(store):
    store.commit_log.put_lock.acquire()


def _dispatch_requests(store):
    store.commit_log.make_dispatch_requests = True


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
# "born": declined after reading the born time, which it answers (the Python path puts with it).
@pytest.mark.parametrize("change, message, answer", [
    (None, Message("TopicNeverPutAnywhere", b"x", 1), "born"),   # a topic never validated
    (None, Message("TopicA", b"x", 1, properties={"DELAY": "2"}), "born"),
    (None, Message("TopicA", b"x" * 70000, 1), "born"),       # more than a segment
    (_disk_full, Message("TopicA", b"x", 1), None),
    (_hold_put_lock, Message("TopicA", b"x", 1), "born"),
    (_dispatch_requests, Message("TopicA", b"x", 1), None),   # dispatch requests wanted
    (lambda s: setattr(s, "_encode_batch", None), Message("TopicA", b"x", 1), None),
    (lambda s: setattr(s.services, "commit_service", object()), Message("TopicA", b"x", 1), None),
    (lambda s: setattr(s, "read_only", True), Message("TopicA", b"x", 1), None),
    (lambda s: setattr(s.commit_log.mapped_files.files[-1], "wrote_position", 65530),
     Message("TopicA", b"x", 1), "born"),                     # a roll
], ids=["new-topic", "delay", "too-big", "disk-full", "lock-held",
        "dispatch-requests", "no-encoder", "commit-service", "read-only", "roll"])
def test_put_fast_declines_the_uncommon_cases_and_writes_nothing(store, function, change, message,
                                                                 answer):
    lock = store.commit_log.put_lock
    if change is not None:
        change(store)
    before = _snapshot(store)
    store.clock_ms.now = 1_700_000_123_456
    assert function(store, message, _state(store)) == (1_700_000_123_456 if answer else None)
    assert _snapshot(store) == before
    if lock.locked():
        lock.release()
    store.read_only = False
    store.services.commit_service = None
    store.commit_log.make_dispatch_requests = False


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_put_fast_declines_a_closed_store(tmp_path, function):
    opened = MessageStore.open(small_config(tmp_path), clock_ms=FakeClock())
    opened.put_message(Message("TopicA", b"first", 1))
    state = _state(opened)
    opened.close()
    assert function(opened, Message("TopicA", b"x", 1), state) is None
    assert opened.put_message(Message("TopicA", b"x", 1)).error == "store is closed"


def test_refusals_keep_their_sentences(store):
    store.services.cleanup.disk_full = True
    assert store.put_message(Message("TopicA", b"x", 1)).error == \
        "disk usage is above the warning level; puts are refused"


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_put_fast_keeps_store_time_non_decreasing(store, function):
    store.commit_log.last_store_timestamp = store.clock_ms() + 10_000
    result = function(store, Message("TopicA", b"x", 1), _state(store))
    assert result.store_timestamp == store.commit_log.last_store_timestamp == store.clock_ms() + 10_000


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_put_fast_reads_the_system_clock_for_the_default_clock(tmp_path, function):
    opened = MessageStore.open(small_config(tmp_path))
    try:
        assert opened.clock_ms is put_fast_module.system_clock_ms
        opened.put_message(Message("TopicA", b"first", 1))
        low = time.time_ns() // 1_000_000
        result = function(opened, Message("TopicA", b"x", 1), _state(opened))
        high = time.time_ns() // 1_000_000
        assert low <= result.store_timestamp <= high
        assert low <= opened.look_message_by_offset(result.wrote_offset).born_timestamp <= high
    finally:
        opened.close()


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_put_fast_refuses_bad_arguments_alike(store, function):
    message = Message("TopicA", b"x", 1)
    with pytest.raises(TypeError, match=r"put_fast\(store, message, state \(12-tuple\)\[, born"):
        function(store, message, _state(store)[:5])
    with pytest.raises(TypeError, match=r"put_fast\(store, message, state \(12-tuple\)\[, born"):
        function(store, message, _state(store), 12.5)
    bad = list(_state(store))
    bad[7] = []
    with pytest.raises(TypeError, match="state\\[7\\] must be a dict"):
        function(store, message, tuple(bad))


@needs_native
def test_native_put_fast_refuses_a_result_class_without_the_slots(store):
    class Other:
        pass
    bad = list(_state(store))
    bad[8] = Other
    with pytest.raises(TypeError, match="PutMessageResult's fields"):
        put_fast_module.put_fast(store, Message("TopicA", b"x", 1), tuple(bad))


def test_puts_from_threads_all_land_once(tmp_path):
    """Two threads putting at once: each put lands exactly once (the fast path declines a held lock
    and the Python path waits for it)."""
    opened = MessageStore.open(small_config(tmp_path, mapped_file_size_commit_log=1 << 20))
    try:
        opened.put_message(Message("TopicA", b"first", 0))
        opened.put_message(Message("TopicA", b"first", 1))
        results = {0: [], 1: []}

        def worker(queue_id):
            for number in range(400):
                results[queue_id].append(opened.put_message(Message("TopicA", b"z" * number, queue_id)))
        threads = [threading.Thread(target=worker, args=(q,)) for q in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for queue_id in (0, 1):
            assert [r.queue_offset for r in results[queue_id]] == list(range(1, 401))
        offsets = sorted(r.wrote_offset for q in (0, 1) for r in results[q])
        sizes = {r.wrote_offset: r.wrote_bytes for q in (0, 1) for r in results[q]}
        assert all(b == a + sizes[a] for a, b in zip(offsets, offsets[1:]))
    finally:
        opened.close()


@needs_native
def test_the_fuzz_target_agrees_with_the_twin_unsanitized():
    """tests/kernel_fuzz/put_fast_target.py's executions, here on the ordinary build."""
    import collections

    from tests.kernel_fuzz import put_fast_target
    from tests.kernel_fuzz.edges import Disagreement, outcome
    fuzzer = type("Fuzzer", (), {})()
    fuzzer.rng, fuzzer.native = random.Random(5), kernel._native
    fuzzer.executions, fuzzer.compared = collections.Counter(), collections.Counter()
    for _ in range(2000):
        put_fast_target.put_fast(fuzzer, outcome, Disagreement)
    assert fuzzer.compared["put_fast"] == 2000


class _BusyLock:
    """A put lock whose first `busy` try-acquires fail, as while a put on the Python path holds it."""

    def __init__(self, busy: int):
        self.busy = busy
        self.tries = 0
        self.held = False

    def acquire(self, blocking=True):
        self.tries += 1
        if self.tries <= self.busy:
            return False
        self.held = True
        return True

    def release(self):
        assert self.held
        self.held = False


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
@pytest.mark.parametrize("busy, puts", [(0, True), (3, True), (64, True), (65, False)])
def test_put_fast_waits_a_few_gil_hand_offs_for_a_busy_put_lock(store, function, busy, puts):
    """A busy put lock is tried again after giving the GIL up, PUT_LOCK_YIELDS (64) times; only
    then the Python path waits for it (declining at once made a convoy of producers)."""
    lock = _BusyLock(busy)
    state = _state(store)
    state = state[:5] + (lock,) + state[6:]
    before = _snapshot(store)
    store.clock_ms.now = 1_700_000_123_456
    answer = function(store, Message("TopicA", b"x", 1), state)
    assert lock.tries == min(busy, 64) + 1 and not lock.held
    if puts:
        assert type(answer) is PutMessageResult and answer.ok
        assert store.look_message_by_offset(answer.wrote_offset).body == b"x"
    else:
        assert answer == 1_700_000_123_456 and _snapshot(store) == before


def test_sync_flush_puts_take_the_fast_path_and_wait_for_their_sync(tmp_path, monkeypatch):
    """Under SYNC_FLUSH a put is placed by put_fast, then acknowledged once the group commit
    covers it (StoreServices.await_flush); with a flush that does not come in time, the record
    stays and the answer is FLUSH_DISK_TIMEOUT."""
    config = small_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    with MessageStore.open(config) as store:
        assert store.put_message(Message("TopicA", b"first", 1)).ok     # notes the queue
        slow_path = []
        monkeypatch.setattr(store, "_put_one", lambda *a: slow_path.append(a))
        result = store.put_message(Message("TopicA", b"second", 1))
        assert result.ok and not slow_path
        assert store.pointers()["flushed"] >= result.wrote_offset + result.wrote_bytes
        store.services.flush_service.group.halt()      # no more syncs
        store.services.flush_service.shutdown()
        late = store.put_message(Message("TopicA", b"late", 1))
        assert late.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and not slow_path
        assert late.error == "flush did not complete in time"
        assert store.look_message_by_offset(late.wrote_offset).body == b"late"


@pytest.mark.parametrize("function", FAST_FUNCTIONS)
def test_a_born_time_given_is_used_instead_of_the_clock(store, function):
    result = function(store, Message("TopicA", b"b", 1), _state(store), 1_600_000_000_123)
    assert result.ok and store.clock_ms() != 1_600_000_000_123
    assert store.look_message_by_offset(result.wrote_offset).born_timestamp == 1_600_000_000_123
    assert result.store_timestamp == store.clock_ms()   # the store time still read


def test_a_new_topics_first_message_takes_the_fast_path_on_a_second_try(tmp_path, monkeypatch):
    # The first try declines (the topic is not validated yet) and answers its born time; the
    # store validates the topic and tries again with that time: no Python put path.
    clock = FakeClock(step_ms=1)
    opened = MessageStore.open(small_config(tmp_path), clock_ms=clock)
    try:
        opened.put_message(Message("TopicA", b"first", 1))
        if opened._put_fast is None:
            pytest.skip("no fast path here (the kernel is not built)")
        tries = []
        monkeypatch.setattr(message_store_module, "put_fast",
                            lambda *args: tries.append(len(args)) or put_fast_module.put_fast(*args))

        def no_python_path(*args):
            raise AssertionError("the Python put path ran")
        monkeypatch.setattr(opened, "_put_one", no_python_path)
        before = clock.now
        result = opened.put_message(Message("TopicNeverSeenBefore", b"x", 3))
        assert result.ok and tries == [3, 4]
        found = opened.look_message_by_offset(result.wrote_offset)
        assert found.born_timestamp == before     # the time the first try read, once
        assert found.topic == "TopicNeverSeenBefore"
        assert opened.topics.get("TopicNeverSeenBefore").write_queue_nums == 8
        monkeypatch.undo()
        refused = opened.put_message(Message("bad topic!", b"x", 1))   # illegal: no second try
        assert not refused.ok and "topic" in refused.error
    finally:
        opened.close()
