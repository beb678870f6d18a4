"""Scenario: 5.x timer messages (TimerService) with many pending timers, at two sizes.

Each size runs in its own child process, so each reports its own memory. The child opens a 5.x store
with a settable clock and no background services, puts N messages with `TIMER_DELAY_SEC` spread over
1 s .. 1 h (the three kinds cost the same after the put hook), and dispatches them into
`rmq_sys_wheel_timer`. Then, measured separately:

* enqueue: `enqueue_once()` until the queue is drained: each unit's record is read back, a 52-byte
  timer-log unit appended and its wheel slot updated (`doEnqueue`), then one flush (timer log, changed
  slots, timercheck);
* dequeue + deliver: the clock jumps past the longest delay and `dequeue_once()` runs until every
  timer is delivered: each slot's chain walked, each record read, rewritten and put to its real topic;
* memory: the process's anonymous RSS (`RssAnon`: heap, numpy, Python objects) right before enqueue
  and its peak growth through enqueue and dequeue, and the peak RSS of the whole child (`VmHWM`,
  which also counts the mapped commit-log and timer-log pages the puts and units touch). The timer
  service keeps no per-timer state in memory (the wheel is read and written with pread/pwrite, the
  timer log is a mapped file), so the anonymous growth should not depend on N.

    python -m bench.timer_bench [--size smoke|full]
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from bench import common

BODY_BYTES = 256
LONGEST_DELAY_S = 3600
SIZES = {"smoke": (2_000, 10_000), "full": (10_000, 100_000)}


def _rss_anon_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


class _AnonPeak:
    """Samples RssAnon every 5 ms on a thread; `peak_kib` is the largest value seen."""

    def __init__(self):
        self.peak_kib = _rss_anon_kib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.005):
            self.peak_kib = max(self.peak_kib, _rss_anon_kib())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak_kib, _rss_anon_kib())


def child_round(workdir: str | None, count: int) -> dict:
    """One size, in this process (run as a child by `run`)."""
    from store.api import Message
    from store.message_store import MessageStore
    args = type("Args", (), {"workdir": workdir})()
    out = {"count": count}
    with common.scratch_dir(args, "timer") as root:
        clock_ms = [1_800_000_000_000]
        store = MessageStore.open(common.store_config(root, store_format="5.x"),
                                  clock_ms=lambda: clock_ms[0], start_services=False)
        try:
            timer = store.services.timer
            template = common.make_messages(count, BODY_BYTES, topic="TimerBench", queues=8)
            started = time.perf_counter()
            for n, m in enumerate(template):
                delay = str(1 + n * 7919 % LONGEST_DELAY_S)
                assert store.put_message(Message(m.topic, m.body, queue_id=m.queue_id, tags=m.tags,
                                                 keys=m.keys, properties={**m.properties,
                                                                          "TIMER_DELAY_SEC": delay})).ok
                if n % 1000 == 999:
                    store.dispatch_pending()     # as the reput service keeps up with puts
            store.dispatch_pending()
            out["put"] = count / (time.perf_counter() - started)
            anon_before = _rss_anon_kib()
            sampler = _AnonPeak()
            started = time.perf_counter()
            while timer.enqueue_once():
                pass
            out["enqueue"] = count / (time.perf_counter() - started)
            started = time.perf_counter()
            timer.flush()
            out["flush_ms"] = (time.perf_counter() - started) * 1000
            assert timer.enqueued_units == count and timer.curr_queue_offset == count
            clock_ms[0] += (LONGEST_DELAY_S + 2) * 1000
            dequeue_s = 0.0
            delivered = 0
            for _ in range(count + LONGEST_DELAY_S + 10):     # bounded: each round delivers or ends
                started = time.perf_counter()
                timer.enqueue_once()                          # moves the write time, as RocketMQ's
                done = timer.dequeue_once()
                dequeue_s += time.perf_counter() - started
                store.dispatch_pending()     # the reput service of a running store (not timed)
                delivered += done
                if done == 0 and timer.curr_read_time_ms >= timer.curr_write_time_ms:
                    break
            out["dequeue"] = count / dequeue_s
            assert delivered == count, (delivered, count)
            out["anon_growth_mib"] = (sampler.stop() - anon_before) / 1024
            out["anon_before_mib"] = anon_before / 1024
        finally:
            store.close()
    out["peak_rss_mib"] = common.own_peak_rss_mib()
    return out


def _in_child(args, count: int) -> dict:
    command = [sys.executable, "-m", "bench.timer_bench", "--child", str(count)]
    if args.workdir:
        command += ["--child-workdir", args.workdir]
    done = subprocess.run(command, cwd=common.REPO_ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args, report: common.Report) -> None:
    small, large = SIZES[args.size]
    reps = common.reps_for(args, full=2)
    rounds = {n: [_in_child(args, n) for _ in range(reps)] for n in (small, large)}
    for n, results in rounds.items():
        case = f"{n:,} pending, delays 1 s-1 h, {BODY_BYTES} B bodies"
        report.add(case, "enqueue (read record, unit, slot)", "timers/s",
                   [r["enqueue"] for r in results])
        report.add(case, "dequeue + deliver to the real topic", "timers/s",
                   [r["dequeue"] for r in results])
        report.add(case, "put with the timer hook (+ dispatch)", "msgs/s", [r["put"] for r in results])
        report.add(case, "anonymous RSS growth, enqueue + dequeue", "MiB",
                   [r["anon_growth_mib"] for r in results], higher_is_better=False)
        report.add(case, "peak RSS of the process", "MiB", [r["peak_rss_mib"] for r in results],
                   higher_is_better=False)
    growth = {n: max(r["anon_growth_mib"] for r in results) for n, results in rounds.items()}
    row = report.rows[-2]
    report.goal(row, f"anonymous growth at {large:,} within 8 MiB of {small:,}",
                growth[large] <= growth[small] + 8)
    report.notes.append("flush after enqueue (timer log + changed slots + timercheck): " + ", ".join(
        f"{n:,}: {results[0]['flush_ms']:.0f} ms" for n, results in rounds.items()))
    report.notes.append("peak RSS includes the mapped commit log and timer log pages the run touches "
                        "(file-backed, as RocketMQ's mapped files); the anonymous growth is the "
                        "service's own memory")


main = common.scenario_main("timer_bench", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--child":
        workdir = sys.argv[4] if len(sys.argv) >= 5 and sys.argv[3] == "--child-workdir" else None
        if common.REPO_ROOT not in sys.path:
            sys.path.insert(0, common.REPO_ROOT)
        print(json.dumps(child_round(workdir, int(sys.argv[2]))))
    else:
        main()
