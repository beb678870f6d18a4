"""`GroupCommit` (store/kernel/c/group_commit.c) and its twin (store/kernel/group_commit.py): the same
answers and refusals, on their own and under many producers.

* A producer returns True only once a sync (or `release`) covers its offset, False on timeout or
  after `stop()`, and leaves the waiting list either way.
* `run` syncs while producers wait, each sync taking the highest offset awaited when it began, and
  returns IDLE, LIMIT, TICK or HALTED when the module docstring says.
* Arguments are refused with the same exception and message by both.
"""

from __future__ import annotations

import os
import random
import threading
import time
import types

import pytest

from store import kernel
from store.kernel import group_commit as gc
from tests.kernel_fuzz import group_commit_target
from tests.kernel_fuzz.edges import Disagreement, outcome

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
ENGINES = [pytest.param(gc.GroupCommitPy, id="twin"),
           pytest.param(getattr(kernel._native, "GroupCommit", None), id="native",
                        marks=needs_native)]


@pytest.fixture
def fd(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(bytes(4096))
    descriptor = os.open(path, os.O_RDWR)
    yield descriptor
    os.close(descriptor)


def _until_waiting(group, count: int) -> None:
    """Until `count` producers wait on `group` (30 s at most)."""
    deadline = time.monotonic() + 30
    while group.waiting < count:
        assert time.monotonic() < deadline, f"{group.waiting} waiting, not {count}"
        time.sleep(0.001)


class _Flusher:
    """`run` looped on a thread until stopped; every (reason, flushed, syncs) kept."""

    def __init__(self, group, fd, limit=1 << 40, idle_ms=5, tick_ms=20):
        self.group, self.answers = group, []
        self._stop = threading.Event()

        def loop():
            while not self._stop.is_set():
                answer = group.run(fd, limit, idle_ms, tick_ms)
                self.answers.append(answer)
                if answer[0] == gc.HALTED:
                    break

        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def stop(self):
        self._stop.set()
        self.group.halt()
        self.thread.join(30)
        assert not self.thread.is_alive()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_wait_returns_once_a_sync_covers_it(engine, fd):
    synced = []
    group = engine(sync=lambda f: synced.append(group.waiting))
    assert group.wait(0, 0) is True and group.flushed == 0     # nothing to wait for
    flusher = _Flusher(group, fd)
    try:
        assert group.wait(100, 10_000) is True
        assert group.flushed >= 100 and synced and synced[0] == 1
        assert group.wait(50, 0) is True                     # covered already: no wait
    finally:
        flusher.stop()
    assert group.waiting == 0 and group.syncs == len(synced)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_sync_covers_the_highest_offset_awaited_when_it_began(engine, fd):
    """Producers that arrive while a sync runs join the next one: one sync per group."""
    entered, release = threading.Event(), threading.Event()
    groups = []

    def held(f):
        groups.append(group.waiting)
        entered.set()
        release.wait(30)

    group = engine(sync=held)
    flusher = _Flusher(group, fd, tick_ms=10_000)
    results = {}

    def produce(offset):
        results[offset] = group.wait(offset, 30_000)

    first = threading.Thread(target=produce, args=(10,))
    first.start()
    assert entered.wait(30)             # the first sync holds; offset 10 is its target
    late = [threading.Thread(target=produce, args=(20 + n,)) for n in range(5)]
    for thread in late:
        thread.start()
    _until_waiting(group, 6)  # the first one and the five late ones
    release.set()
    for thread in [first] + late:
        thread.join(30)
    flusher.stop()
    assert results == {10: True, 20: True, 21: True, 22: True, 23: True, 24: True}
    assert groups == [1, 5] and group.syncs == 2 and group.flushed == 24


@pytest.mark.parametrize("engine", ENGINES)
def test_a_wait_that_times_out_answers_false_and_leaves_the_list(engine):
    group = engine()
    started = time.monotonic()
    assert group.wait(10, 30) is False
    assert time.monotonic() - started >= 0.025
    assert group.waiting == 0
    group.release(10)
    assert group.wait(10, 0) is True and group.flushed == 10


@pytest.mark.parametrize("engine", ENGINES)
def test_release_wakes_only_the_producers_it_covers(engine):
    group = engine()
    results = {}
    threads = [threading.Thread(target=lambda o=o: results.__setitem__(o, group.wait(o, 30_000)))
               for o in (5, 15)]
    for thread in threads:
        thread.start()
    _until_waiting(group, 2)
    group.release(10)
    threads[0].join(30)
    assert results == {5: True} and group.waiting == 1
    group.release(3)                    # never backwards
    assert group.flushed == 10
    group.release(15)
    threads[1].join(30)
    assert results == {5: True, 15: True} and group.waiting == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_stop_makes_every_waiter_give_up_now_and_later(engine, fd):
    group = engine()
    group.release(7)
    results = []
    thread = threading.Thread(target=lambda: results.append(group.wait(100, 30_000)))
    thread.start()
    _until_waiting(group, 1)
    group.stop()
    thread.join(30)
    assert results == [False] and group.waiting == 0
    assert group.wait(200, 30_000) is False        # at once, not after the timeout
    assert group.wait(7, 30_000) is True            # flushed before the stop
    assert group.run(fd, 1000, 5, 5)[0] == gc.HALTED


@pytest.mark.parametrize("engine", ENGINES)
def test_run_says_why_it_returned(engine, fd):
    group = engine()
    reason, flushed, syncs = group.run(fd, 1000, 5, 1000)
    assert (reason, flushed, syncs) == (gc.IDLE, 0, 0)      # nobody waited for idle_ms
    group.poke()
    started = time.monotonic()
    assert group.run(fd, 1000, 10_000, 10_000)[0] == gc.IDLE    # poked: at once
    assert time.monotonic() - started < 5
    # A producer past the segment's end: LIMIT, nothing synced; the caller releases it.
    results = []
    thread = threading.Thread(target=lambda: results.append(group.wait(2000, 30_000)))
    thread.start()
    assert group.run(fd, 1000, 10_000, 10_000) == (gc.LIMIT, 0, 0)
    group.release(2000)
    thread.join(30)
    assert results == [True]
    # Syncing past tick_ms: TICK.
    stop = threading.Event()

    def produce():
        offset = 2000
        while not stop.is_set():
            offset += 1
            group.wait(offset, 30_000)

    producer = threading.Thread(target=produce)
    producer.start()
    reason, flushed, syncs = group.run(fd, 1 << 40, 10_000, 20)
    stop.set()
    group.release(1 << 40)              # the producer's last wait
    producer.join(30)
    group.halt()
    assert reason == gc.TICK and syncs >= 1 and flushed > 2000
    assert group.run(fd, 1 << 40, 10_000, 10_000)[0] == gc.HALTED


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failing_sync_raises_from_run_and_releases_nobody(engine, fd):
    def failing(f):
        raise OSError(5, "Input/output error")

    group = engine(sync=failing)
    results = []
    thread = threading.Thread(target=lambda: results.append(group.wait(10, 300)))
    thread.start()
    _until_waiting(group, 1)
    with pytest.raises(OSError, match="Input/output error"):
        group.run(fd, 1000, 1000, 1000)
    thread.join(30)
    assert results == [False] and group.flushed == 0 and group.syncs == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_many_producers_are_each_released_by_a_sync_that_covers_them(engine, fd):
    """Producers at random offsets, some with short timeouts: a True answer always comes after a
    sync or release covering it, every thread ends, and the list is empty at the end."""
    covered_at_sync = []

    def recording(f):
        covered_at_sync.append(group.flushed)
        os.fdatasync(f)

    group = engine(sync=recording)
    flusher = _Flusher(group, fd, idle_ms=2, tick_ms=5)
    rng = random.Random(11)
    plans = [[(rng.randrange(1, 5000), rng.choice([0, 1, 5000])) for _ in range(40)]
             for _ in range(12)]
    wrong = []
    threads = [threading.Thread(target=group_commit_target.produce, args=(group, plan, wrong))
               for plan in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    flusher.stop()
    assert not wrong and group.waiting == 0
    assert group.syncs == len(covered_at_sync) > 0


def _answers(engine, *calls):
    group = engine()
    return [outcome(lambda c=c: c(group)) for c in calls]


@pytest.mark.parametrize("call", [
    lambda g: g.wait(1),
    lambda g: g.wait(-1, 0),
    lambda g: g.wait(1, -5),
    lambda g: g.wait("1", 0),
    lambda g: g.wait(2**63, 0),
    lambda g: g.wait(1.5, 0),
    lambda g: g.run(0, 0, 0),
    lambda g: g.run(-1, 0, 0, 0),
    lambda g: g.run(2**31, 0, 0, 0),
    lambda g: g.run(0, 0, 86_400_001, 0),
    lambda g: g.run(0, -1, 0, 0),
    lambda g: g.release(-1),
    lambda g: g.release(None),
    lambda g: g.run(987_654, 0, 0, 0),      # not an open descriptor: EBADF from dup
])
@needs_native
def test_the_twin_refuses_what_the_c_refuses(call):
    assert _answers(gc.GroupCommitPy, call) == _answers(kernel._native.GroupCommit, call)


@needs_native
def test_both_refuse_a_sync_that_is_not_callable():
    for engine in (gc.GroupCommitPy, kernel._native.GroupCommit):
        with pytest.raises(TypeError, match="sync must be callable or None"):
            engine(sync=3)


@needs_native
def test_the_fuzz_targets_schedules_hold_unsanitized():
    """tests/kernel_fuzz/group_commit_target.py's schedules and argument edges, on the built C."""
    fuzzer = types.SimpleNamespace(rng=random.Random(23), native=kernel._native,
                                   executions={"group_commit": 0}, compared={"group_commit": 0},
                                   last_input=None)
    for _ in range(150):
        group_commit_target.group_commit(fuzzer, outcome, Disagreement)
    assert fuzzer.compared["group_commit"] == 150
