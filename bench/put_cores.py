"""Issue #17's put scenarios, end to end indexed, with the cores they use and the dispatch lag.

1 KiB bodies, one producer thread, single puts and batches of 32 (the messages of `bench.put`: a tag,
two keys, a UNIQ_KEY, 8 queues, built before the clock). Per run, on a fresh store: the end-to-end
indexed rate (until dispatch has built every consume-queue unit and index entry), the put rate, the
cores used while putting and dispatching (process CPU time / wall time, both from the first put to
the last index entry), the process CPU time per message (robust to a loaded machine) and the
dispatch lag (wall time from the last put's return to the reput offset
reaching the end). Reference: the C appender, interleaved, as in `bench.put`.

    python -m bench.put_cores [--size smoke|full] [--reps N]
"""

from __future__ import annotations

import time

from bench import common
from bench.put import _work_for, appender_reference, put_round

BODY_BYTES = 1024


def _ours(args, mode: str, count: int):
    from store.message_store import MessageStore
    work = _work_for(mode, BODY_BYTES, 1, count, 0)
    with common.scratch_dir(args, "put-cores") as root:
        store = MessageStore.open(common.store_config(root))
        try:
            common.settle_heap()
            cpu_started = time.process_time()
            put_s, indexed_s, n = put_round(store, work)
            cpu_s = time.process_time() - cpu_started
        finally:
            store.close()
    return {"indexed": n / indexed_s, "put": n / put_s, "cores": cpu_s / indexed_s,
            "lag_ms": (indexed_s - put_s) * 1000.0, "cpu_us": cpu_s / n * 1e6}


def run(args, report: common.Report) -> None:
    count = 512 if args.size == "smoke" else 20_000
    reference = appender_reference(args, BODY_BYTES, count)

    for mode in ("single", "batch32"):
        results = common.interleaved(common.reps_for(args, full=5), {
            "ours": lambda mode=mode: _ours(args, mode, count), "reference": reference})
        refs = [r for r in results["reference"] if r is not None] or None
        ours = results["ours"]
        case = f"{mode} {BODY_BYTES} B x1 thr"
        report.add(case, "end-to-end indexed", "msg/s", [r["indexed"] for r in ours], refs,
                   reference_name="C appender")
        report.add(case, "put rate", "msg/s", [r["put"] for r in ours], refs,
                   reference_name="C appender")
        report.add(case, "cores used (CPU s / wall s)", "cores", [r["cores"] for r in ours])
        report.add(case, "dispatch lag after the last put", "ms", [r["lag_ms"] for r in ours],
                   higher_is_better=False)
        report.add(case, "process CPU per message (put + dispatch)", "us", [r["cpu_us"] for r in ours],
                   higher_is_better=False)
        print(f"  {case}: done", flush=True)
    report.notes.append(f"{count} messages per run, fresh store per repetition, 64 MiB segments, "
                        "RocketMQ defaults otherwise (ASYNC_FLUSH).")


main = common.scenario_main("put_cores", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
