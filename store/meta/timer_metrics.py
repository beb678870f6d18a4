"""`config/timermetrics` (RocketMQ 5.3.3 `TimerMetrics`, a `ConfigManager` JSON file with `.bak`).

`{"dataVersion":{"counter":..,"stateVersion":..,"timestamp":..},"timingCount":{"<real topic>":
{"count":..,"timeStamp":..}}}`: the timers waiting per real topic. `addMetric` adds +1 at enqueue and
-1 at delivery, and each change moves the dataVersion (counter + 1, timestamp = now).
"""

from __future__ import annotations

import json
import os

from store.meta.config_files import JsonConfigFile


class TimerMetricsFile:
    """`config/timermetrics` (`TimerMetrics`): timers waiting per real topic, with a dataVersion;
    +1 at enqueue, -1 at delivery (`addMetric`). Written like RocketMQ's `ConfigManager.persist`."""

    def __init__(self, config_dir: str, clock_ms):
        self.file = JsonConfigFile(os.path.join(config_dir, "timermetrics"), read_only=False)
        self.clock_ms = clock_ms
        self.counts: dict[str, list[int]] = {}
        self.version = {"counter": 0, "stateVersion": 0, "timestamp": clock_ms()}
        self.dirty = False

    def load(self) -> None:
        loaded = self.file.load()
        if isinstance(loaded, dict):
            version = loaded.get("dataVersion") or {}
            self.version.update({k: int(version[k]) for k in self.version if k in version})
            for topic, metric in (loaded.get("timingCount") or {}).items():
                self.counts[str(topic)] = [int(metric.get("count", 0)),
                                           int(metric.get("timeStamp", 0))]

    def add(self, topic: str | None, delta: int) -> None:
        if topic is None:
            return
        now = self.clock_ms()
        entry = self.counts.setdefault(topic, [0, now])
        entry[0] += delta
        entry[1] = now
        self.version["counter"] += 1
        self.version["timestamp"] = now
        self.dirty = True

    def persist(self) -> None:
        if not self.dirty:
            return
        body = {"dataVersion": dict(sorted(self.version.items())),
                "timingCount": {t: {"count": c, "timeStamp": s} for t, (c, s) in self.counts.items()}}
        self.file.persist(json.dumps(body, separators=(",", ":")))
        self.dirty = False
