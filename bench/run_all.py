"""Every scenario, one after another, each in its own process (so each reports its own peak RSS):
put, sync_flush, pull, lookups, topic_count, recovery, decode (the pipeline engineer's
bench/decode_bench.py, skipped if absent), dashboard, schedule (bench/schedule_bench.py), timer
(bench/timer_bench.py), check (bench/check_bench.py: check() and the read-only open) and versus_java
(issue #17's table against the real RocketMQ store; skipped unless RMQ_BENCH_JAVA names its harness).
Prints a summary; each scenario writes its own
bench/results/<scenario>-<size>.json and run_all writes bench/results/all-<size>.json.

    python -m bench.run_all [--size smoke|full] [--workdir DIR] [--only put,pull]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from bench import common

SCENARIOS = ("put", "sync_flush", "pull", "lookups", "topic_count", "recovery", "decode", "dashboard",
             "schedule", "timer", "check", "versus_java")
MODULES = {"schedule": "bench.schedule_bench",   # scenarios whose module is not bench.<name>
           "timer": "bench.timer_bench", "check": "bench.check_bench"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--only", default=None, help="comma-separated scenario names")
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(SCENARIOS)
    summary = {}
    failed = []
    for name in chosen:
        assert name in SCENARIOS, f"unknown scenario {name!r}; known: {SCENARIOS}"
        module = MODULES.get(name, f"bench.{name}")
        if name == "decode":
            if not os.path.exists(os.path.join(common.REPO_ROOT, "bench", "decode_bench.py")):
                print("## decode\n\nSKIPPED: bench/decode_bench.py does not exist yet (owned by the "
                      "pipeline engineer).\n", flush=True)
                summary[name] = {"skipped": "bench/decode_bench.py does not exist"}
                continue
            module = "bench.decode_bench"
        command = [sys.executable, "-m", module, "--size", args.size]
        if args.workdir:
            command += ["--workdir", args.workdir]
        print(f"### running {' '.join(command[1:])}", flush=True)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=common.REPO_ROOT)
        seconds = time.perf_counter() - started
        summary[name] = {"exit": done.returncode, "seconds": round(seconds, 1)}
        if done.returncode != 0:
            failed.append(name)
    print("\n## summary\n\n| scenario | exit | seconds |\n|---|---|---|")
    for name, info in summary.items():
        print(f"| {name} | {info.get('exit', 'skipped')} | {info.get('seconds', '-')} |")
    os.makedirs(common.RESULTS_DIR, exist_ok=True)
    with open(os.path.join(common.RESULTS_DIR, f"all-{args.size}.json"), "w") as f:
        json.dump({"size": args.size, "scenarios": summary, "failed": failed}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
