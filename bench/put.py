"""Scenario 1, Put: single and batch-32 puts of 128 B / 1 KiB / 4 KiB bodies from 1 and 4 producer
threads, ASYNC_FLUSH. Two rates per run: the put rate (until the last put returned) and the end-to-end
indexed rate (until dispatch has built the consume queues and the index, so every message can be
pulled and found by key). Every message has a tag, two keys and a unique key.

Reference: the C appender (`appender DIR BODY TOTAL_MB 1 0 8 64`: CRC on, cold pages, 8 queues, 64 MiB
segments), which encodes the same v1 records plus one CQ unit each, as fast as C can, but builds no
index. Each repetition runs ours on a fresh store, then the appender, interleaved.

    python -m bench.put [--size smoke|full]
"""

from __future__ import annotations

import math
import threading
import time

from bench import common

BODY_SIZES = (128, 1024, 4096)
THREADS = (1, 4)
MODES = ("single", "batch32")
BATCH = 32
GOALS = {"single": (172_000, 100_000), "batch32": (400_000, 250_000)}   # goal, milestone


def _work_for(mode: str, body_bytes: int, threads: int, count: int, start: int):
    """Per thread: a list of put calls (one message, or a batch of 32 of one queue)."""
    per_thread = count // threads
    work = []
    for t in range(threads):
        first = start + t * per_thread
        if mode == "single":
            msgs = common.make_messages(per_thread, body_bytes, queue_of=lambda n, t=t: t * 2 + n % 2,
                                        start=first)
            work.append([("one", m) for m in msgs])
        else:
            msgs = common.make_messages(per_thread, body_bytes, start=first,
                                        queue_of=lambda n, t=t, f=first: t * 2 + ((n - f) // BATCH) % 2)
            work.append([("batch", msgs[i:i + BATCH]) for i in range(0, len(msgs), BATCH)])
    return work


def put_round(store, work) -> tuple[float, float, int]:
    """Run the producers; returns (put seconds, end-to-end indexed seconds, messages). Callers
    settle the heap first (`common.settle_heap`), outside their CPU accounting."""
    errors = []

    def producer(calls):
        for kind, item in calls:
            result = store.put_message(item) if kind == "one" else store.put_messages(item)
            if not result.ok:
                errors.append(result.error)
                return

    threads = [threading.Thread(target=producer, args=(calls,)) for calls in work]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    put_s = time.perf_counter() - started
    common.wait_dispatched(store)
    indexed_s = time.perf_counter() - started
    assert not errors, errors[:3]
    messages = sum(1 if kind == "one" else len(item) for calls in work for kind, item in calls)
    return put_s, indexed_s, messages


def one_case(args, mode: str, body_bytes: int, threads: int, count: int):
    from store.message_store import MessageStore

    def ours():
        work = _work_for(mode, body_bytes, threads, count, 0)
        with common.scratch_dir(args, "put") as root:
            store = MessageStore.open(common.store_config(root))
            try:
                common.settle_heap()
                put_s, indexed_s, n = put_round(store, work)
            finally:
                store.close()
        return n / put_s, n / indexed_s

    return common.interleaved(common.reps_for(args),
                              {"ours": ours, "reference": appender_reference(args, body_bytes, count)})


def appender_reference(args, body_bytes: int, count: int):
    """The C appender's run for `count` records of `body_bytes` (records/s, None without it)."""
    # 91 fixed bytes + topic + the properties our messages carry (TAGS, KEYS, UNIQ_KEY)
    record_bytes = 91 + body_bytes + len("BenchTopic") + 80
    total_mb = max(8, math.ceil(count * record_bytes / (1 << 20)))

    def reference():
        with common.scratch_dir(args, "appender") as root:
            out = common.run_reference("appender", [root, body_bytes, total_mb, 1, 0, 8, 64])
        return None if out is None else out["rec_per_s"]
    return reference


def run(args, report: common.Report) -> None:
    count = 192 if args.size == "smoke" else 20_000
    report.notes.append(f"{count} messages per run; fresh store per repetition; 64 MiB segments; "
                        "RocketMQ defaults otherwise (index 5M slots / 20M entries, ASYNC_FLUSH).")
    for mode in MODES:
        for body_bytes in BODY_SIZES:
            for threads in THREADS:
                case = f"{mode} {body_bytes} B x{threads} thr"
                results = one_case(args, mode, body_bytes, threads, count)
                refs = [r for r in results["reference"] if r is not None] or None
                put_rates = [r[0] for r in results["ours"]]
                indexed_rates = [r[1] for r in results["ours"]]
                report.add(case, "put rate", "msg/s", put_rates, refs, reference_name="C appender")
                row = report.add(case, "end-to-end indexed", "msg/s", indexed_rates, refs,
                                 reference_name="C appender")
                if body_bytes == 1024 and threads == 1:
                    goal, milestone = GOALS[mode]
                    median = sorted(indexed_rates)[len(indexed_rates) // 2]
                    report.goal(row, f">= {goal:,} (milestone {milestone:,})", median >= goal)
                print(f"  {case}: indexed median {sorted(indexed_rates)[len(indexed_rates)//2]:,.0f} "
                      f"msg/s", flush=True)
    report.notes.append("The C appender builds no index and takes no locks: the ratio is our share of "
                        "the machine's write-path ceiling, not a like-for-like comparison.")


main = common.scenario_main("put", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
