"""The fuzz driver's `group_commit` target (store/kernel/c/group_commit.c) against its twin
(store/kernel/group_commit.py's `GroupCommitPy`), also run unsanitized by tests/test_group_commit.py.

Input: a random schedule on one sanitized `GroupCommit`: 1-6 producer threads waiting for random
offsets with timeouts of 0-20 ms, a flusher thread looping `run` with a random segment limit, idle
and tick times (its syncs through a hook that sometimes fails), and the main thread's random
`release`, `poke`, `halt` or `stop` calls; then everything released and joined. Checked: every True
answer is covered by `flushed` at its return, every thread ends, nobody is left waiting, `flushed`
never goes back, and a failing sync makes `run` raise. Under ASan a waiter touched after its
producer's frame is gone (the waiters live on the producers' stacks) is a report. An argument
edge (wrong type, negative, out-of-range, a closed descriptor) is run through the C and the twin
and their outcomes compared.
"""

from __future__ import annotations

import tempfile
import threading
import time

from store.kernel import group_commit as gc
from tests.kernel_fuzz.edges import INT64_EDGES, OUT_OF_RANGE


def produce(group, plan, wrong: list) -> None:
    """A producer: `wait(offset, timeout_ms)` for each of `plan`; a True answer not covered by
    `flushed` when it returns goes to `wrong` (tests/test_group_commit.py runs it too)."""
    for offset, timeout_ms in plan:
        ok = group.wait(offset, timeout_ms)
        if ok and group.flushed < offset:
            wrong.append((offset, group.flushed))


def _argument_edges(fuzzer, outcome, disagreement, native_type) -> None:
    rng = fuzzer.rng
    values = INT64_EDGES + OUT_OF_RANGE + [0, 1, 2**31 - 1, 2**31, 86_400_000, 86_400_001,
                                           1.5, "1", None]
    name = rng.choice(["wait", "run", "release"])
    arity = {"wait": 2, "run": 4, "release": 1}[name]
    count = arity if rng.random() < 0.9 else rng.randrange(0, arity + 2)
    args = [rng.choice(values) for _ in range(count)]
    if name == "run" and count == arity and rng.random() < 0.5:
        args[0] = 987_654                   # not an open descriptor: EBADF from dup
    # Never sleep on an edge input: a valid wait gets no time, a valid run no idle time.
    def valid(value):
        return type(value) is int and 0 <= value < 2**63
    if name == "wait" and count == arity and valid(args[1]):
        args[1] = 0
    if name == "run" and count == arity and valid(args[2]) and args[2] <= 86_400_000:
        args[2] = 0
    fuzzer.last_input = {"target": "group_commit", "call": name, "args": [repr(a) for a in args]}

    def call(group):
        return getattr(group, name)(*args)

    got = outcome(call, native_type())
    want = outcome(call, gc.GroupCommitPy())
    fuzzer.compared["group_commit"] += 1
    if got != want:
        raise disagreement(f"group_commit {name}: C {got} != twin {want}")


def group_commit(fuzzer, outcome, disagreement) -> None:
    """One execution: a schedule on the sanitized GroupCommit (or an argument edge, compared)."""
    rng = fuzzer.rng
    native_type = fuzzer.native.GroupCommit
    fuzzer.executions["group_commit"] += 1
    if rng.random() < 0.3:
        _argument_edges(fuzzer, outcome, disagreement, native_type)
        return
    fail_every = rng.choice([0, 0, 0, 3, 7])
    syncs = [0]

    def sync(fd):
        syncs[0] += 1
        if fail_every and syncs[0] % fail_every == 0:
            raise OSError(5, "Input/output error")

    group = native_type(sync=sync) if rng.random() < 0.8 else native_type()
    producers = rng.randrange(1, 7)
    plans = [[(rng.randrange(1, 300), rng.choice([0, 1, 5, 20])) for _ in range(rng.randrange(1, 12))]
             for _ in range(producers)]
    limit = rng.choice([50, 150, 1 << 40])
    idle_ms, tick_ms = rng.choice([0, 1, 3]), rng.choice([0, 1, 5])
    fuzzer.last_input = {"target": "group_commit", "plans": plans, "limit": limit,
                         "idle_ms": idle_ms, "tick_ms": tick_ms, "fail_every": fail_every}
    wrong, errors, seen = [], [], [0]
    done = threading.Event()
    with tempfile.TemporaryFile() as handle:
        fd = handle.fileno()

        def flusher():
            while not done.is_set():
                try:
                    reason, flushed, _ = group.run(fd, limit, idle_ms, tick_ms)
                except OSError:
                    continue
                except Exception as error:          # anything else is a defect
                    errors.append(repr(error))
                    return
                if flushed < seen[0]:
                    errors.append(f"flushed went back: {flushed} < {seen[0]}")
                seen[0] = flushed
                if reason == gc.LIMIT:
                    group.release(limit + rng.randrange(0, 200))   # the caller's own flush
                if reason == gc.HALTED:
                    return

        threads = [threading.Thread(target=produce, args=(group, plan, wrong)) for plan in plans]
        runner = threading.Thread(target=flusher)
        runner.start()
        for thread in threads:
            thread.start()
        for _ in range(rng.randrange(0, 4)):
            time.sleep(rng.choice([0, 0.0005, 0.002]))
            action = rng.choice(["release", "poke", "halt", "stop"])
            if action == "release":
                group.release(rng.randrange(0, 300))
            else:
                getattr(group, action)()
        for thread in threads:
            thread.join(30)
        done.set()
        group.halt()
        runner.join(30)
        alive = [t for t in threads + [runner] if t.is_alive()]
    if alive or wrong or errors or group.waiting != 0:
        raise disagreement(f"group_commit: alive={len(alive)} wrong={wrong[:3]} errors={errors[:3]} "
                           f"waiting={group.waiting}")
    fuzzer.compared["group_commit"] += 1
