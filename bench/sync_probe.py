"""Where the time of one SYNC_FLUSH group commit goes (issue #17): a diagnostic, not a scenario.

Runs N producer threads doing single 1 KiB SYNC_FLUSH puts for a few seconds and reports, besides
msg/s and p50/p99 of the puts:

- `sync`: each group's fdatasync in the group commit loop (store/kernel/group_commit.py, its
  `keep_history`), p50/p90 in ms;
- `gap`: the loop's time between the end of one sync and the start of the next (waking the
  producers it covered, waiting for the next to arrive), p50/p90 in ms;
- `group`: producers released per sync (mean, p50), and bytes per sync;
- the process's CPU per message (user and system) and its voluntary/involuntary context switches
  per message, from getrusage.

    python -m bench.sync_probe [--producers 32] [--seconds 4] [--reps 3] [--switch-interval S]

Nothing in the store is changed: it asks the running store's group commit to keep its syncs'
figures (syncs the service's own thread makes, at a segment roll or for puts that do not wait,
are not in them).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import threading
import time

from bench import common


def _q(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else float("nan")


def probe_round(producers: int, seconds: float, workdir: str | None = None) -> dict:
    from store.message_store import MessageStore
    args = argparse.Namespace(workdir=workdir)
    with common.scratch_dir(args, "syncprobe") as root:
        store = MessageStore.open(common.store_config(root, flush_disk_type="SYNC_FLUSH"))
        try:
            service = store.services.flush_service
            queue = service.queue
            group = service.group      # the group commit loop keeps each sync's figures
            group.keep_history(1 << 20)
            per_thread = max(200, 40_000 // producers)
            work = [common.make_messages(per_thread, 1024, queue_of=lambda n, p=p: p % 8,
                                         start=p * 200_000) for p in range(producers)]
            latencies: list[list[float]] = [[] for _ in range(producers)]
            stop_at = [0.0]

            def producer(index: int) -> None:
                lat = latencies[index]
                for message in work[index]:
                    before = time.perf_counter()
                    result = store.put_message(message)
                    after = time.perf_counter()
                    assert result.ok, result.status
                    lat.append((after - before) * 1e6)
                    if after >= stop_at[0]:
                        return

            threads = [threading.Thread(target=producer, args=(i,)) for i in range(producers)]
            flushed_before = queue.flushed_where
            group.take_history()
            usage_before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            stop_at[0] = started + seconds
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
            usage = resource.getrusage(resource.RUSAGE_SELF)
            flushed_bytes = queue.flushed_where - flushed_before
            history = group.take_history()
        finally:
            store.close()
    syncs = [record[0] / 1e9 for record in history]
    gaps = [record[1] / 1e9 for record in history if record[1]]
    groups = [record[2] for record in history]
    sync_count = len(history)
    all_lat = [v for lat in latencies for v in lat]
    messages = len(all_lat)
    return {
        "msg_per_s": messages / elapsed, "p50_us": _q(all_lat, 0.5), "p99_us": _q(all_lat, 0.99),
        "syncs": sync_count, "sync_ms_p50": _q(syncs, 0.5) * 1e3, "sync_ms_p90": _q(syncs, 0.9) * 1e3,
        "gap_ms_p50": _q(gaps, 0.5) * 1e3, "gap_ms_p90": _q(gaps, 0.9) * 1e3,
        "group_mean": statistics.fmean(groups) if groups else 0.0, "group_p50": _q(groups, 0.5),
        "released": sum(groups), "messages": messages,
        "kib_per_sync": flushed_bytes / 1024 / max(1, sync_count),
        "user_us_per_msg": (usage.ru_utime - usage_before.ru_utime) / max(1, messages) * 1e6,
        "sys_us_per_msg": (usage.ru_stime - usage_before.ru_stime) / max(1, messages) * 1e6,
        "vcsw_per_msg": (usage.ru_nvcsw - usage_before.ru_nvcsw) / max(1, messages),
        "ivcsw_per_msg": (usage.ru_nivcsw - usage_before.ru_nivcsw) / max(1, messages),
    }


FIELDS = ("msg_per_s", "p50_us", "p99_us", "syncs", "sync_ms_p50", "sync_ms_p90", "gap_ms_p50",
          "gap_ms_p90", "group_mean", "group_p50", "kib_per_sync", "user_us_per_msg",
          "sys_us_per_msg", "vcsw_per_msg", "ivcsw_per_msg")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for the run (default: left as it is)")
    parser.add_argument("--workdir", default=None, help=f"scratch parent (default {tempfile.gettempdir()})")
    args = parser.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    print(f"switch interval {sys.getswitchinterval()} s, {args.producers} producers, "
          f"{args.seconds} s per rep", flush=True)
    rounds = [probe_round(args.producers, args.seconds, args.workdir) for _ in range(args.reps)]
    for field in FIELDS:
        values = sorted(r[field] for r in rounds)
        print(f"{field:16} min/median/max {values[0]:10.3f} {values[len(values) // 2]:10.3f} "
              f"{values[-1]:10.3f}")


if __name__ == "__main__":
    main()
