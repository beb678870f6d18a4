"""The acknowledgement log of a SIGKILLed writer (tests/test_schedule_crash.py, test_timer_host_crash.py).

The writer process appends one unbuffered line per event: `a N` when put N was acknowledged (PUT_OK),
`put-done` after the last put, and `d N` now and then with how many messages its running service has
delivered so far. The parent reads the log while the writer runs, kills it at the moment it waits for,
and then knows what the store promised: a torn last line is not an acknowledgement.
"""

from __future__ import annotations

import os
import signal
import time


class AckWriter:
    """The writer's side: unbuffered appends, so that a SIGKILL loses nothing that was written."""

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def acked(self, n: int) -> None:
        os.write(self._fd, b"a %d\n" % n)

    def put_done(self) -> None:
        os.write(self._fd, b"put-done\n")

    def report_delivered(self, count_of, deadline_s: float) -> None:
        """Write `d <count_of()>` every 20 ms until the deadline (the parent kills us before)."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            os.write(self._fd, b"d %d\n" % count_of())
            time.sleep(0.02)


def read_acks(path: str) -> tuple[set, int, bool]:
    """(acknowledged put numbers, the last delivered count, whether the puts were done)."""
    acked, delivered, done = set(), 0, False
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")[:-1]     # a torn last line is not an acknowledgement
    except FileNotFoundError:
        return acked, delivered, done
    for line in lines:
        if line.startswith(b"a "):
            acked.add(int(line[2:]))
        elif line.startswith(b"d "):
            delivered = int(line[2:])
        elif line == b"put-done":
            done = True
    return acked, delivered, done


def kill_when(writer, ack_path: str, ready, deadline_s: float) -> tuple[set, int]:
    """SIGKILL `writer` once `ready(acked, delivered, done)` holds (or at the deadline); then what the
    log says was acknowledged and delivered."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if ready(*read_acks(ack_path)):
            break
        time.sleep(0.01)
    writer.send_signal(signal.SIGKILL)
    assert writer.wait(timeout=60) == -signal.SIGKILL
    acked, delivered, _ = read_acks(ack_path)
    return acked, delivered
