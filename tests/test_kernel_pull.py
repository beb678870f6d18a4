"""`pull_unfiltered` (store/kernel/c/pull.c) against the Python pull path it shortcuts.

It has no twin of its own: whenever it answers, the answer must be the Python path's (store level:
the whole GetMessageResult, with the C path on and off; call level: tests/kernel_fuzz/pull_target.py's
reference on random calls), and it must answer the common pulls (else it is dead weight).
"""

from __future__ import annotations

import glob
import os
import random

import pytest

from store import Message, MessageStore
from store.commitlog import read_fast, read_path
from store.commitlog.read_plan import TransferLimits
from store.consumequeue.file import queue_store
from store import kernel
from tests.engine_util import small_config
from tests.kernel_fuzz import pull_target
from tests.test_wrong_record import crafted  # noqa: F401  (the fixture)

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
FORMS = [True, False, "view", 1, 0, None]   # 1 and 0 are not True / False: raw records
CORPUS_DIR = os.path.join(os.path.dirname(__file__), "data", "kernel_corpus")


def outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as error:              # compared as the fuzz driver does
        return ("raise", type(error).__name__, str(error))


def _comparable(result):
    messages = [bytes(m) if isinstance(m, (bytes, memoryview)) else (m, repr(m))
                for m in result.messages]
    return (result.status, result.next_begin_offset, result.min_offset, result.max_offset,
            messages, [type(m) for m in result.messages], result.suggest_pulling_from_slave,
            result.skipped)


def _both(store, answered, *args, **kwargs):
    """The pull with the C path, then without it; the C path's answers are counted."""
    real = read_path.pull_unfiltered

    def counting(*call):
        got = real(*call)
        answered.append(got is not None)
        return got

    real_window = queue_store._pull_window

    def counting_window(*call):   # the one-call pull (store.kernel.pull_window) ends in the C too
        got = real_window(*call)
        answered.append(got is not None)
        return got

    def use(function):   # the facade's short path (read_fast) and get_message's own call
        read_path.pull_unfiltered = read_fast.pull_unfiltered = function
    use(counting)
    queue_store._pull_window = counting_window
    try:
        with_c = _comparable(store.get_message(*args, **kwargs))
    finally:
        use(None)
        queue_store._pull_window = real_window
    try:
        without = _comparable(store.get_message(*args, **kwargs))
    finally:
        use(real)
    assert with_c == without
    return with_c


def _fill(store, count=120, queues=2):
    for seq in range(count):
        body = os.urandom(seq % 50 + 1) + "é".encode() * (seq % 3)
        assert store.put_message(Message("T", body, queue_id=seq % queues, tags=f"t{seq % 3}",
                                         keys=f"k{seq} x", properties={"p": "ü" * (seq % 2)})).ok
    store.dispatch_pending()


@needs_native
@pytest.mark.parametrize("reopen", [False, True])
def test_store_pulls_are_the_python_paths(tmp_path, reopen):
    """Units dispatched by this process (trusted) or loaded from disk (checked), then a live tail."""
    config = small_config(tmp_path / "store")
    if reopen:
        with MessageStore.open(config) as store:
            _fill(store)
    answered = []
    with MessageStore.open(config) as store:
        if not reopen:
            _fill(store)
        _fill(store, 40)
        limit_sets = [None, TransferLimits(400, 3, 200, 2, 40, 1000),
                      TransferLimits(262144, 32, 65536, 8, 0, 1 << 30)]
        for limits in limit_sets:
            if limits is not None:
                store._limits = limits
            for decode in FORMS:
                for queue_id in (0, 1, 5):
                    for offset in (0, 1, 17, 59, 60, 200):
                        for max_msg_nums in (1, 2, 7, 32, 64):
                            for cap in (None, 100, 5000):
                                _both(store, answered, "g", "T", queue_id, offset, max_msg_nums,
                                      decode=decode, max_total_msg_size=cap)
    assert answered.count(True) > 100 and answered.count(False) > 10


@needs_native
@pytest.mark.parametrize("decode", FORMS)
def test_wrong_records_are_not_served_by_the_c_path(crafted, decode):  # noqa: F811
    answered = []
    with MessageStore.open(crafted) as store:
        for offset in range(9):
            for max_msg_nums in (1, 2, 3, 32):
                _both(store, answered, "g", "A", 0, offset, max_msg_nums, decode=decode)
                _both(store, answered, "g", "B", 0, offset, max_msg_nums, decode=decode)
    assert True in answered and False in answered


@needs_native
def test_random_calls_answer_as_the_python_path():
    rng = random.Random(11)
    seeds, starts = [], []
    scan_out = kernel.scan_buffer(64)
    for path in sorted(glob.glob(os.path.join(CORPUS_DIR, "*.bin")))[:40]:
        data = open(path, "rb").read()
        count = kernel.scan(data, 0, len(data), 0, scan_out)[0]
        seeds.append(data)
        starts.append(scan_out[:count, kernel.COL["pos"]].tolist())
    answered = 0
    for _ in range(3000):
        problem, got, args = pull_target.run(kernel._native, rng, seeds, starts, outcome)
        assert problem is None, (problem, args[1:9], args[10:16])
        answered += got
    assert answered > 300
