"""Shared machinery of the benchmark suite: arguments, scratch stores, timing, repetitions interleaved
with the reference, peak RSS, the C references, and the table + JSON output.

Every scenario module has `run(args) -> Report` and a `main()` made by `scenario_main`. A `Report` holds
rows; a row is one figure (ours and, when there is one, the reference's), measured `reps` times. We
print min/median/max and the ratio of the medians (ours / reference), because absolute figures on these
shared VMs swing by 2-10x between runs while ratios taken in one run are stable (bench README).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(REPO_ROOT, "bench", "results")
BIN_DIR = os.path.join(REPO_ROOT, "bench", "bin")
# The C reference programs (bench/ref/, with their README: what each measures and the machine facts
# behind them). RMQ_BENCH_REF_DIR points at another copy of them.
REFERENCE_SOURCES = os.environ.get("RMQ_BENCH_REF_DIR", os.path.join(REPO_ROOT, "bench", "ref"))
REFERENCE_LIBS = {"appender": ["-lz"], "topics": ["-pthread"], "fsync_lat": []}
MIN_SEGMENT_BYTES = 2 << 20   # smaller mmaps are 20-30x slower on these VMs (bench README)
BENCH_SEGMENT_BYTES = 64 << 20


# -------------------------------------------------------------------------------------- arguments
def parse_args(description: str, argv=None, parents=()) -> argparse.Namespace:
    """The options every scenario takes; `parents` adds a scenario's own (listed by --help)."""
    parser = argparse.ArgumentParser(description=description, parents=list(parents))
    parser.add_argument("--size", choices=("smoke", "full"), default="full")
    parser.add_argument("--workdir", default=None,
                        help="parent of the scratch stores (default: a new dir under /tmp)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default per size)")
    parser.add_argument("--no-json", action="store_true", help="do not write bench/results/*.json")
    return parser.parse_args(argv)


def reps_for(args, full: int = 3, smoke: int = 1) -> int:
    if args.reps:
        return args.reps
    return smoke if args.size == "smoke" else full


@contextlib.contextmanager
def scratch_dir(args, name: str):
    """A fresh directory under --workdir (or /tmp), removed afterwards even on failure."""
    parent = args.workdir or tempfile.gettempdir()
    os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix=f"rmqbench-{name}-", dir=parent)
    assert not os.path.realpath(path).startswith(REPO_ROOT + os.sep), "never bench inside the repo"
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------------------- store
def store_config(root: str, **overrides):
    """RocketMQ defaults except a 64 MiB commit-log segment (the C appender's), never < 2 MiB."""
    from store.config import StoreConfig
    values = dict(store_path_root_dir=root, mapped_file_size_commit_log=BENCH_SEGMENT_BYTES)
    values.update(overrides)
    assert values["mapped_file_size_commit_log"] >= MIN_SEGMENT_BYTES, "segments < 2 MiB are 20-30x slow"
    return StoreConfig.from_dict({}, **values)


def make_messages(count: int, body_bytes: int, *, topic: str = "BenchTopic", queues: int = 8,
                  queue_of=None, start: int = 0, tags=("TagA",), prefix: str = "k"):
    """`count` messages, each with a tag, two keys and a unique key (as a producer sets UNIQ_KEY)."""
    from store.api import Message
    body = bytes((i * 2654435761 >> 13) & 0xFF for i in range(body_bytes))
    out = []
    for n in range(start, start + count):
        queue_id = queue_of(n) if queue_of else n % queues
        out.append(Message(topic, body, queue_id=queue_id, tags=tags[n % len(tags)],
                           keys=(f"{prefix}{n}", f"order-{n}"),
                           properties={"UNIQ_KEY": f"7F0000010001B4AAC2E0{n:012X}"}))
    return out


def settle_heap() -> None:
    """Collect the setup's garbage before a clock starts.

    A scenario builds its messages first (tens of thousands of objects). Their allocation leaves
    the collector a debt that the first full collection during the timed code would pay,
    traversing all of them: 20-27 ms of a 250 ms topic-count point. That cost belongs to the
    bench, not to the store. The collector stays on, so the timed code still pays for every
    collection of its own garbage.
    """
    gc.collect()


