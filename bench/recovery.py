"""Scenario 6, Recovery: open time of a 1 GiB store (full size) after a crash and after a clean
shutdown. A writer subprocess fills the store with batch-32 puts of 4 KiB messages (tag, two keys,
unique key; 128 MiB segments), keeps writing, and is killed with SIGKILL. The crashed directory is kept
aside and copied back before every crash repetition.

Reference: a sequential read of the same commit-log files (`cat commitlog/* > /dev/null`). When we may
write /proc/sys/vm/drop_caches (root on these VMs), the page cache is dropped before the reference and
before every crash open, so both read cold; the clean opens run warm (after the crash opens). The
report says which.

    python -m bench.recovery [--size smoke|full] [--keep DIR]

`--keep DIR` (under /tmp) keeps the crashed store in DIR/crashed after the run and, when DIR/crashed
already exists (from an earlier --keep run with the same --size), reuses it instead of writing a new
one: for profiling and before/after comparisons on the same bytes.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

from bench import common

BODY_BYTES = 4096
GOAL_CLEAN_S = 1.0
GOAL_CRASH_X_READ = 2.0


def writer(root: str, target_bytes: int, segment_bytes: int) -> None:
    """Subprocess: fill the store past `target_bytes`, say READY, keep writing until killed."""
    from store.message_store import MessageStore
    store = MessageStore.open(common.store_config(root, mapped_file_size_commit_log=segment_bytes))
    n, ready = 0, False
    while True:
        msgs = common.make_messages(32, BODY_BYTES, queue_of=lambda _n, q=(n // 32) % 8: q, start=n)
        result = store.put_messages(msgs)
        assert result.ok, result.error
        n += 32
        if not ready and store.commit_log.max_offset() >= target_bytes:
            common.wait_dispatched(store)
            print(f"READY {n}", flush=True)
            ready = True


def open_seconds(root: str, segment_bytes: int) -> tuple[float, object]:
    from store.message_store import MessageStore
    started = time.perf_counter()
    store = MessageStore.open(common.store_config(root, mapped_file_size_commit_log=segment_bytes))
    seconds = time.perf_counter() - started
    report = store.recovery_report
    store.close()
    return seconds, report


_KEEP: str | None = None      # --keep DIR (see the module docstring)


def build_crashed_store(root: str, target: int, segment: int) -> tuple[int, float]:
    """Fill `root` with a writer subprocess and SIGKILL it; (messages written, seconds)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bench.recovery", "--writer", root, str(target),
                             str(segment)], stdout=subprocess.PIPE, text=True, cwd=common.REPO_ROOT)
    line = proc.stdout.readline()
    assert line.startswith("READY"), f"writer failed: {line!r} (exit {proc.poll()})"
    written_messages = int(line.split()[1])
    time.sleep(0.3)                      # let it get into the middle of more puts
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return written_messages, time.perf_counter() - started


def run(args, report: common.Report) -> None:
    smoke = args.size == "smoke"
    target = (8 << 20) if smoke else (1 << 30)
    segment = (4 << 20) if smoke else (128 << 20)
    reps = common.reps_for(args, full=2)
    with common.scratch_dir(args, "recovery") as parent:
        root, crashed = os.path.join(parent, "store"), os.path.join(parent, "crashed")
        kept = os.path.join(_KEEP, "crashed") if _KEEP else None
        if kept and os.path.isdir(kept):
            with open(os.path.join(_KEEP, "written")) as handle:
                written_messages, fill_s = handle.read().split()
            written_messages, fill_s = int(written_messages), float(fill_s)
            subprocess.run(["cp", "-a", kept, root], check=True)
        else:
            written_messages, fill_s = build_crashed_store(root, target, segment)
            if kept:
                os.makedirs(_KEEP, exist_ok=True)
                subprocess.run(["cp", "-a", root, kept], check=True)
                with open(os.path.join(_KEEP, "written"), "w") as handle:
                    handle.write(f"{written_messages} {fill_s}\n")
        subprocess.run(["cp", "-a", root, crashed], check=True)
        store_bytes = common.dir_bytes(root)
        log_files = sorted(glob.glob(os.path.join(root, "commitlog", "*")))
        log_bytes = sum(os.path.getsize(p) for p in log_files)
        cold = common.drop_caches()
        crash_s, read_s, clean_s, crash_reports = [], [], [], []
        for rep in range(reps):
            shutil.rmtree(root)
            subprocess.run(["cp", "-a", crashed, root], check=True)
            common.drop_caches()
            read_s.append(common.shell_seconds(["cat", *log_files]))
            common.drop_caches()
            seconds, recovery = open_seconds(root, segment)
            crash_s.append(seconds)
            crash_reports.append(recovery)
            for _ in range(2):           # the second clean open is the warm one we keep
                seconds, clean_report = open_seconds(root, segment)
            clean_s.append(seconds)
        assert clean_report.mode == "normal", clean_report.mode
        last = crash_reports[-1]
    cache = "cold (page cache dropped)" if cold else "warm (cannot drop caches)"
    row = report.add("clean shutdown", "open time", "s", clean_s, read_s,
                     reference_name=f"cat commitlog, {cache}", higher_is_better=False)
    report.goal(row, f"< {GOAL_CLEAN_S} s for 1 GiB", not smoke and sorted(clean_s)[len(clean_s) // 2]
                < GOAL_CLEAN_S)
    row = report.add("after SIGKILL", "open time", "s", crash_s, read_s,
                     reference_name=f"cat commitlog, {cache}", higher_is_better=False)
    report.goal(row, f"<= {GOAL_CRASH_X_READ}x sequential read", not smoke and row.ratio is not None
                and row.ratio <= GOAL_CRASH_X_READ)
    report.add("reference", "sequential read rate", "MB/s",
               [log_bytes / s / 1e6 for s in read_s])
    report.notes.append(
        f"store: {store_bytes / (1 << 20):,.0f} MiB on disk ({len(log_files)} commit-log segments of "
        f"{segment >> 20} MiB, {written_messages:,}+ messages of {BODY_BYTES} B), filled in {fill_s:.0f} s; "
        f"crash opens: {cache}; clean opens: warm, second open after the crash recovery.")
    report.notes.append(
        f"last crash recovery: mode={last.mode}, records checked={last.records_checked:,}, bytes "
        f"checked={last.bytes_checked:,}, re-dispatched={last.redispatched_records:,}, truncated "
        f"{last.truncated_bytes:,} B.")
    report.extra["cold_cache"] = cold


_main = common.scenario_main("recovery", __doc__.splitlines()[0], run)


def main(argv=None):
    global _KEEP
    argv = list(sys.argv[1:] if argv is None else argv)
    _KEEP = common.pop_keep(argv) or _KEEP
    if argv and argv[0] == "--writer":
        if common.REPO_ROOT not in sys.path:
            sys.path.insert(0, common.REPO_ROOT)
        writer(argv[1], int(argv[2]), int(argv[3]))
        return None
    return _main(argv)


if __name__ == "__main__":
    main()
