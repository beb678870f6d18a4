"""`ServiceThread` (store/services/service_thread.py): a stopped service starts again, as RocketMQ's
`ServiceThread.start` resets `stopped`."""

from __future__ import annotations

import threading

from store.services.service_thread import ServiceThread


class _Loop(ServiceThread):
    def __init__(self):
        super().__init__()
        self.rounds = 0
        self.ran = threading.Event()

    def _run(self):
        while not self._stop.is_set():
            self.rounds += 1
            self.ran.set()
            self._stop.wait(0.001)


def test_a_stopped_service_runs_again_when_started():
    loop = _Loop()
    loop._start_thread(loop._run, "Loop")
    assert loop.ran.wait(10)
    loop._join()
    assert loop._thread is None and loop._stop.is_set()
    loop.ran.clear()
    loop._start_thread(loop._run, "Loop")
    assert loop.ran.wait(10), "the second start must run the loop again"
    assert loop._thread.name == "Loop"
    loop._join()
