"""`pull_window` (store/kernel/c/pull_window.c) against its twin and against the path it shortcuts.

Call level: tests/kernel_fuzz/pull_window_target.py's random calls, C against the twin. Store level:
every pull with the one-call path on and off gives the same GetMessageResult and leaves the consume
queues' LRU in the same order, the C and the twin answer alike on each of the store's calls, and the
one-call path answers the common pulls (else it is dead weight).
"""

from __future__ import annotations

import glob
import os
import random

import pytest

from store import Message, MessageStore
from store import kernel
from store.consumequeue.file import queue_store
from store.kernel.pull_window import pull_window_twin
from tests.engine_util import small_config
from tests.kernel_fuzz import pull_window_target
from tests.kernel_fuzz.edges import outcome
from tests.test_kernel_pull import _comparable, _fill

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
CORPUS_DIR = os.path.join(os.path.dirname(__file__), "data", "kernel_corpus")


@needs_native
@pytest.mark.parametrize("seed", range(4))
def test_random_calls_match_the_twin(seed):
    rng = random.Random(seed)
    seeds, starts = [], []
    for path in sorted(glob.glob(os.path.join(CORPUS_DIR, "*.bin"))):
        data = open(path, "rb").read()
        out = kernel.scan_buffer(64)
        count = kernel._native.scan(data, 0, len(data), True, out)[0]
        seeds.append(data)
        starts.append(out[:count, kernel.COL["pos"]].tolist() or [0])

    def mutate(index):
        data = bytearray(seeds[index])
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    answered = 0
    for _ in range(1500):
        args = pull_window_target.make_args(rng, seeds, starts, mutate)
        problem, got = pull_window_target.check(kernel._native, args, outcome)
        assert problem is None, problem
        answered += got
    assert answered > 150


def _pull(store, use_window, calls, *args, **kwargs):
    real = queue_store._pull_window

    def both(*call):     # the C and its twin on the store's own arguments
        got = real(*call)
        twin = pull_window_twin(*call)
        assert pull_window_target.comparable(("ok", got)) == \
            pull_window_target.comparable(("ok", twin))
        calls.append(got is not None)
        return got
    queue_store._pull_window = both if use_window else (lambda *call: None)
    try:
        result = _comparable(store.get_message(*args, **kwargs))
    finally:
        queue_store._pull_window = real
    return result, list(store.consume_queues._mapped)


@needs_native
@pytest.mark.parametrize("reopen", [False, True])
@pytest.mark.parametrize("max_mapped", [1, 64])
def test_store_pulls_are_the_previous_paths(tmp_path, reopen, max_mapped):
    """Units dispatched by this process (trusted) or loaded from disk (checked); CQ and commit-log
    segments rolled (small_config); one queue mapped at a time or all."""
    config = small_config(tmp_path / "store")
    if reopen:
        with MessageStore.open(config) as store:
            _fill(store, 300, 3)
    calls = []
    with MessageStore.open(config) as store:
        store.consume_queues.max_mapped_queues = max_mapped
        if not reopen:
            _fill(store, 300, 3)
        _fill(store, 30, 3)
        for decode in (True, False, "view"):
            for queue_id in (0, 1, 0, 2, 7):
                for offset in (0, 1, 33, 99, 100, 109, 110, 200, -1):
                    for max_msg_nums in (1, 2, 32, 63, 64):
                        args = ("g", "T", queue_id, offset, max_msg_nums)
                        with_window = _pull(store, True, calls, *args, decode=decode)
                        without = _pull(store, False, [], *args, decode=decode)
                        assert with_window == without, args
                        again = _pull(store, True, calls, *args, decode=decode)
                        assert again == with_window, args
    assert calls.count(True) > 100 and calls.count(False) > 10


