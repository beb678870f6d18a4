"""Scenario 2, SYNC_FLUSH with group commit: 1, 4 and 32 producer threads, single 1 KiB puts, each
waiting for its flush. Throughput and per-put latency (p50/p99).

Reference: `fsync_lat DIR mmap COUNT BATCH_BYTES`, a memcpy into an mmap plus msync of the same size as
our average group commit (bytes flushed / group commits in the same repetition, rounded up to 4 KiB).
Its ceiling in messages/s is syncs/s x messages per group commit; its latency is one sync.

    python -m bench.sync_flush [--size smoke|full]
"""

from __future__ import annotations

import threading
import time

from bench import common

PRODUCERS = (1, 4, 32)
BODY_BYTES = 1024
GOAL_32 = 27_000


def ours_round(args, producers: int, duration_s: float) -> dict:
    from store.message_store import MessageStore
    per_producer = 200_000
    with common.scratch_dir(args, "sync") as root:
        store = MessageStore.open(common.store_config(root, flush_disk_type="SYNC_FLUSH"))
        try:
            # enough for the duration at a few k msg/s in all; more would only cost memory and time
            per_thread = max(200, (20_000 if duration_s > 1 else 1000) // producers)
            work = [common.make_messages(per_thread,
                                         BODY_BYTES, queue_of=lambda n, p=p: p % 8,
                                         start=p * per_producer) for p in range(producers)]
            latencies_us: list[list[float]] = [[] for _ in range(producers)]
            errors = []
            stop_at = [0.0]

            def producer(index):
                lat = latencies_us[index]
                for message in work[index]:
                    before = time.perf_counter()
                    result = store.put_message(message)
                    after = time.perf_counter()
                    if not result.ok:
                        errors.append(result.status)
                        return
                    lat.append((after - before) * 1e6)
                    if after >= stop_at[0]:
                        return

            flushes_before = store.services.flush_service.flush_count
            flushed_before = store.commit_log.mapped_files.flushed_where
            threads = [threading.Thread(target=producer, args=(i,)) for i in range(producers)]
            common.settle_heap()
            started = time.perf_counter()
            stop_at[0] = started + duration_s
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
            flushes = store.services.flush_service.flush_count - flushes_before
            flushed_bytes = store.commit_log.mapped_files.flushed_where - flushed_before
        finally:
            store.close()
    assert not errors, errors[:3]
    all_lat = [v for lat in latencies_us for v in lat]
    messages = len(all_lat)
    return {"msg_per_s": messages / elapsed, "p50_us": common.percentile(all_lat, 50),
            "p99_us": common.percentile(all_lat, 99), "flushes": flushes,
            "bytes_per_flush": flushed_bytes / max(1, flushes),
            "msgs_per_flush": messages / max(1, flushes)}


def reference_round(args, bytes_per_flush: float, msgs_per_flush: float, count: int) -> dict | None:
    write_bytes = max(4096, -(-int(bytes_per_flush) // 4096) * 4096)
    with common.scratch_dir(args, "fsync") as root:
        out = common.run_reference("fsync_lat", [root, "mmap", count, write_bytes])
    if out is None:
        return None
    return {"msg_per_s": out["ops_per_s"] * msgs_per_flush, "p50_us": out["p50_us"],
            "p99_us": out["p99_us"], "write_bytes": write_bytes}


def run(args, report: common.Report) -> None:
    duration_s = 0.3 if args.size == "smoke" else 5.0
    ref_count = 50 if args.size == "smoke" else 2000
    reps = common.reps_for(args)
    for producers in PRODUCERS:
        ours, refs = [], []
        for rep in range(reps):
            # The reference needs our group size, so it runs right after ours in the same repetition.
            result = ours_round(args, producers, duration_s)
            ours.append(result)
            ref = reference_round(args, result["bytes_per_flush"], result["msgs_per_flush"], ref_count)
            if ref is not None:
                refs.append(ref)
        case = f"{producers} producers"
        ref_name = "fsync_lat mmap, same batch"
        row = report.add(case, "throughput", "msg/s", [r["msg_per_s"] for r in ours],
                         [r["msg_per_s"] for r in refs] or None, reference_name=ref_name)
        if producers == 32:
            median = sorted(r["msg_per_s"] for r in ours)[len(ours) // 2]
            report.goal(row, f">= {GOAL_32:,}", median >= GOAL_32)
        report.add(case, "latency p50", "us", [r["p50_us"] for r in ours],
                   [r["p50_us"] for r in refs] or None, reference_name=ref_name,
                   higher_is_better=False)
        report.add(case, "latency p99", "us", [r["p99_us"] for r in ours],
                   [r["p99_us"] for r in refs] or None, reference_name=ref_name,
                   higher_is_better=False)
        report.add(case, "messages per group commit", "msg", [r["msgs_per_flush"] for r in ours])
        print(f"  {case}: {sorted(r['msg_per_s'] for r in ours)[len(ours)//2]:,.0f} msg/s", flush=True)
    report.notes.append(f"{duration_s} s of puts per repetition, {BODY_BYTES} B bodies with tag, two keys "
                        "and a unique key; reference sync size = our mean bytes per group commit "
                        "rounded up to 4 KiB, reference msg/s = its syncs/s x our messages per group.")


main = common.scenario_main("sync_flush", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
