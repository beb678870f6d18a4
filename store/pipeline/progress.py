"""A text progress bar fed by Spark's status tracker (the CLI's `--progress`)."""

from __future__ import annotations

import sys
import threading
import time

BAR_WIDTH = 30


class SparkProgress:
    """Context manager: while open, a thread redraws one stderr line with the active stages' tasks."""

    def __init__(self, spark, *, enabled: bool = True, interval_s: float = 0.5, stream=None):
        self.tracker = spark.sparkContext.statusTracker()
        self.enabled = enabled
        self.interval_s = interval_s
        self.stream = stream or sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def snapshot(self) -> tuple[int, int, list[int]]:
        """(completed tasks, total tasks, stage ids) over the active stages."""
        done = total = 0
        stage_ids = list(self.tracker.getActiveStageIds())
        for stage_id in stage_ids:
            info = self.tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return done, total, stage_ids

    def _draw(self) -> None:
        done, total, stages = self.snapshot()
        if not total:
            return
        filled = int(BAR_WIDTH * done / total)
        label = ",".join(str(s) for s in stages[:3])
        self.stream.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} tasks (stage {label})  ")
        self.stream.flush()
        self._drawn = True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._draw()

    def __enter__(self) -> "SparkProgress":
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="spark-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s)
        if self._drawn:
            self.stream.write("\r" + " " * (BAR_WIDTH + 40) + "\r")
            self.stream.flush()


def wait_with_progress(query, spark, *, timeout_s: float | None = None, enabled: bool = True) -> None:
    """Block on a streaming query (until it ends or `timeout_s`), showing micro-batch progress."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with SparkProgress(spark, enabled=enabled):
        while query.isActive and (deadline is None or time.monotonic() < deadline):
            query.awaitTermination(1)


class ByteProgress:
    """A progress callback `(done_bytes, total_bytes)` drawing one stderr line (rebuild's log order
    progress: decoded splits arrive from Spark, the bar moves as the driver writes them)."""

    def __init__(self, label: str, *, enabled: bool = True, stream=None, min_interval_s: float = 0.2):
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.min_interval_s = min_interval_s
        self._last_draw = 0.0
        self._drawn = False

    def __call__(self, done_bytes: int, total_bytes: int) -> None:
        now = time.monotonic()
        if not self.enabled or total_bytes <= 0 or (now - self._last_draw < self.min_interval_s
                                                    and done_bytes < total_bytes):
            return
        self._last_draw = now
        filled = int(BAR_WIDTH * min(done_bytes, total_bytes) / total_bytes)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                          f"{done_bytes / 2**20:,.1f}/{total_bytes / 2**20:,.1f} MiB  ")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * (BAR_WIDTH + 60) + "\r")
            self.stream.flush()
