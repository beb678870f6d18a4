"""Running one pipeline job (stats, verify, export, rebuild from store/pipeline/jobs_*) in a background thread.

Spark is started lazily by the first run (store.pipeline.session.build_session, local mode); the page
shows the phase, the elapsed time and the active stages' tasks (Spark's status tracker) while the job
runs. Only one job runs at a time per process.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time

JOBS = ("stats", "verify", "export", "rebuild")
_RUN_LOCK = threading.Lock()


def jobs_available() -> bool:
    return all(importlib.util.find_spec(f"store.pipeline.jobs_{name}") is not None for name in JOBS)


class PipelineRun:
    def __init__(self, job: str, store_dir: str, output_dir: str):
        if job not in JOBS:
            raise ValueError(f"job must be one of {JOBS}")
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
