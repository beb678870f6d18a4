"""Long polling (RocketMQ's `PullRequestHoldService`, spec §9.4).

A pull that finds nothing new may wait: it parks until dispatch reports an arrival in its queue (the
reput service calls `on_arrival` after each batch) or until its hold time runs out, then the pull runs
once more. Waiting is bounded by the caller's timeout; the service keeps no per-request state beyond a
condition variable and the newest max offset it heard of per queue.
"""

from __future__ import annotations

import threading
import time

BROKER_SUSPEND_TIMEOUT_MS_PUSH = 15_000   # Java push consumer
BROKER_SUSPEND_TIMEOUT_MS_PULL = 20_000   # pull / lite-pull consumers


class PullRequestHoldService:
    def __init__(self):
        self._cond = threading.Condition()
        self._max_offsets: dict[tuple[str, int], int] = {}
        self._closed = False

    def on_arrival(self, arrivals: dict[tuple[str, int], int]) -> None:
        """Dispatch listener: `arrivals` maps (topic, queue_id) to the queue's new max offset."""
        with self._cond:
            self._max_offsets.update(arrivals)
            self._cond.notify_all()

    def wait_for_arrival(self, topic: str, queue_id: int, queue_offset: int,
                         timeout_ms: float) -> bool:
        """Wait until the queue's max offset passes `queue_offset`; False when the time is up."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        key = (topic, queue_id)
        with self._cond:
            while self._max_offsets.get(key, -1) <= queue_offset and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return not self._closed

    def note_max_offset(self, topic: str, queue_id: int, max_offset: int) -> None:
        with self._cond:
            if self._max_offsets.get((topic, queue_id), -1) < max_offset:
                self._max_offsets[(topic, queue_id)] = max_offset

    def shutdown(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
