"""One daemon thread per background service, stopped by an event: RocketMQ's `ServiceThread`
(`org.apache.rocketmq.common.ServiceThread`: `start`, `shutdown` joins, `isStopped`) for the services
that run a loop of their own (`schedule`, `timer`).

A service sets `_stop` / `_thread` in its `__init__` through `ServiceThread.__init__`, starts its loop
with `_start_thread(target, name)` and stops it with `_join()` (sets the event, joins, forgets the
thread), so that a stopped service can be started again.
"""

from __future__ import annotations

import threading


class ServiceThread:
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _start_thread(self, target, name: str) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def _join(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