@needs_native
def test_a_queue_not_touched_last_is_touched_when_the_call_answers(tmp_path):
    """A queue in the LRU but not at its end is moved there when the one call answers (as the full
    path's touch); when it says None, nothing is touched (the full path decides)."""
    with MessageStore.open(small_config(tmp_path / "store")) as store:
        _fill(store, 40, 2)
        cq = store.consume_queues
        assert cq.pull_window("T", 0, 0, 2)[2] is not None
        assert cq.pull_window("T", 1, 0, 2)[2] is not None     # queue 1 is the MRU
        assert list(cq._mapped) == [("T", 0), ("T", 1)]
        rest = (b"T", store.commit_log.mapped_files.files,
                store.commit_log.mapped_files.file_size_bytes, 4, 1 << 20, 32, 1 << 20, 32,
                1 << 40, 0, None)
        assert cq.pull_direct("nope", 0, 0, *rest) is None
        assert cq.pull_direct("T", 0, 20, *rest) is None          # at the max offset: no touch
        assert list(cq._mapped) == [("T", 0), ("T", 1)] and cq._most_recent is cq.queue("T", 1)
        got = cq.pull_direct("T", 0, 0, *rest)
        assert got is not None and got[2] == 4 and got[:2] == (0, 20) and not got[6]
        assert list(cq._mapped) == [("T", 1), ("T", 0)] and cq._most_recent is cq.queue("T", 0)
        assert [bytes(r) for r in got[4]] == [bytes(m) for m in store.get_message(
            "g", "T", 0, 0, 4, decode=False).messages]
        cq.queue("T", 0)._mapped_files.files[0].destroyed = True
        try:
            assert cq.pull_direct("T", 0, 0, *rest) is None       # a destroyed segment
        finally:
            cq.queue("T", 0)._mapped_files.files[0].destroyed = False


@pytest.mark.parametrize("reopen", [False, True])
def test_twin_hands_pull_unfiltered_what_the_python_steps_find(tmp_path, reopen):
    """The twin's window, segment, ends and check arguments are those of
    `FileConsumeQueue.pull_window` and `MappedFileQueue.end_and_file` (runs without the C too)."""
    config = small_config(tmp_path / "store")
    if reopen:
        with MessageStore.open(config) as store:
            _fill(store, 300, 3)
    with MessageStore.open(config) as store:
        if not reopen:
            _fill(store, 300, 3)
        mapped_files = store.commit_log.mapped_files
        seen = 0
        for queue_id in (0, 1, 2):
            queue = store.consume_queues.queue("T", queue_id)
            for offset in (-1, 0, 1, 33, 98, 99, 100, 101):
                for max_msg_nums in (1, 7, 32, 63, 64):
                    for form in (0, 1, 2):
                        calls = []
                        files = queue.mapped_files
                        got = pull_window_twin(
                            files.files, files.file_size_bytes, queue.min_logic_offset,
                            queue.trusted_from, offset, queue_id, b"T", mapped_files.files,
                            mapped_files.file_size_bytes, max_msg_nums, 1, 2, 3, 4, 5, form, "d",
                            unfiltered=lambda *call: calls.append(call) or (1, 7, ["r"]))
                        low, high, data, trusted_from = queue.pull_window(offset, max_msg_nums + 1)
                        if not 0 < max_msg_nums < 64 or data is None or not low <= offset < high:
                            assert got is None and calls == []
                            continue
                        end, mapped, readable, buffer = mapped_files.end_and_file(
                            int.from_bytes(data[:8], "big", signed=True))
                        checked = offset < trusted_from
                        assert got == (low, high, 1, 7, ["r"], end, checked)
                        assert len(calls) == 1 and calls[0][9] is buffer
                        assert calls[0][:9] + calls[0][10:] == (
                            data, max_msg_nums, 1, 2, 3, 4, None, end, 5, mapped.file_from_offset,
                            readable, form, queue_id if checked else None, offset,
                            b"T" if checked and form != 2 else None, "d")
                        seen += 1
        assert seen > 100
