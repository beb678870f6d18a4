"""Decode throughput of the pipeline's commit-log decoder against the I/O bound, in one run.

    python -m bench.decode_bench --size-mb 2048     # the figure in docs/pipeline.md
    python -m bench.decode_bench --size-mb 16       # smoke run (also: --size smoke, used by run_all)

A synthetic store of `--size-mb` MiB is written under /tmp (or `--workdir`) and deleted afterwards:
1 KiB records (v1, IPv4 hosts), 256 topics x 8 queues, TAGS/KEYS/UNIQ_KEY properties with a distinct
key and unique key per record, 1 GiB segments (RocketMQ's default; smaller stores get two equal
segments) closed by a BLANK like the broker's. Every reader then reads the same files with a warm
page cache (the files were just written and are read once before timing), repetitions interleaved:

* `cat` and `dd bs=1M` to /dev/null: the I/O bound (one core, no decoding);
* the numpy path: `frames.commitlog_batches` of every column (the `SegmentReader` a Spark partition
  runs, one split per segment), single process; the same with `views=True` (body, topic,
  properties_raw, tags, keys, uniq_key as Arrow views into the map, not copies); and with only the
  dispatch columns that `rebuild` decodes;
* Spark `local[2]`: `rocketmq-commitlog` with every column written to the `noop` sink (session start-up
  not timed).

MB/s are MiB of commit-log files per second; ratios are against `cat`. Goal: numpy path >= 50% of cat.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from bench import common

RECORD_BYTES = 1024
TOPICS = 256
QUEUES = 8
TAGS = 16
MAX_SEGMENT_BYTES = 1 << 30
BLANK_MAGIC = -875286124
CHUNK_RECORDS = 65536
ALL_COLUMNS = None


def _template(topic: str) -> tuple[bytes, dict[str, int]]:
    """One encoded 1 KiB record of `topic` and the byte positions of the fields patched per record."""
    from store.pipeline.synthetic import SyntheticMessage, encode

    properties = (b"TAGS\x01Tag00\x02KEYS\x01key-00000000 shared\x02UNIQ_KEY\x01"
                  + b"0" * 32 + b"\x02WAIT\x01true")
    fixed = 91 + len(topic) + len(properties)
    body = np.random.default_rng(len(topic)).integers(32, 127, RECORD_BYTES - fixed, dtype=np.uint8).tobytes()
    record = encode(SyntheticMessage(topic=topic, body=body, properties_raw=properties), 0)
    assert len(record) == RECORD_BYTES, len(record)
    properties_at = RECORD_BYTES - len(properties)
    return record, {"tag": properties_at + 8, "key": properties_at + 20, "uniq": properties_at + 45}


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (48 + (values[:, None] // powers) % 10).astype(np.uint8)


def _put_be(rows: np.ndarray, position: int, values: np.ndarray, width: int) -> None:
    rows[:, position:position + width] = values.astype(f">i{width}").view(np.uint8).reshape(-1, width)


def write_store(root: str, size_mb: int) -> list[str]:
    """The synthetic commit log (see the module doc); returns the segment paths."""
    total_bytes = size_mb << 20
    segment_bytes = min(MAX_SEGMENT_BYTES, max(1 << 20, total_bytes // 2))
    segments = max(1, total_bytes // segment_bytes)
    records_per_segment = (segment_bytes - 8) // RECORD_BYTES   # the broker keeps 8 bytes for a BLANK
    names = [f"BenchTopic-{t:04d}" for t in range(TOPICS)]
    templates = np.stack([np.frombuffer(_template(n)[0], dtype=np.uint8) for n in names])
    where = _template(names[0])[1]
    os.makedirs(os.path.join(root, "commitlog"), exist_ok=True)
    paths = []
    record_number = 0
    for segment in range(segments):
        path = os.path.join(root, "commitlog", f"{segment * segment_bytes:020d}")
        with open(path, "wb") as handle:
            for first in range(0, records_per_segment, CHUNK_RECORDS):
                count = min(CHUNK_RECORDS, records_per_segment - first)
                i = record_number + np.arange(count, dtype=np.int64)
                rows = templates[i % TOPICS].copy()
                phy = segment * segment_bytes + (first + np.arange(count, dtype=np.int64)) * RECORD_BYTES
                _put_be(rows, 12, (i // TOPICS) % QUEUES, 4)
                _put_be(rows, 20, i // (TOPICS * QUEUES), 8)
                _put_be(rows, 28, phy, 8)
                _put_be(rows, 40, 1_700_000_000_000 + i, 8)
                _put_be(rows, 56, 1_700_000_000_100 + i, 8)
                rows[:, where["tag"]:where["tag"] + 2] = _digits(i % TAGS, 2)
                rows[:, where["key"]:where["key"] + 8] = _digits(i, 8)
                rows[:, where["uniq"] + 16:where["uniq"] + 32] = _digits(i, 16)
                handle.write(rows.tobytes())
                record_number += count
            blank = segment_bytes - records_per_segment * RECORD_BYTES
            handle.write(np.array([blank, BLANK_MAGIC], dtype=">i4").tobytes() + bytes(blank - 8))
        paths.append(path)
    return paths


def _decode_numpy(store_dir: str, columns, views: bool = False) -> int:
    from store.pipeline.frames import commitlog_batches

    rows = 0
    for batch in commitlog_batches(store_dir, columns, views=views):
        rows += batch.num_rows
    return rows


def run(args, report: common.Report) -> None:
    from store.pipeline.jobs_rebuild import DISPATCH_COLUMNS

    parent = args.workdir or tempfile.gettempdir()
    root = tempfile.mkdtemp(prefix="rmq-decode-bench-", dir=parent)
    spark = None
    try:
        started = time.perf_counter()
        paths = write_store(root, args.size_mb)
        total_mib = sum(os.path.getsize(p) for p in paths) / (1 << 20)
        report.notes.append(f"store: {total_mib:,.0f} MiB in {len(paths)} segments, {RECORD_BYTES}-byte records, "
                            f"{TOPICS} topics x {QUEUES} queues; written in {time.perf_counter() - started:.1f} s")
        expected_rows = _decode_numpy(root, ["phy_offset"])   # also warms the page cache
        common.shell_seconds(["cat", *paths])
        from store.pipeline.session import build_session
        spark = build_session("local[2]", "decode-bench")
        frame = spark.read.format("rocketmq-commitlog").load(root)

        def spark_all() -> None:
            frame.write.format("noop").mode("overwrite").save()

        fns = {
            "cat": lambda: common.shell_seconds(["cat", *paths]),
            "dd": lambda: sum(common.shell_seconds(["dd", f"if={p}", "of=/dev/null", "bs=1M", "status=none"])
                              for p in paths),
            "numpy_all": lambda: _timed(lambda: _check(_decode_numpy(root, ALL_COLUMNS), expected_rows)),
            "numpy_views": lambda: _timed(lambda: _check(_decode_numpy(root, ALL_COLUMNS, True), expected_rows)),
            "numpy_dispatch": lambda: _timed(lambda: _check(_decode_numpy(root, DISPATCH_COLUMNS), expected_rows)),
            "spark_all": lambda: _timed(spark_all),
        }
        seconds = common.interleaved(args.reps, fns)
        rates = {name: [total_mib / s for s in values] for name, values in seconds.items()}
        cat = rates["cat"]
        report.add("I/O bound", "cat > /dev/null", "MiB/s", cat)
        report.add("I/O bound", "dd bs=1M > /dev/null", "MiB/s", rates["dd"], cat, reference_name="cat")
        row = report.add("numpy path", "all columns", "MiB/s", rates["numpy_all"], cat, reference_name="cat")
        report.goal(row, ">= 50% of cat", statistics.median(rates["numpy_all"]) >= 0.5 * statistics.median(cat))
        row = report.add("numpy path", "all columns, views (zero-copy)", "MiB/s", rates["numpy_views"], cat,
                         reference_name="cat")
        report.goal(row, ">= 50% of cat", statistics.median(rates["numpy_views"]) >= 0.5 * statistics.median(cat))
        report.add("numpy path", "dispatch columns (rebuild)", "MiB/s", rates["numpy_dispatch"], cat,
                   reference_name="cat")
        report.add("Spark local[2]", "all columns -> noop", "MiB/s", rates["spark_all"], cat, reference_name="cat")
        report.extra["rows_decoded"] = expected_rows
        report.notes.append(f"{expected_rows:,} records; warm page cache; {os.cpu_count()} CPUs (shared); "
                            f"load average before the run {os.getloadavg()[0]:.1f}")
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(root, ignore_errors=True)


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _check(rows: int, expected: int) -> None:
    assert rows == expected, f"decoded {rows} records, expected {expected}"


def main(argv=None) -> common.Report:
    if common.REPO_ROOT not in sys.path:
        sys.path.insert(0, common.REPO_ROOT)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=None, help="commit-log size in MiB (>= 2048 for the figure)")
    parser.add_argument("--size", choices=("smoke", "full"), default=None, help="smoke = 16 MiB, full = 2048 MiB")
    parser.add_argument("--workdir", default=None, help="parent of the scratch store (default /tmp)")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--no-json", action="store_true")
    args = parser.parse_args(argv)
    if args.size_mb is None:
        args.size_mb = 16 if args.size == "smoke" else 2048
    size_name = args.size or ("full" if args.size_mb >= 2048 else "smoke")
    args.reps = args.reps or (3 if size_name == "full" else 1)
    report = common.Report("decode", size_name, f"python -m bench.decode_bench --size-mb {args.size_mb}"
                           + (f" --reps {args.reps}" if args.reps else ""))
    run(args, report)
    return common.finish(report, args)


if __name__ == "__main__":
    main()
