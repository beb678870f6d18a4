"""Long polling (RocketMQ's `PullRequestHoldService`, spec §9.4).

A pull that finds nothing new may wait: it parks until dispatch reports an arrival in its queue (the
reput service calls `on_arrival` after each batch) or until its hold time runs out, then the pull runs
once more. Waiting is bounded by the caller's timeout; the service keeps no per-request state beyond a
condition variable, how many pulls hold, and the newest max offset it heard of per queue while one
did.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

from store.api import GetMessageResult, GetMessageStatus

BROKER_SUSPEND_TIMEOUT_MS_PUSH = 15_000   # Java push consumer
BROKER_SUSPEND_TIMEOUT_MS_PULL = 20_000   # pull / lite-pull consumers


class PullRequestHoldService:
    """Max offsets are kept only while a pull holds (`holding`): a pull that found nothing ran after
    its hold began, so every arrival it has not seen comes after that, and is kept. With no pull
    holding, an arrival costs nothing (a pass over thousands of new queues hands over as many)."""

    def __init__(self):
        self._cond = threading.Condition()
        # topic -> queue id -> max offset (ints under a dict per topic, not a tuple per queue: they
        # stay out of the garbage collector's work when thousands of new queues arrive)
        self._max_offsets: dict[str, dict[int, int]] = {}
        self._holders = 0
        self._closed = False

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """While inside, arrivals are kept; enter before the pull that may find nothing."""
        with self._cond:
            self._holders += 1
        try:
            yield
        finally:
            with self._cond:
                self._holders -= 1

    def holds(self) -> bool:
        """Whether a pull holds now: the reput service asks before making the arrivals table."""
        return self._holders > 0

    def on_arrival(self, arrivals: dict[tuple[str, int], int]) -> None:
        """Dispatch listener: `arrivals` maps (topic, queue_id) to the queue's new max offset."""
        if not self._holders:     # read after the units were written: a later hold's pull sees them
            return
        with self._cond:
            tables = self._max_offsets
            for (topic, queue_id), max_offset in arrivals.items():
                table = tables.get(topic)
                if table is None:
                    tables[topic] = table = {}
                table[queue_id] = max_offset
            self._cond.notify_all()

    def wait_for_arrival(self, topic: str, queue_id: int, queue_offset: int,
                         timeout_ms: float) -> bool:
        """Wait until the queue's max offset passes `queue_offset`; False when the time is up.
        Only arrivals while a pull holds are seen (`holding`)."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cond:
            while self._max_offset(topic, queue_id) <= queue_offset and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return not self._closed

    def _max_offset(self, topic: str, queue_id: int) -> int:
        table = self._max_offsets.get(topic)
        return -1 if table is None else table.get(queue_id, -1)

    def shutdown(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def pull_with_hold(pull: Callable[[int], GetMessageResult], hold: PullRequestHoldService,
                   topic: str, queue_id: int, queue_offset: int, long_poll_ms: int,
                   is_closed: Callable[[], bool]) -> GetMessageResult:
    """Run `pull(queue_offset)`; with `long_poll_ms` > 0, a pull that found nothing new parks on
    `hold` until an arrival in (topic, queue_id) or the time is up, then pulls again.

    Waits on: OFFSET_OVERFLOW_ONE and NO_MATCHED_MESSAGE (the broker's PULL_NOT_FOUND), and an
    empty or unknown queue pulled from offset 0. NO_MATCHED_MESSAGE moves on to its next offset
    without waiting (what did not match is skipped). The same loop serves ordinary, LMQ and [5.x]
    batch queues: `pull` picks the queue each time (a batch queue appears with its first unit),
    and arrivals carry a record's queue offset + 1 (for a batch record its base + 1), which is past
    the offset a caught-up consumer waits at."""
    if long_poll_ms <= 0:
        return pull(queue_offset)
    deadline = time.monotonic() + long_poll_ms / 1000.0
    started = time.monotonic()
    offset = queue_offset
    with hold.holding():       # before the first pull: no arrival after it goes unseen
        while True:            # bounded by the deadline: each round waits or moves the offset
            result = pull(offset)
            waiting = result.status in (GetMessageStatus.OFFSET_OVERFLOW_ONE,
                                        GetMessageStatus.NO_MATCHED_MESSAGE) or (
                result.status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                                  GetMessageStatus.NO_MATCHED_LOGIC_QUEUE) and offset == 0)
            remaining_ms = (deadline - time.monotonic()) * 1000
            if not waiting or remaining_ms <= 0:
                break
            if result.status is GetMessageStatus.NO_MATCHED_MESSAGE:
                offset = result.next_begin_offset      # skip what did not match, keep waiting
                continue
            hold.wait_for_arrival(topic, queue_id, offset, remaining_ms)
            if is_closed():
                break
    waited_ms = int((time.monotonic() - started) * 1000)
    if waited_ms:
        result = GetMessageResult(result.status, result.next_begin_offset, result.min_offset,
                                  result.max_offset, result.messages,
                                  result.suggest_pulling_from_slave, waited_ms, result.skipped)
    return result
