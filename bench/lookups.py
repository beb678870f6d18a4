"""Scenario 4, Lookups on a store of at least 1 M messages (full size): `query_message` by key (a
random one of the two business keys or the unique key of a random message) and
`get_offset_in_queue_by_time` (a random queue, a random time between the first and the last store
time). Ops/s and p50/p99 latency per operation.

Reference: none in C. We run a Python floor instead, `bisect` over an in-memory sorted list of the same
store timestamps (what a time lookup costs with the data already in a Python list), to show how much of
our latency is the interpreter and how much is the store; the goals are absolute (p99 < 50 us).

    python -m bench.lookups [--size smoke|full]
"""

from __future__ import annotations

import bisect
import random
import time

from bench import common
from bench.pull import build_store

QUEUES = 8
BODY_BYTES = 128
GOAL_P99_US = 50.0


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
    with common.scratch_dir(args, "lookups") as root:
        started = time.perf_counter()
        store = build_store(root, count, BODY_BYTES, QUEUES)
        build_s = time.perf_counter() - started
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

            results = common.interleaved(reps, {
                "key": lambda: timed_ops(key_query, key_args()),
                "time": lambda: timed_ops(time_lookup, time_args()),
                "reference": lambda: timed_ops(lambda a: bisect.bisect_left(times, a[1]), time_args()),
            })
        finally:
            store.close()
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
    report.notes.append(f"store of {count:,} messages of {BODY_BYTES} B in {QUEUES} queues (3 index keys "
                        f"each), built in {build_s:.0f} s with batch-32 puts; {ops} ops per repetition; "
                        "warm page cache.")
    report.extra["store_build_s"] = build_s


main = common.scenario_main("lookups", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
