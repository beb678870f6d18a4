"""`rmqstore spark <job>`: the pipeline jobs on the command line.

`store.cli` calls `add_spark_subcommands(subparsers)` only when the first argument is `spark`, so pyspark
is imported lazily. Each job sets `func(args) -> exit code` (0 ok, 1 verify found problems).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone

from store.errors import ConfigError


def _time_ms(text: str | None) -> int | None:
    """Milliseconds since the epoch, or an ISO date/time (UTC when no zone is given)."""
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise ConfigError(f"{text!r} is neither epoch milliseconds nor an ISO date/time") from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _store(args) -> str:
    if not args.store or not os.path.isdir(args.store):
        raise ConfigError(f"store directory {args.store!r} does not exist (give it with --store DIR)")
    return os.path.realpath(args.store)


def _session(args):
    from store.pipeline.session import build_session

    return build_session(args.master, f"rmqstore-{args.spark_job}")


def _print(args, payload: dict, text: str) -> None:
    print(json.dumps(payload, indent=2, default=str) if args.json else text)


def run_export(args) -> int:
    from store.pipeline.jobs_export import export
    from store.pipeline.progress import SparkProgress

    spark = _session(args)
    with SparkProgress(spark, enabled=args.progress):
        result = export(spark, _store(args), args.output, topics=args.topic or None, start_ms=_time_ms(args.start),
                        end_ms=_time_ms(args.end), mode=args.mode)
    _print(args, result.__dict__, f"exported {result.rows} records into {result.partitions} "
                                  f"topic/date partitions under {result.output_dir}")
    return 0


def run_export_stream(args) -> int:
    from store.pipeline.jobs_export import export_stream
    from store.pipeline.progress import wait_with_progress

    spark = _session(args)
    query = export_stream(spark, _store(args), args.output, args.checkpoint, topics=args.topic or None,
                          trigger_seconds=args.trigger_seconds, available_now=args.available_now)
    try:
        wait_with_progress(query, spark, timeout_s=args.timeout, enabled=args.progress)
    finally:
        query.stop()
    progress = query.lastProgress or {}
    _print(args, {"last_progress": progress}, f"stream stopped; last batch {progress.get('batchId', '-')}, "
                                                f"{progress.get('numInputRows', 0)} rows")
    return 0


def run_rates(args) -> int:
    from store.pipeline.jobs_export import topic_rates_stream

    spark = _session(args)
    frame = topic_rates_stream(spark, _store(args), window_seconds=args.window_seconds,
                               starting="earliest" if args.from_start else "latest")
    query = (frame.writeStream.outputMode("update").format("console").option("truncate", "false")
             .trigger(processingTime=f"{args.trigger_seconds} seconds").start())
    try:
        query.awaitTermination(args.timeout)
    finally:
        query.stop()
    return 0


def run_stats(args) -> int:
    from store.pipeline.jobs_stats import stats
    from store.pipeline.progress import SparkProgress

    spark = _session(args)
    with SparkProgress(spark, enabled=args.progress):
        frames = stats(spark, _store(args), bucket_ms=int(args.bucket_seconds * 1000), top=args.top,
                       topics=args.topic or None)
    payload = {name: frame.to_dict(orient="records") for name, frame in frames.items()}
    text = "\n\n".join(f"== {name}\n{frame.to_string(index=False)}" for name, frame in frames.items())
    _print(args, payload, text)
    return 0


def run_verify(args) -> int:
    from store.pipeline.jobs_verify import verify
    from store.pipeline.progress import SparkProgress

    spark = _session(args)
    with SparkProgress(spark, enabled=args.progress):
        report = verify(spark, _store(args), max_examples=args.max_examples)
    payload = {"clean": report.clean, "log_min_offset": report.log_min_offset,
               "log_end_offset": report.log_end_offset, "counts": report.counts, "examples": report.examples}
    _print(args, payload, report.summary())
    return 0 if report.clean else 1


def run_rebuild(args) -> int:
    from store.pipeline.jobs_rebuild import NO_MASTER, rebuild
    from store.pipeline.progress import ByteProgress

    # One bar over the commit log's bytes, moved by the driver as it writes in log order (the Spark
    # task bar would only show decode groups finishing ahead of the writer).
    bar = ByteProgress("rebuild", enabled=args.progress)
    spark = None if args.master == NO_MASTER else _session(args)
    try:
        result = rebuild(_store(args), args.output, master=NO_MASTER if spark is None else None, spark=spark,
                         store_type=args.store_type, progress=bar)
    finally:
        bar.close()
    _print(args, {**result.__dict__}, result.summary())
    return 0


def run_migrate(args) -> int:
    from store.pipeline.jobs_migrate import migrate
    from store.pipeline.jobs_rebuild import NO_MASTER
    from store.pipeline.progress import SparkProgress

    spark = None if args.master == NO_MASTER else _session(args)
    if spark is None:
        result = migrate(_store(args), args.to, args.output, master=NO_MASTER)
    else:
        with SparkProgress(spark, enabled=args.progress):
            result = migrate(_store(args), args.to, args.output, spark=spark)
    payload = {"clean": result.clean, "units_copied": result.units_copied, "target": result.target.root_dir,
               "target_store_type": result.target.store_type, "backup_dir": result.backup_dir,
               "verified_queues": result.verify.queues, "verified_units": result.verify.units,
               "mismatches": result.verify.mismatches, "examples": result.verify.examples,
               "seconds": result.seconds}
    _print(args, payload, result.summary())
    return 0 if result.clean else 1


def add_spark_subcommands(subparsers) -> None:
    """Add `spark` with its jobs to the `rmqstore` parser (called by store.cli)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", metavar="DIR", required=True, help="store root directory")
    common.add_argument("--master", help="Spark master URL (default: $SPARK_MASTER, else local[2])")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--no-progress", dest="progress", action="store_false", default=sys.stderr.isatty(),
                        help="no progress bar (the default when stderr is not a terminal)")
    common.add_argument("--progress", dest="progress", action="store_true", help="draw a progress bar")
    spark = subparsers.add_parser("spark", help="PySpark pipeline jobs over a store directory")
    jobs = spark.add_subparsers(dest="spark_job", metavar="JOB", required=True)

    export = jobs.add_parser("export", parents=[common], help="commit log -> Parquet by topic and date")
    export.add_argument("output", help="output directory")
    export.add_argument("--topic", action="append", help="only this topic (repeatable)")
    export.add_argument("--start", help="store time from (epoch ms or ISO, inclusive)")
    export.add_argument("--end", help="store time until (epoch ms or ISO, exclusive)")
    export.add_argument("--mode", choices=["overwrite", "append"], default="overwrite")
    export.set_defaults(func=run_export)

    stream = jobs.add_parser("export-stream", parents=[common], help="continuous Parquet export")
    stream.add_argument("output")
    stream.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (keeps the offsets)")
    stream.add_argument("--topic", action="append")
    stream.add_argument("--trigger-seconds", type=float, default=5.0)
    stream.add_argument("--available-now", action="store_true", help="export what is there now, then stop")
    stream.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    stream.set_defaults(func=run_export_stream)

    rates = jobs.add_parser("rates", parents=[common], help="live messages/s per topic (console)")
    rates.add_argument("--window-seconds", type=int, default=10)
    rates.add_argument("--trigger-seconds", type=float, default=5.0)
    rates.add_argument("--from-start", action="store_true", help="include the records already stored")
    rates.add_argument("--timeout", type=float, default=None)
    rates.set_defaults(func=run_rates)

    stats = jobs.add_parser("stats", parents=[common], help="counts, sizes, rates, keys, tags, consumer lag")
    stats.add_argument("--bucket-seconds", type=float, default=60.0)
    stats.add_argument("--top", type=int, default=20)
    stats.add_argument("--topic", action="append")
    stats.set_defaults(func=run_stats)

    verify = jobs.add_parser("verify", parents=[common], help="check consume queues and index against the log")
    verify.add_argument("--max-examples", type=int, default=20)
    verify.set_defaults(func=run_verify)

    rebuild = jobs.add_parser("rebuild", parents=[common],
                              help="consume queues + index files from the commit log alone (--master none: no Spark)")
    rebuild.add_argument("output", help="output directory (gets consumequeue/ and index/; must be fresh)")
    rebuild.add_argument("--store-type", choices=["default", "defaultRocksDB"], default="default",
                         help="consume-queue layout to write (files or RocksDB)")
    rebuild.set_defaults(func=run_rebuild)

    migrate = jobs.add_parser("migrate", parents=[common],
                              help="file consume queues <-> RocksDB, then verify unit by unit")
    migrate.add_argument("--to", choices=["rocksdb", "file"], required=True)
    migrate.add_argument("--output", metavar="ROOT", default=None,
                         help="write ROOT/consumequeue instead of converting in place (old queues kept as a backup)")
    migrate.set_defaults(func=run_migrate)