def wait_dispatched(store, timeout_s: float = 600.0) -> None:
    """Until the reput service has put everything into the consume queues and the index."""
    deadline = time.monotonic() + timeout_s
    while store.dispatch_behind_bytes() > 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"dispatch still {store.dispatch_behind_bytes()} bytes behind")
        time.sleep(0.0005)


def count_files(root: str) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def dir_bytes(root: str) -> int:
    """Bytes allocated on disk (sparse files count what they hold, not their length)."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(root)
               for f in files)


def drop_caches() -> bool:
    """Drop the page cache if we may (root on a VM); True if the next read is cold."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


# -------------------------------------------------------------------------------------- timing
def percentile(values, pct: float) -> float:
    """Nearest-rank percentile (pct in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    assert ordered, "percentile of nothing"
    rank = max(0, min(len(ordered) - 1, math.ceil(pct / 100.0 * len(ordered)) - 1))
    return ordered[rank]


def interleaved(reps: int, named_fns: dict) -> dict[str, list]:
    """Run every function once per repetition, alternating their order so neither always goes
    first (page cache, CPU frequency and neighbours drift over a run). Returns name -> results."""
    out = {name: [] for name in named_fns}
    items = list(named_fns.items())
    for rep in range(reps):
        for name, fn in (items if rep % 2 == 0 else items[::-1]):
            out[name].append(fn())
    return out


def own_peak_rss_mib() -> float:
    """This process's own peak RSS in MiB: VmHWM of /proc/self/status, which starts afresh at exec.
    `ru_maxrss` does not: Linux carries the parent's peak across fork and exec into the child's
    figure, so a child started by a bench that built a big store reported the builder's peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mb() -> dict[str, float]:
    """Peak resident set size of this process and of its (waited-for) children, in MiB."""
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"self_mib": round(self_kb / 1024, 1), "children_mib": round(children_kb / 1024, 1)}


# ------------------------------------------------------------------------------- C references
def reference_binary(name: str) -> str | None:
    """Build `name`.c from the reference sources into bench/bin/ (once) with the README's flags."""
    source = os.path.join(REFERENCE_SOURCES, f"{name}.c")
    binary = os.path.join(BIN_DIR, name)
    if os.path.exists(binary) and (not os.path.exists(source) or
                                   os.path.getmtime(binary) >= os.path.getmtime(source)):
        return binary
    if not os.path.exists(source) or shutil.which("gcc") is None:
        return None
    os.makedirs(BIN_DIR, exist_ok=True)
    command = ["gcc", "-O2", "-march=native", "-o", binary, source] + REFERENCE_LIBS[name]
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode != 0:              # e.g. no zlib headers: the scenario runs without its reference
        print(f"bench: could not build the C reference {source}: {built.stderr.strip()[:300]}",
              file=sys.stderr)
        return None
    return binary


def run_reference(name: str, argv: list, timeout_s: float = 900) -> dict[str, float] | None:
    """Run a C reference; its last line is `key=value ...`; numbers are returned as floats."""
    binary = reference_binary(name)
    if binary is None:
        return None
    done = subprocess.run([binary, *map(str, argv)], check=True, capture_output=True, text=True,
                          timeout=timeout_s)
    values: dict[str, float] = {}
    for token in done.stdout.strip().splitlines()[-1].split():
        key, sep, text = token.partition("=")
        if sep:
            try:
                values[key] = float(text)
            except ValueError:
                pass
    return values


def shell_seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


# -------------------------------------------------------------------------------------- report
@dataclass
class Row:
    case: str
    metric: str
    unit: str
    ours: list[float]
    reference: list[float] | None = None
    reference_name: str | None = None
    higher_is_better: bool = True
    goal: str | None = None
    goal_met: bool | None = None

    def stats(self, values):
        return None if not values else {"min": min(values), "median": statistics.median(values),
                                        "max": max(values)}

    @property
    def ratio(self) -> float | None:
        if not self.ours or not self.reference:
            return None
        ref = statistics.median(self.reference)
        return None if ref == 0 else statistics.median(self.ours) / ref

    def as_dict(self) -> dict:
        data = asdict(self)
        data["ours_stats"] = self.stats(self.ours)
        data["reference_stats"] = self.stats(self.reference)
        data["ratio"] = self.ratio
        return data


