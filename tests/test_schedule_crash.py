"""Delay delivery across a SIGKILL of a forked writer (as tests/test_crash.py kills its producers).

The writer (this file run as a script) opens a 4.9 store with its services running (real clock,
levels "1s 2s"), puts delayed messages and acknowledges each PUT_OK with one unbuffered line, then
reports how many the running ScheduleMessageService delivered. The parent kills it with SIGKILL
(during the puts, or after some deliveries; or, with the 18 default levels and a writer clock
running an hour per second, after deliveries at every level), reopens the store with a fake clock
far ahead and delivers everything left.

What RocketMQ promises and we check: every acknowledged message reaches its real topic (no loss);
a message arrives at most twice (one crash); and the repeated ones of a level are one contiguous run
of its queue, the ones delivered after the last persist of delayOffset.json.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time

if __name__ == "__main__":      # the writer process: make the repository importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest

from store import Message, MessageStore
from store.api import GetMessageStatus
from tests.ack_log import AckWriter, kill_when
from tests.engine_util import FakeClock, small_config
from tests.fixtures_util import REPO_ROOT

LEVELS = "1s 2s"
MESSAGES = 400
DEADLINE_S = 60


DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
FAST = 3600          # every_level: the writer's clock runs an hour per real second


def _config(root, levels=LEVELS):
    return small_config(root, store_format="4.9", message_delay_level=levels)


def _level_count(levels: str) -> int:
    return len(levels.split())


def _child(root: str, ack_path: str, levels: str, speed: int) -> None:
    acks = AckWriter(ack_path)
    started_ms, started_s = time.time_ns() // 1_000_000, time.monotonic()
    clock = (lambda: started_ms + int((time.monotonic() - started_s) * 1000 * speed))
    store = MessageStore.open(_config(root, levels), clock_ms=clock)
    count = _level_count(levels)
    for n in range(MESSAGES):
        message = Message("RealT", b"%d" % n, queue_id=n % 3,
                          properties={"DELAY": str(n % count + 1)})
        if store.put_message(message).ok:
            acks.acked(n)
    acks.put_done()
    acks.report_delivered(lambda: store.services.schedule.delivered_messages, DEADLINE_S)


def _real_topic(store) -> dict[int, list[int]]:
    out = {}
    for queue_id in range(3):
        bodies, offset = [], 0
        for _ in range(10_000):
            result = store.get_message("g", "RealT", queue_id, offset, 32)
            if result.status is not GetMessageStatus.FOUND:
                break
            bodies.extend(int(m.body) for m in result.messages)
            offset = result.next_begin_offset
        out[queue_id] = bodies
    return out


@pytest.mark.parametrize("moment, levels, speed", [
    ("during_puts", LEVELS, 1), ("after_deliveries", LEVELS, 1),
    ("every_level", DEFAULT_LEVELS, FAST)])
def test_sigkill_loses_no_delayed_message(tmp_path, moment, levels, speed):
    root, ack_path = str(tmp_path / "store"), str(tmp_path / "acks")
    count = _level_count(levels)
    # A fresh interpreter (fork + exec), not a bare fork: a fork of a test process that holds other
    # threads (stores kept open by earlier modules) could inherit a lock held by one of them.
    writer = subprocess.Popen([sys.executable, os.path.abspath(__file__), root, ack_path, levels,
                               str(speed)], cwd=REPO_ROOT)
    if moment == "during_puts":
        acked, _ = kill_when(writer, ack_path, lambda a, d, done: len(a) >= 50 or done, DEADLINE_S)
    else:
        wanted = 60 if moment == "after_deliveries" else 200
        acked, delivered = kill_when(writer, ack_path, lambda a, d, done: d >= wanted, DEADLINE_S)
        assert delivered >= wanted, "the running service did not deliver within the deadline"
    assert acked
    persisted = os.path.exists(os.path.join(root, "config", "delayOffset.json"))
    # Past every delay, and past the fast writer's clock (a 60 s run at FAST is 60 h ahead).
    clock = FakeClock(start_ms=time.time_ns() // 1_000_000 + 1000 * 3_600_000)
    with MessageStore.open(_config(root, levels), clock_ms=clock, start_services=False) as store:
        store.dispatch_pending()
        for _ in range(100):
            if store.deliver_delayed() == 0:
                break
        store.dispatch_pending()
        assert all(view.pending == 0 for view in store.inspect.delay_levels())
        got = _real_topic(store)
        scheduled = {v.level: v.max_offset for v in store.inspect.delay_levels()}
    counts = collections.Counter(n for bodies in got.values() for n in bodies)
    assert acked <= set(counts), sorted(acked - set(counts))[:10]
    assert max(counts.values()) <= 2
    if moment != "during_puts" and not persisted:
        # No persist before the kill (the first comes after 10 s): all delivered come again.
        assert sum(1 for c in counts.values() if c == 2) >= delivered
    for level in range(1, count + 1):
        # The n of each level in queue order (the writer put them in n order, one thread).
        order = sorted(n for n in counts if n % count + 1 == level)
        assert len(order) == scheduled[level]
        repeated = [i for i, n in enumerate(order) if counts[n] == 2]
        if repeated:
            assert repeated == list(range(repeated[0], repeated[-1] + 1)), repeated


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
    os._exit(0)
