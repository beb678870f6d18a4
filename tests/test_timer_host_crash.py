"""Timer messages across a crash (store/services/timer.py recovery on a writable open).

In-process (`MessageStore.crash()`: no flush, no checkpoint, maps left as a killed process leaves
them) with a fake clock, and a SIGKILL of a forked writer (as tests/test_schedule_crash.py does): the
writer (this file run as a script) opens a 5.x store with its services running on a sped-up clock,
puts timer messages of the three kinds and acknowledges each PUT_OK with one unbuffered line, then
reports what the running TimerService delivered. The parent kills it, reopens the store with a clock
past every due time and runs the timer service until nothing is left.

What RocketMQ promises and we check: every acknowledged timer message reaches its real topic at
least once (none lost; a crash may deliver some twice: the read time and queue offset are
checkpointed once a second), and `check()` finds nothing wrong with the timer files afterwards.
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
from store.meta.lockfile import create_abort
from tests.ack_log import AckWriter, kill_when
from tests.engine_util import FakeClock, small_config
from tests.fixtures_util import REPO_ROOT

MESSAGES = 300
DEADLINE_S = 60
SPEED = 10                      # the writer's clock runs 10 s per real second
KINDS = ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")


def _config(root, **overrides):
    return small_config(root, store_format="5.x", mapped_file_size_timer_log=4096, **overrides)


def _message(n: int, now_ms: int) -> Message:
    kind = KINDS[n % 3]
    delay_ms = 1000 + (n * 337) % 20_000
    value = {"TIMER_DELIVER_MS": str(now_ms + delay_ms), "TIMER_DELAY_SEC": str(delay_ms // 1000),
             "TIMER_DELAY_MS": str(delay_ms)}[kind]
    return Message("RealT", b"%d" % n, queue_id=n % 3, keys=f"k{n}",
                   properties={kind: value, "UNIQ_KEY": f"U{n:08d}"})


def _real_topic(store) -> collections.Counter:
    counts = collections.Counter()
    for queue_id in range(3):
        offset = 0
        for _ in range(10_000):
            result = store.get_message("g", "RealT", queue_id, offset, 32)
            if result.status is not GetMessageStatus.FOUND:
                break
            counts.update(int(m.body) for m in result.messages)
            offset = result.next_begin_offset
    return counts


def _deliver_everything(store) -> None:
    for _ in range(200):
        store.dispatch_pending()
        if store.deliver_timers() == 0 and store.services.timer.curr_read_time_ms >= \
                store.services.timer.curr_write_time_ms:
            break
    store.dispatch_pending()


def _timer_problems(store):
    return [f for f in store.check() if f.component == "timer" and f.severity != "info"]


def test_in_process_crash_loses_no_timer(tmp_path):
    """The crash comes after enqueues the 1-second flush has not written: the wheel on disk lacks
    their slots and the timercheck is behind; recovery revises the slots from the timer log."""
    clock = FakeClock(start_ms=1_800_000_000_000)
    root = tmp_path / "store"
    store = MessageStore.open(_config(root), clock_ms=clock, start_services=False)
    create_abort(str(root), "5.x")          # as a started store has it: the crash is seen
    timer = store.services.timer
    for n in range(MESSAGES):
        assert store.put_message(_message(n, clock.now)).ok
        if n == 49:
            store.dispatch_pending()
            store.deliver_timers()          # enqueues 50 and flushes (the first round does)
            clock.now += 300
    store.dispatch_pending()
    while timer.enqueue_once():             # the other 250: in the log and the wheel's memory only
        pass
    clock.now += 3_000
    timer.enqueue_once()                    # moves the write time (nothing left to enqueue)
    delivered = timer.dequeue_once()        # some delivered, read time not checkpointed
    assert delivered > 0 and timer.timer_log.max_offset() > 2 * 4096
    store.crash()
    clock.now += 60_000
    with MessageStore.open(_config(root), clock_ms=clock, start_services=False) as store:
        _deliver_everything(store)
        counts = _real_topic(store)
        assert set(counts) == set(range(MESSAGES))
        # At least once: what was delivered before the crash comes again (the read time is
        # checkpointed once a second), and the units enqueued after the checkpoint's queue offset
        # are enqueued again (recovery takes min(last unit's offset + 1, masterTimerQueueOffset)).
        assert sum(c >= 2 for c in counts.values()) >= delivered
        assert _timer_problems(store) == []


def test_a_torn_unit_is_cut_and_the_log_goes_on(tmp_path):
    """Bytes after the last whole unit (a torn write) end the log at recovery: they are cut, the
    next units are written there, and every timer is delivered."""
    clock = FakeClock(start_ms=1_800_000_000_000)
    root = tmp_path / "store"
    store = MessageStore.open(_config(root), clock_ms=clock, start_services=False)
    create_abort(str(root), "5.x")
    for n in range(10):
        assert store.put_message(_message(n, clock.now)).ok
    store.dispatch_pending()
    store.deliver_timers()
    end = store.services.timer.timer_log.max_offset()
    store.crash()
    path = os.path.join(root, "timerlog", "%020d" % 0)
    with open(path, "r+b") as handle:
        handle.seek(end)
        handle.write((52).to_bytes(4, "big") + bytes(8) + (0x55).to_bytes(4, "big") + b"\x07" * 20)
    with MessageStore.open(_config(root), clock_ms=clock, start_services=False) as store:
        timer = store.services.timer
        assert timer.recovery.process_offset == end == timer.timer_log.max_offset()
        for n in range(10, 20):
            assert store.put_message(_message(n, clock.now)).ok
        store.dispatch_pending()
        store.deliver_timers()
        assert timer.timer_log.max_offset() == end + 10 * 52
        clock.now += 60_000
        _deliver_everything(store)
        assert set(_real_topic(store)) == set(range(20))
        assert _timer_problems(store) == []


def _child(root: str, ack_path: str) -> None:
    acks = AckWriter(ack_path)
    started_ms, started_s = time.time_ns() // 1_000_000, time.monotonic()
    clock = (lambda: started_ms + int((time.monotonic() - started_s) * 1000 * SPEED))
    store = MessageStore.open(_config(root), clock_ms=clock)
    for n in range(MESSAGES):
        if store.put_message(_message(n, clock())).ok:
            acks.acked(n)
        time.sleep(0.002)
    acks.put_done()
    acks.report_delivered(lambda: store.services.timer.delivered_messages, DEADLINE_S)


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["during_puts", "after_deliveries"])
def test_sigkill_loses_no_timer(tmp_path, moment):
    root, ack_path = str(tmp_path / "store"), str(tmp_path / "acks")
    writer = subprocess.Popen([sys.executable, os.path.abspath(__file__), root, ack_path],
                              cwd=REPO_ROOT)
    ready = (lambda a, d, done: len(a) >= 100 or done) if moment == "during_puts" else \
        (lambda a, d, done: d >= 80)
    acked, delivered = kill_when(writer, ack_path, ready, DEADLINE_S)
    assert acked
    if moment == "after_deliveries":
        assert delivered >= 80, "the running service did not deliver within the deadline"
    # Past every due time and the writer's fast clock (60 s at SPEED), within the wheel's 7 days.
    clock = FakeClock(start_ms=time.time_ns() // 1_000_000 + 3_600_000)
    with MessageStore.open(_config(root), clock_ms=clock, start_services=False) as store:
        _deliver_everything(store)
        counts = _real_topic(store)
        assert acked <= set(counts), sorted(acked - set(counts))[:10]
        assert _timer_problems(store) == []


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
    os._exit(0)