@dataclass
class Report:
    scenario: str
    size: str
    command: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    extra: dict = field(default_factory=dict)

    def add(self, case, metric, unit, ours, reference=None, **kw) -> Row:
        row = Row(case, metric, unit, list(ours), None if reference is None else list(reference), **kw)
        self.rows.append(row)
        return row

    def goal(self, row: Row, text: str, met: bool) -> None:
        row.goal, row.goal_met = text, met


def _fmt(value) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def table_lines(report: Report) -> list[str]:
    lines = [f"## {report.scenario} ({report.size})", "", f"`{report.command}` (engine at "
             f"{engine_commit()})", ""]
    if report.skipped:
        return lines + [f"SKIPPED: {report.skipped}", ""]
    lines += ["| case | metric | ours min / median / max | reference min / median / max | ratio | goal |",
              "|---|---|---|---|---|---|"]
    for row in report.rows:
        ours = " / ".join(_fmt(v) for v in row.stats(row.ours).values()) if row.ours else "-"
        ref = "-"
        if row.reference:
            ref = " / ".join(_fmt(v) for v in row.stats(row.reference).values())
            ref += f" ({row.reference_name})" if row.reference_name else ""
        goal = "-" if row.goal is None else f"{row.goal}: {'MET' if row.goal_met else 'NOT MET'}"
        lines.append(f"| {row.case} | {row.metric} [{row.unit}] | {ours} | {ref} | "
                     f"{_fmt(row.ratio)} | {goal} |")
    lines += [""] + [f"- {note}" for note in report.notes] + [""]
    return lines


def finish(report: Report, args) -> Report:
    report.extra["peak_rss"] = peak_rss_mb()
    report.notes.append(f"peak RSS: {report.extra['peak_rss']['self_mib']} MiB (this process), "
                        f"{report.extra['peak_rss']['children_mib']} MiB (largest child)")
    print("\n".join(table_lines(report)), flush=True)
    if not args.no_json:
        os.makedirs(RESULTS_DIR, exist_ok=True)
        data = {"scenario": report.scenario, "size": report.size, "command": report.command,
                "skipped": report.skipped, "notes": report.notes, "extra": report.extra,
                "rows": [row.as_dict() for row in report.rows],
                "engine_commit": engine_commit(),
                "host": {"python": sys.version.split()[0], "machine": platform.machine(),
                         "cpus": os.cpu_count(), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}}
        path = os.path.join(RESULTS_DIR, f"{report.scenario}-{report.size}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(data, f, indent=1)
        os.replace(path + ".tmp", path)
    return report


def engine_commit() -> str:
    """The commit the engine was run at, with "+dirty" when store/ has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "store"], cwd=REPO_ROOT, text=True,
                               capture_output=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def pop_keep(argv: list) -> str | None:
    """Remove `--keep DIR` from argv (in place); the absolute DIR, which must be outside the repo."""
    if "--keep" not in argv:
        return None
    at = argv.index("--keep")
    keep = os.path.abspath(argv[at + 1])
    assert not keep.startswith(REPO_ROOT + os.sep), "benchmark stores go outside the repo"
    del argv[at:at + 2]
    return keep


def scenario_main(name: str, description: str, run, parents=()):
    """The `python -m bench.<name>` entry point: parse, run, print the table, write JSON."""
    def main(argv=None) -> Report:
        if REPO_ROOT not in sys.path:
            sys.path.insert(0, REPO_ROOT)
        args = parse_args(description, argv, parents)
        command = f"python -m bench.{name} --size {args.size}" + (
            f" --reps {args.reps}" if args.reps else "")
        report = Report(name, args.size, command)
        run(args, report)
        return finish(report, args)
    return main
