"""Issue #17's table: our engine against the real RocketMQ 4.9.7 store, in the same run.

The reference is RocketMQ's own `DefaultMessageStore`, run in-process by a Java harness that lives
outside this repository (nothing of RocketMQ, and nothing that builds it, is in the repository). Name
its command with `--java CMD` or `RMQ_BENCH_JAVA=CMD`. The command is called as

    CMD <scenario> --reps N --warmup W --workdir DIR [--count N]

with scenario one of `put-single`, `put-batch32`, `sync-flush`, `pull`, `lookups`, and prints one JSON
line per figure: `{"name": ..., "unit": ..., "values": [...]}`. The harness runs its scenarios in the shapes
of this directory's scripts: 1 KiB bodies (128 B for lookups), a tag, two keys and a UNIQ_KEY, 8
queues, messages built before the clock; 20,000 puts per repetition (single puts alternate between two
queues, batches of 32 as `MessageExtBatch`), end to end indexed = until the reput service has caught up;
SYNC_FLUSH with 32 producers of 625 puts; pulls of 32 over a 64,000-message store built with batch
puts; lookups on a store of `--lookup-count` messages.

A pull's three forms do the same work on both sides: "no copy" touches each message's buffer
(`decode="view"` here, the result's ByteBuffer slices there); "bytes copied" copies each message into
an array of its own (`decode=False`: one bytes object per record; there one byte[] per
ByteBuffer); "decoded" builds message objects (`decode=True`: MessageRecords; there
`MessageDecoder.decodes` of the pull's bytes copied into one array, as the broker's
`readGetMessageResult` does). A Java put gets its properties string and tagsCode set before the
clock, as the broker's SendMessageProcessor hands them over from the request; ours encodes the
properties from the Message inside `put_message`, which is where its API takes them.

The JVM gets `--java-warmup` untimed repetitions first in each call (default 3), so that its JIT has
compiled the hot paths: the figures compared are the real store's steady state, as in the issue.
Rounds alternate the side that goes first (Java, ours, then ours, Java, ...), each side running
`--reps` repetitions per round. ratio = median(ours) / median(Java); for latencies above 1 is slower.
Without a Java command the scenario is reported as skipped.

    python -m bench.versus_java --java /path/to/run.sh [--size smoke|full] [--rounds 2] [--reps 3]
                                [--only put,sync,pull,lookups] [--lookup-count 1000000] [--java-warmup 3]
                                [--put-count 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys

from bench import common

SCENARIOS = ("put", "sync", "pull", "lookups")
_options: dict = {}                     # set by main(): java, rounds, only, lookup_count


# -------------------------------------------------------------------------------------- Java side
def java_run(command: str, scenario: str, reps: int, workdir: str, count: int | None = None,
             warmup: int = 3, timeout_s: float = 1800) -> dict[str, list[float]]:
    """Run the Java harness once; {figure name: values}. A failure raises with its stderr's tail."""
    argv = shlex.split(command) + [scenario, "--reps", str(reps), "--warmup", str(warmup),
                                   "--workdir", workdir]
    if count is not None:
        argv += ["--count", str(count)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    figures: dict[str, list[float]] = {}
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            data = json.loads(line)
            figures.setdefault(data["name"], []).extend(float(v) for v in data["values"])
    if not figures:
        raise RuntimeError(f"{' '.join(argv)} printed no JSON figures")
    return figures


# ------------------------------------------------------------------------------------- our side
def ours_put(args, mode: str, count: int) -> dict[str, list[float]]:
    from bench.put_cores import _ours
    runs = [_ours(args, mode, count) for _ in range(args.reps_per_round)]
    return {key: [run[key] for run in runs] for key in ("indexed", "put", "cpu_us")}


def ours_sync(args) -> dict[str, list[float]]:
    from bench.sync_flush import ours_round
    rounds = [ours_round(args, 32, 5.0 if args.size == "full" else 0.5)
              for _ in range(args.reps_per_round)]
    return {"msg_per_s": [r["msg_per_s"] for r in rounds], "p50_us": [r["p50_us"] for r in rounds],
            "p99_us": [r["p99_us"] for r in rounds]}


def ours_pull(args, count: int) -> dict[str, list[float]]:
    from bench.pull import build_store, pull_all
    out: dict[str, list[float]] = {"view": [], "copy": [], "decoded": []}
    with common.scratch_dir(args, "vs-pull") as root:
        store = build_store(root, count, 1024, 8)
        try:
            pull_all(store, decode="view")                      # untimed, as the harness's warm-up
            for _ in range(args.reps_per_round):
                for name, decode in (("view", "view"), ("copy", False), ("decoded", True)):
                    n, seconds = pull_all(store, decode=decode)
                    out[name].append(n / seconds)
        finally:
            store.close()
    return out


def ours_lookups(args, count: int, ops: int) -> dict[str, list[float]]:
    from bench.lookups import timed_ops
    from bench.pull import build_store
    rng = random.Random(42)
    out: dict[str, list[float]] = {k: [] for k in ("key", "key_p50", "key_p99", "time", "time_p50",
                                                   "time_p99")}
    with common.scratch_dir(args, "vs-lookups") as root:
        store = build_store(root, count, 128, 8)
        try:
            first_ms = store.get_earliest_message_time("BenchTopic", 0)
            last_ms = store.get_message_store_timestamp(
                "BenchTopic", 0, store.get_max_offset_in_queue("BenchTopic", 0) - 1)

            def key_query(key):
                assert store.query_message("BenchTopic", key).messages, key

            def time_lookup(argument):
                store.get_offset_in_queue_by_time("BenchTopic", *argument)

            def keys(n):
                return [rng.choice((f"k{i}", f"order-{i}", f"7F0000010001B4AAC2E0{i:012X}"))
                        for i in (rng.randrange(count) for _ in range(n))]

            def times(n):
                return [(rng.randrange(8), rng.randint(first_ms, last_ms)) for _ in range(n)]

            timed_ops(key_query, keys(min(ops, 2000)))            # untimed warm-up, as the harness
            timed_ops(time_lookup, times(min(ops, 2000)))
            for _ in range(args.reps_per_round):
                for name, fn, made in (("key", key_query, keys), ("time", time_lookup, times)):
                    rate, latencies = timed_ops(fn, made(ops))
                    out[name].append(rate)
                    out[f"{name}_p50"].append(common.percentile(latencies, 50))
                    out[f"{name}_p99"].append(common.percentile(latencies, 99))
        finally:
            store.close()
    return out


# ---------------------------------------------------------------------------------------- rows
# (scenario, our key, Java figure name, case, metric, unit, higher is better)
ROWS = (
    ("put-single", "indexed", "put single 1024 B x1 thr: end-to-end indexed",
     "single put 1 KiB", "end-to-end indexed", "msg/s", True),
    ("put-batch32", "indexed", "put batch32 1024 B x1 thr: end-to-end indexed",
     "batch of 32 x 1 KiB", "end-to-end indexed", "msg/s", True),
    ("sync-flush", "msg_per_s", "sync_flush 32 producers: throughput",
     "SYNC_FLUSH, 32 producers", "throughput", "msg/s", True),
    ("sync-flush", "p50_us", "sync_flush 32 producers: latency p50",
     "SYNC_FLUSH, 32 producers", "latency p50", "us", False),
    ("sync-flush", "p99_us", "sync_flush 32 producers: latency p99",
     "SYNC_FLUSH, 32 producers", "latency p99", "us", False),
    ("pull", "copy", "pull 32, bytes copied", "pull of 32", "bytes copied", "msg/s", True),
    ("pull", "view", "pull 32, no copy (ByteBuffer slices)", "pull of 32", "no copy", "msg/s", True),
    ("pull", "decoded", "pull 32, decoded (MessageDecoder.decodes)", "pull of 32", "decoded",
     "msg/s", True),
    ("lookups", "key", "key query: throughput", "key query", "throughput", "ops/s", True),
    ("lookups", "key_p99", "key query: latency p99", "key query", "latency p99", "us", False),
    ("lookups", "time", "time lookup: throughput", "time lookup", "throughput", "ops/s", True),
    ("lookups", "time_p99", "time lookup: latency p99", "time lookup", "latency p99", "us", False),
)
_GROUP = {"put-single": "put", "put-batch32": "put", "sync-flush": "sync", "pull": "pull",
          "lookups": "lookups"}


def run(args, report: common.Report) -> None:
    java = _options.get("java") or os.environ.get("RMQ_BENCH_JAVA")
    if not java:
        report.skipped = "no Java reference: give --java CMD or set RMQ_BENCH_JAVA (see the docstring)"
        return
    only = set(_options.get("only") or SCENARIOS)
    rounds = _options.get("rounds") or (1 if args.size == "smoke" else 2)
    args.reps_per_round = common.reps_for(args, full=3)
    smoke = args.size == "smoke"
    put_count = _options.get("put_count") or (512 if smoke else 20_000)
    counts = {"put-single": put_count, "put-batch32": put_count,
              "pull": 2048 if smoke else 64_000,
              "lookups": 4096 if smoke else _options.get("lookup_count") or 1_000_000}
    ours_fns = {"put-single": lambda: ours_put(args, "single", counts["put-single"]),
                "put-batch32": lambda: ours_put(args, "batch32", counts["put-batch32"]),
                "sync-flush": lambda: ours_sync(args),
                "pull": lambda: ours_pull(args, counts["pull"]),
                "lookups": lambda: ours_lookups(args, counts["lookups"], 200 if smoke else 5000)}
    ours: dict[str, dict[str, list[float]]] = {}
    theirs: dict[str, dict[str, list[float]]] = {}
    for scenario in ours_fns:
        if _GROUP[scenario] not in only:
            continue
        ours[scenario], theirs[scenario] = {}, {}
        for round_number in range(rounds):
            sides = ["java", "ours"] if round_number % 2 == 0 else ["ours", "java"]
            for side in sides:
                print(f"versus_java: {scenario} round {round_number + 1}/{rounds}: {side}",
                      file=sys.stderr, flush=True)
                if side == "ours":
                    got = ours_fns[scenario]()
                    target = ours[scenario]
                else:
                    with common.scratch_dir(args, "vs-java") as workdir:
                        got = java_run(java, scenario, args.reps_per_round, workdir,
                                       None if scenario == "sync-flush" else counts[scenario],
                                       warmup=_options.get("java_warmup", 3))
                    target = theirs[scenario]
                for name, values in got.items():
                    target.setdefault(name, []).extend(values)
    for scenario, our_key, java_name, case, metric, unit, higher in ROWS:
        if scenario not in ours:
            continue
        reference = theirs[scenario].get(java_name)
        report.add(case, metric, unit, ours[scenario].get(our_key, []), reference,
                   reference_name="RocketMQ 4.9.7 (Java)", higher_is_better=higher)
    report.notes.append(f"reference: `{java}` (RocketMQ 4.9.7 DefaultMessageStore in-process); "
                        f"{rounds} rounds alternating which side goes first, {args.reps_per_round} "
                        f"repetitions per side per round after {_options.get('java_warmup', 3)} "
                        f"untimed JVM warm-up repetitions; counts {counts}")
    report.extra["java_figures"] = theirs


def _own_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--java", default=None,
                        help="the harness command (default: $RMQ_BENCH_JAVA; without one: skipped)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds alternating who goes first")
    parser.add_argument("--only", default=None, help="comma-separated: " + ",".join(SCENARIOS))
    parser.add_argument("--lookup-count", type=int, default=None,
                        help="messages in the lookups store (default 1,000,000 at full size)")
    parser.add_argument("--put-count", type=int, default=None,
                        help="messages per put repetition (default 20,000 at full size: a Java "
                             "repetition is then 60-120 ms, and its spread is wide; 200,000 "
                             "steadies both sides)")
    parser.add_argument("--java-warmup", type=int, default=3,
                        help="untimed JVM repetitions per harness call")
    return parser


_main = common.scenario_main("versus_java", __doc__.splitlines()[0], run, parents=(_own_parser(),))


def main(argv=None):
    """`common.scenario_main` plus --java, --rounds, --only, --lookup-count and --java-warmup."""
    parser = _own_parser()
    known, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    only = known.only.split(",") if known.only else None
    for name in only or ():
        if name not in SCENARIOS:
            raise SystemExit(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    _options.update(java=known.java, rounds=known.rounds, only=only, lookup_count=known.lookup_count,
                    java_warmup=known.java_warmup, put_count=known.put_count)
    try:
        return _main(rest)
    finally:
        _options.clear()


if __name__ == "__main__":
    main()
