"""A pull that may long-poll, run in a thread so the page can show a countdown meanwhile."""

from __future__ import annotations

import threading
import time

from dataclasses import dataclass

from app.paths import InputError
from store.errors import StoreError

MAX_LONG_POLL_MS = 60_000
MAX_MESSAGES = 64


@dataclass(frozen=True)
class StartOffset:
    queue_offset: int
    committed: int          # the group's committed offset when the pull started, -1 if none
    note: str = ""


def start_offset(store, group: str, topic: str, queue_id: int, wanted: int | None) -> StartOffset:
    """Where a pull starts: `wanted`, or (None) the group's committed offset, read now. A group
    that never committed starts at the queue's min offset, as a consumer with CONSUME_FROM_FIRST
    would; the note says so."""
    if not group or not topic:
        raise InputError("Give a consumer group and a topic.")
    committed = store.query_consumer_offset(group, topic, queue_id)
    if wanted is not None:
        note = ""
        if committed >= 0 and wanted < committed:
            note = (f"Starting at {wanted}, before the group's committed offset {committed}: "
                    f"these messages were consumed already.")
        return StartOffset(wanted, committed, note)
    if committed >= 0:
        return StartOffset(committed, committed, f"Started at the group's committed offset {committed}.")
    low = store.get_min_offset_in_queue(topic, queue_id)
    return StartOffset(low, committed, f"The group has no committed offset on this queue: started at "
                                       f"the queue's min offset {low}.")


def commit_moves_back(committed: int, new_offset: int) -> bool:
    """True when committing `new_offset` would move the group backwards (redelivering messages)."""
    return committed >= 0 and new_offset < committed


class PullJob:
    def __init__(self, store, *, group: str, topic: str, queue_id: int, queue_offset: int,
                 max_messages: int, tag_expression: str | None, long_poll_ms: int):
        self.request = dict(group=group, topic=topic, queue_id=queue_id, queue_offset=queue_offset,
                            max_messages=max_messages, tag_expression=tag_expression,
                            long_poll_ms=long_poll_ms)
        self.long_poll_ms = max(0, min(long_poll_ms, MAX_LONG_POLL_MS))
        self.started_s = time.monotonic()
        self.result = None
        self.error: str | None = None
        self._store = store
        self._thread = threading.Thread(target=self._run, name="pull", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        r = self.request
        try:
            self.result = self._store.get_message(
                r["group"], r["topic"], r["queue_id"], r["queue_offset"],
                max(1, min(r["max_messages"], MAX_MESSAGES)),
                tag_expression=r["tag_expression"] or None, long_poll_ms=self.long_poll_ms)
        except (StoreError, ValueError) as error:
            self.error = f"{type(error).__name__}: {error}"

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def remaining_ms(self) -> int:
        elapsed_ms = (time.monotonic() - self.started_s) * 1000
        return max(0, int(self.long_poll_ms - elapsed_ms))

    def wait(self, timeout_s: float) -> bool:
        self._thread.join(timeout_s)
        return self.done
