"""Running one pipeline job (stats, verify, export, rebuild from store/pipeline/jobs_*) in a background thread.

Spark is started lazily by the first run (store.pipeline.session.build_session, local mode); the page
shows the phase, the elapsed time and the active stages' tasks (Spark's status tracker) while the job
runs. Only one job runs at a time per process.

Spark is optional (the `spark` extra): without pyspark the page offers the pandas path, `pandas stats`,
which decodes the same files with the same per-split readers the Spark sources use
(store.pipeline.frames) in this process and aggregates them with pandas: the stats job's `queues`,
`topics` and `consumer_lag` tables, same columns.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time

JOBS = ("stats", "verify", "export", "rebuild")
PANDAS_JOBS = ("pandas stats",)
SPARK_INSTALL = "pip install -e '.[spark]'"
_RUN_LOCK = threading.Lock()


def jobs_available() -> bool:
    return all(importlib.util.find_spec(f"store.pipeline.jobs_{name}") is not None for name in JOBS)


def spark_available() -> bool:
    """True when pyspark imports (the `spark` extra is installed)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return True


def available_jobs() -> tuple[str, ...]:
    return (JOBS if spark_available() else ()) + PANDAS_JOBS


def pandas_stats(store_dir: str) -> dict:
    """The stats job's queues, topics and consumer_lag tables, computed with pandas (no Spark)."""
    import pandas as pd

    from store.pipeline.frames import read_commitlog, read_consume_queues
    from store.pipeline.jobs_stats import load_consumer_offsets

    log = read_commitlog(store_dir, columns=["topic", "queue_id", "queue_offset", "store_size",
                                             "store_timestamp", "keys", "uniq_key", "tags"])
    queues = log.groupby(["topic", "queue_id"], as_index=False).agg(
        messages=("queue_offset", "size"), bytes=("store_size", "sum"),
        min_queue_offset=("queue_offset", "min"), max_queue_offset=("queue_offset", "max"),
        first_store_timestamp=("store_timestamp", "min"), last_store_timestamp=("store_timestamp", "max"))
    keys = log.assign(key=log["keys"].fillna("").str.split(" ")).explode("key")
    keys = keys[keys["key"].fillna("") != ""].groupby("topic")["key"].nunique().rename("distinct_keys")
    topics = log.groupby("topic").agg(
        messages=("queue_offset", "size"), bytes=("store_size", "sum"),
        distinct_uniq_keys=("uniq_key", "nunique"), distinct_tags=("tags", "nunique"),
        queues=("queue_id", "nunique")).join(keys, how="left").fillna({"distinct_keys": 0})
    topics["distinct_keys"] = topics["distinct_keys"].astype("int64")
    offsets = load_consumer_offsets(store_dir)
    columns = ["group", "topic", "queue_id", "consumer_offset", "max_offset", "lag"]
    if offsets.empty:
        lag = pd.DataFrame(columns=columns)
    else:
        cq = read_consume_queues(store_dir)
        cq_max = cq.groupby(["topic", "queue_id"])["queue_offset"].max().add(1).rename("cq_max")
        log_max = log.groupby(["topic", "queue_id"])["queue_offset"].max().add(1).rename("log_max")
        maxima = pd.concat([cq_max, log_max], axis=1).reset_index()
        maxima["max_offset"] = maxima["cq_max"].fillna(maxima["log_max"]).fillna(0).astype("int64")
        lag = offsets.merge(maxima[["topic", "queue_id", "max_offset"]], on=["topic", "queue_id"],
                            how="left")
        lag["max_offset"] = lag["max_offset"].fillna(0).astype("int64")
        lag["lag"] = (lag["max_offset"] - lag["consumer_offset"]).clip(lower=0)
        lag = lag[columns].sort_values(["group", "topic", "queue_id"]).reset_index(drop=True)
    return {"queues": queues.sort_values(["topic", "queue_id"]).reset_index(drop=True),
            "topics": topics.reset_index().sort_values("topic").reset_index(drop=True),
            "consumer_lag": lag}


class PipelineRun:
    def __init__(self, job: str, store_dir: str, output_dir: str):
        if job not in JOBS + PANDAS_JOBS:
            raise ValueError(f"job must be one of {JOBS + PANDAS_JOBS}")
        self.job, self.store_dir, self.output_dir = job, store_dir, output_dir
        self.phase = "waiting for another job to finish"
        self.result = None
        self.error: str | None = None
        self.started_s = time.monotonic()
        self.finished_s: float | None = None
        self.spark = None
        self._thread = threading.Thread(target=self._run, name=f"pipeline-{job}", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    @property
    def elapsed_s(self) -> float:
        return (self.finished_s or time.monotonic()) - self.started_s

    def tasks(self) -> tuple[int, int] | None:
        """(completed, total) tasks of the active Spark stages, None when no stage is running."""
        if self.spark is None or self.done:
            return None
        from store.pipeline.progress import SparkProgress
        done, total, _ = SparkProgress(self.spark, enabled=False).snapshot()
        return (done, total) if total else None

    def _run(self) -> None:
        with _RUN_LOCK:
            if self.job in PANDAS_JOBS:
                self._run_pandas()
                return
            try:
                self.phase = "starting Spark (local)"
                from store.pipeline.session import build_session
                self.spark = spark = build_session("local[1]", "rmq-inspector")
                self.phase = f"running {self.job}"
                if self.job == "stats":
                    from store.pipeline.jobs_stats import stats
                    self.result = stats(spark, self.store_dir)
                elif self.job == "verify":
                    from store.pipeline.jobs_verify import verify
                    self.result = verify(spark, self.store_dir)
                elif self.job == "rebuild":
                    # A fresh directory per run: rebuild refuses one that already holds queues.
                    from store.pipeline.jobs_rebuild import rebuild
                    out_dir = os.path.join(self.output_dir, f"rebuild-{time.strftime('%Y%m%d-%H%M%S')}")
                    self.result = rebuild(self.store_dir, out_dir, spark=spark)
                else:
                    from store.pipeline.jobs_export import export
                    self.result = export(spark, self.store_dir, self.output_dir)
                self.phase = "done"
            except Exception as error:  # noqa: BLE001 - Spark/JVM errors have no common base class
                self.error = f"{type(error).__name__}: {str(error)[:2000]}"
                self.phase = "failed"
            finally:
                self.finished_s = time.monotonic()

    def _run_pandas(self) -> None:
        try:
            self.phase = "decoding the files and aggregating with pandas"
            self.result = pandas_stats(self.store_dir)
            self.phase = "done"
        except Exception as error:  # noqa: BLE001 - shown on the page, like a Spark job's failure
            self.error = f"{type(error).__name__}: {str(error)[:2000]}"
            self.phase = "failed"
        finally:
            self.finished_s = time.monotonic()
