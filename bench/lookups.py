"""Scenario 4, Lookups on a store of at least 1 M messages (full size): `query_message` by key (a
random one of the two business keys or the unique key of a random message) and
`get_offset_in_queue_by_time` (a random queue, a random time between the first and the last store
time). Ops/s and p50/p99 latency per operation.

Reference: none in C. We run a Python floor instead, `bisect` over an in-memory sorted list of the same
store timestamps (what a time lookup costs with the data already in a Python list), to show how much of
our latency is the interpreter and how much is the store; the goals are absolute (p99 < 50 us).

    python -m bench.lookups [--size smoke|full] [--reuse DIR]

`--reuse DIR` keeps the store in DIR (under /tmp) and opens it again on the next run with the same
size, skipping the ~2-minute build; without it the store is built in a scratch dir and deleted.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import random
import sys
import time

from bench import common
from bench.pull import build_store

QUEUES = 8
BODY_BYTES = 128
GOAL_P99_US = 50.0
REUSE_MARKER = "bench-lookups.json"   # written into a --reuse dir once its store is complete

_reuse_dir: str | None = None          # set by main() from --reuse


@contextlib.contextmanager
def _store_root(args):
    """The --reuse dir when given (never deleted), else a scratch dir (deleted afterwards)."""
    if _reuse_dir is None:
        with common.scratch_dir(args, "lookups") as root:
            yield root
        return
    root = os.path.abspath(_reuse_dir)
    assert not os.path.realpath(root).startswith(common.REPO_ROOT + os.sep), "never bench inside the repo"
    os.makedirs(root, exist_ok=True)
    yield root


def _open_or_build(root: str, count: int):
    """(open store, build seconds or None when an earlier complete store was reused)."""
    marker = os.path.join(root, REUSE_MARKER)
    wanted = {"count": count, "body_bytes": BODY_BYTES, "queues": QUEUES}
    if _reuse_dir is not None and os.path.exists(marker):
        with open(marker) as f:
            if json.load(f) == wanted:
                from store.message_store import MessageStore
                return MessageStore.open(common.store_config(root)), None
        raise SystemExit(f"{root} holds a store of another size ({marker}); use another --reuse dir")
    if _reuse_dir is not None and os.listdir(root):
        raise SystemExit(f"{root} is not empty and has no {REUSE_MARKER}; use an empty --reuse dir")
    started = time.perf_counter()
    store = build_store(root, count, BODY_BYTES, QUEUES)
    return store, time.perf_counter() - started


def _read_files(root: str) -> None:
    """Read every file of the store once (into the page cache)."""
    for directory, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                while f.read(1 << 20):
                    pass


def _mark_complete(root: str, count: int) -> None:
    if _reuse_dir is not None:
        with open(os.path.join(root, REUSE_MARKER), "w") as f:
            json.dump({"count": count, "body_bytes": BODY_BYTES, "queues": QUEUES}, f)


def timed_ops(fn, arguments) -> tuple[float, list[float]]:
    """Run fn over the arguments; returns (ops/s, per-op latencies in us)."""
    latencies = []
    started = time.perf_counter()
    for argument in arguments:
        before = time.perf_counter()
        fn(argument)
        latencies.append((time.perf_counter() - before) * 1e6)
    return len(arguments) / (time.perf_counter() - started), latencies


def run(args, report: common.Report) -> None:
    count = 4096 if args.size == "smoke" else 1_000_000
    ops = 200 if args.size == "smoke" else 5000
    reps = common.reps_for(args)
    rng = random.Random(42)
    with _store_root(args) as root:
        store, build_s = _open_or_build(root, count)
        try:
            first_ms = store.get_earliest_message_time("BenchTopic", 0)
            last_ms = store.get_message_store_timestamp("BenchTopic", 0,
                                                        store.get_max_offset_in_queue("BenchTopic", 0) - 1)
            # the reference's data: every store timestamp of queue 0, in a Python list
            times = [store.get_message_store_timestamp("BenchTopic", 0, i)
                     for i in range(0, store.get_max_offset_in_queue("BenchTopic", 0),
                                    max(1, count // 200_000))]

            def key_args():
                out = []
                for _ in range(ops):
                    n = rng.randrange(count)
                    out.append(rng.choice((f"k{n}", f"order-{n}", f"7F0000010001B4AAC2E0{n:012X}")))
                return out

            def time_args():
                return [(rng.randrange(QUEUES), rng.randint(first_ms, last_ms)) for _ in range(ops)]

            def key_query(key):
                result = store.query_message("BenchTopic", key)
                assert result.messages, key

            def time_lookup(argument):
                queue_id, ts = argument
                store.get_offset_in_queue_by_time("BenchTopic", queue_id, ts)

            # "Warm page cache" made true: this VM reclaims idle page cache, and a reused store
            # may have been evicted since its last run (major faults showed up as the p99).
            _read_files(root)
            for argument in key_args()[:ops // 10]:
                key_query(argument)
            for argument in time_args()[:ops // 10]:
                time_lookup(argument)
            results = common.interleaved(reps, {
                "key": lambda: timed_ops(key_query, key_args()),
                "time": lambda: timed_ops(time_lookup, time_args()),
                "reference": lambda: timed_ops(lambda a: bisect.bisect_left(times, a[1]), time_args()),
            })
        finally:
            store.close()
        _mark_complete(root, count)
    ref_rates = [r[0] for r in results["reference"]]
    ref_p99 = [common.percentile(r[1], 99) for r in results["reference"]]
    for name, label in (("key", "key query"), ("time", "time lookup")):
        rates = [r[0] for r in results[name]]
        p50 = [common.percentile(r[1], 50) for r in results[name]]
        p99 = [common.percentile(r[1], 99) for r in results[name]]
        report.add(label, "throughput", "ops/s", rates, ref_rates, reference_name="Python bisect")
        report.add(label, "latency p50", "us", p50, higher_is_better=False)
        row = report.add(label, "latency p99", "us", p99, ref_p99, reference_name="Python bisect",
                         higher_is_better=False)
        report.goal(row, f"p99 < {GOAL_P99_US:.0f} us on >= 1M msgs",
                    count >= 1_000_000 and sorted(p99)[len(p99) // 2] < GOAL_P99_US)
    built = f"built in {build_s:.0f} s" if build_s is not None else f"reused from {_reuse_dir}"
    report.notes.append(f"store of {count:,} messages of {BODY_BYTES} B in {QUEUES} queues (3 index keys "
                        f"each), {built} with batch-32 puts; {ops} ops per repetition; "
                        "warm page cache (every store file read once first) and an untimed warm-up of "
                        f"{ops // 10} ops of each kind.")
    if build_s is not None:
        report.extra["store_build_s"] = build_s


_main = common.scenario_main("lookups", __doc__.splitlines()[0], run)


def main(argv=None):
    """`common.scenario_main` plus `--reuse DIR` (parsed here: the shared parser has no such option)."""
    global _reuse_dir
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--reuse", default=None)
    known, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if "-h" in rest or "--help" in rest:
        print("lookups also takes --reuse DIR: keep the store in DIR and reuse it on the next run")
    _reuse_dir = known.reuse
    try:
        return _main(rest)
    finally:
        _reuse_dir = None

if __name__ == "__main__":
    main()
