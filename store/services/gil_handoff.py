"""Prompt hand-offs of the interpreter lock while a background service's pass runs.

CPython gives the GIL to a waiting thread only after the switch interval (`sys.getswitchinterval`,
5 ms by default) when the holder runs Python without blocking. A producer putting in a loop holds it
that way; the reput service's pass, meanwhile, gives it up at every system call (the consume-queue
appends, a new file's creation) and every native call that runs without it, and waits up to the
interval each time to take it back. A pass of a few milliseconds' work took 80 ms under a busy
producer, and the first pass of a fresh store (which creates the consume-queue and index files:
about twenty system calls) 200-300 ms: the dispatch fell behind the puts by the whole run
(docs/performance.md, ninth session).

`handoff()` (or `begin()` ... `end()`) lowers the interval to `HANDOFF_INTERVAL_S` while at least
one holder in the process has it, and puts back the value it found when the last one lets go. The
reput service holds it for each pass, and from a pass that found records to the next that finds
none (the wake-up after its 1 ms linger would otherwise wait out the 5 ms too). An idle store leaves
the interval as its host chose it; an interval the host set lower than ours is left alone (a value
the host sets while a hold is on is overwritten when the last holder lets go). Single puts end to
end went from 212-221 k to 239 k msg/s in a same-hour A/B, the dispatch lag after the last put from
23-26 ms to about 1 ms.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

HANDOFF_INTERVAL_S = 0.0005

_lock = threading.Lock()
_depth = 0                  # holders now, in every store of the process
_saved: float | None = None     # the interval found when the first of them began, if we lowered it


def begin(interval_s: float = HANDOFF_INTERVAL_S) -> None:
    """One more holder: the switch interval is at most `interval_s` until its `end()`."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            found = sys.getswitchinterval()
            if found > interval_s:
                _saved = found
                sys.setswitchinterval(interval_s)
        _depth += 1


def end() -> None:
    """One holder less; the last one puts back the interval `begin` found."""
    global _depth, _saved
    with _lock:
        if _depth <= 0:
            raise RuntimeError("gil_handoff.end() without a begin()")
        _depth -= 1
        if _depth == 0 and _saved is not None:
            sys.setswitchinterval(_saved)
            _saved = None


@contextmanager
def handoff(enabled: bool = True, interval_s: float = HANDOFF_INTERVAL_S):
    """Run the body with the switch interval at most `interval_s` (nothing when not `enabled`)."""
    if not enabled:
        yield
        return
    begin(interval_s)
    try:
        yield
    finally:
        end()


class BusyHold:
    """A service's hold from a pass that did work to the next that did none: `note(worked)` after
    each pass, `release()` when the service stops. Does nothing when not `enabled`."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.held = False

    def note(self, worked: bool) -> None:
        if worked and not self.held and self.enabled:
            begin()
            self.held = True
        elif not worked and self.held:
            self.release()

    def release(self) -> None:
        if self.held:
            end()
            self.held = False
