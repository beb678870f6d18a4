"""Scenario check: `check()` of a whole store and its read-only open, against `cat` of the same files.

The store (full size: 1.2 M messages of 1 KiB, single puts round robin over 2,048 queues = 256 topics
x 8, each with a tag, two keys and a unique key; 64 MiB segments; about 1.4 GiB) is built once. Each
repetition, interleaved: `cat` of every file of the store (the reference: what the check must at
least read), then a child process that opens the store read-only (`MessageStore.open(...,
read_only=True)`) and runs `check()`; first with the page cache dropped (when we may write
/proc/sys/vm/drop_caches, root on these VMs), then warm. The child's peak RSS is reported too.

    python -m bench.check_bench [--size smoke|full] [--keep DIR] [--messages N]   (run_all: --only check)

`--keep DIR` (under /tmp) keeps the built store in DIR/store and reuses it when it is there (same
--size): for profiling and before/after comparisons on the same bytes. `--messages N` builds N
messages instead of the size's count (4000000: the 4.5 GB store of issue #17's table).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench import common

BODY_BYTES = 1024
QUEUES_PER_TOPIC = 8
GOAL_CHECK_X_READ = 2.0
GOAL_OPEN_WARM_S = 1.0
_KEEP: str | None = None
_MESSAGES: int | None = None


def build(root: str, count: int, topics: int) -> float:
    """Fill `root` with `count` single puts round robin over `topics` x 8 queues; seconds."""
    from store.api import Message
    from store.message_store import MessageStore
    queues = [(f"T{t:05d}", q) for t in range(topics) for q in range(QUEUES_PER_TOPIC)]
    body = bytes((i * 2654435761 >> 13) & 0xFF for i in range(BODY_BYTES))
    started = time.perf_counter()
    store = MessageStore.open(common.store_config(root))
    try:
        for n in range(count):
            topic, queue_id = queues[n % len(queues)]
            result = store.put_message(Message(
                topic, body, queue_id=queue_id, tags=("TagA", "TagB")[n % 2],
                keys=(f"k{n}", f"order-{n}"),
                properties={"UNIQ_KEY": f"7F0000010001B4AAC2E0{n:012X}"}))
            assert result.ok, result.error
        common.wait_dispatched(store)
    finally:
        store.close()
    return time.perf_counter() - started


def child(root: str) -> None:
    """Subprocess: open `root` read-only, check it; print open and check seconds, findings, RSS."""
    from store.message_store import MessageStore
    started = time.perf_counter()
    store = MessageStore.open(common.store_config(root), read_only=True)
    opened = time.perf_counter()
    try:
        findings = store.check()
    finally:
        store.close()
    done = time.perf_counter()
    print(json.dumps({"open_s": opened - started, "check_s": done - opened,
                      "findings": len(findings),
                      "errors": sum(f.severity == "error" for f in findings),
                      "rss_mib": common.own_peak_rss_mib()}))


def run_child(root: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.check_bench", "--child", root],
                         cwd=common.REPO_ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(args, report: common.Report) -> None:
    smoke = args.size == "smoke"
    count, topics = (4000, 16) if smoke else (1_200_000, 256)
    count = _MESSAGES or count
    reps = common.reps_for(args, full=3)
    with common.scratch_dir(args, "check") as parent:
        root = os.path.join(_KEEP, "store") if _KEEP else os.path.join(parent, "store")
        if os.path.isdir(root):
            built_s = None
        else:
            built_s = build(root, count, topics)
        files = sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)
        file_bytes = sum(os.path.getsize(p) for p in files)
        allocated = common.dir_bytes(root)
        results = {"cold": [], "warm": []}
        cat = {"cold": [], "warm": []}
        cold = False
        for _ in range(reps):
            cold = common.drop_caches()
            cat["cold"].append(common.shell_seconds(["cat", *files]))
            cat["warm"].append(common.shell_seconds(["cat", *files]))
            common.drop_caches()
            results["cold"].append(run_child(root))
            results["warm"].append(run_child(root))
    cache = "cold (page cache dropped)" if cold else "warm (cannot drop caches)"
    for what in ("cold", "warm"):
        name = f"cat of the store's files, {cache if what == 'cold' else 'warm'}"
        row = report.add(f"check, {what}", "check() time", "s",
                         [r["check_s"] for r in results[what]], cat[what], reference_name=name,
                         higher_is_better=False)
        report.goal(row, f"<= {GOAL_CHECK_X_READ}x cat", not smoke and row.ratio is not None
                    and row.ratio <= GOAL_CHECK_X_READ)
        row = report.add(f"read-only open, {what}", "open time", "s",
                         [r["open_s"] for r in results[what]], cat[what], reference_name=name,
                         higher_is_better=False)
        if what == "warm":
            report.goal(row, f"< {GOAL_OPEN_WARM_S} s", not smoke and
                        sorted(row.ours)[len(row.ours) // 2] < GOAL_OPEN_WARM_S)
        else:
            report.goal(row, "< cat cold", not smoke and row.ratio is not None and row.ratio < 1)
    report.add("check, warm", "peak RSS of the open + check process", "MiB",
               [r["rss_mib"] for r in results["warm"]])
    last = results["warm"][-1]
    report.notes.append(
        f"store: {count:,} messages of {BODY_BYTES} B in {topics * QUEUES_PER_TOPIC:,} queues, "
        f"{len(files):,} files, {file_bytes / (1 << 20):,.0f} MiB of file length "
        f"({allocated / (1 << 20):,.0f} MiB allocated)"
        + (f", built in {built_s:.0f} s" if built_s else ", reused (--keep)")
        + f"; check found {last['findings']} findings ({last['errors']} errors); cold runs: {cache}.")
    report.extra["cold_cache"] = cold


_main = common.scenario_main("check_bench", __doc__.splitlines()[0], run)


def main(argv=None):
    global _KEEP, _MESSAGES
    argv = list(sys.argv[1:] if argv is None else argv)
    _KEEP = common.pop_keep(argv) or _KEEP
    if "--messages" in argv:
        at = argv.index("--messages")
        _MESSAGES = int(argv[at + 1])
        del argv[at:at + 2]
    if argv and argv[0] == "--child":
        if common.REPO_ROOT not in sys.path:
            sys.path.insert(0, common.REPO_ROOT)
        child(argv[1])
        return None
    return _main(argv)


if __name__ == "__main__":
    main()
