"""Page faults ahead of the commit log's writer (`PrefaultService`), off the put thread.

The first write to each page of a new (sparse) segment faults, and the kernel zeroes the page before
the write lands: about a microsecond per 1 KiB put on the put thread, a quarter of its time. This
thread keeps the pages from the last segment's wrote position to `LEAD_BYTES` past it populated
writable (`store.kernel.prefault`: madvise MADV_POPULATE_WRITE, the GIL released), so the put thread
finds them mapped. The bytes are not changed (a crash leaves the same file), only the page cache: up
to `LEAD_BYTES` of zero pages are dirty ahead of the writer, which the next flush writes out.

RocketMQ's `warmMapedFileEnable` writes zeros over a whole new segment (MappedFile.warm here); this
is the lighter, always-on cousin for the segment being written. It runs for the commit log of a
writable ASYNC_FLUSH store where records go into the map (no transient store pool), on Linux, with
the compiled kernel (the twin holds the GIL). Not under SYNC_FLUSH: each group commit's fdatasync
would write the zero pages ahead out, in the producers' wait. A madvise that fails (EINVAL before
Linux 5.14) stops the thread: `unavailable` then holds the error, and puts fault their pages
themselves, as without it.
"""

from __future__ import annotations

import logging
import sys

from store.kernel import COMPILED
from store.kernel.prefault import prefault
from store.mappedfile.mapped_file_queue import MappedFileQueue
from store.services.flush import _ServiceThread

log = logging.getLogger(__name__)

# Few looks (each takes the GIL from the put thread), a lead that outlasts one at 500 MB/s of puts.
LEAD_BYTES = 12 << 20       # populated ahead of the wrote position (~50 ms of puts at 250 MB/s)
MIN_STEP_BYTES = 6 << 20    # a madvise covers at least this much (unless the segment ends first)
INTERVAL_S = 0.020          # between looks at the wrote position


def prefault_supported() -> bool:
    """Whether a store starts the service (Linux, the compiled kernel)."""
    return COMPILED and sys.platform.startswith("linux")


class PrefaultService(_ServiceThread):
    """Keeps [wrote position, + lead) of the queue's last segment populated (see the module)."""

    name = "PrefaultService"

    def __init__(self, queue: MappedFileQueue, *, lead_bytes: int = LEAD_BYTES,
                 min_step_bytes: int = MIN_STEP_BYTES, interval_s: float = INTERVAL_S,
                 advise=prefault):
        super().__init__()
        self.queue = queue
        self.lead_bytes = lead_bytes
        self.min_step_bytes = min_step_bytes
        self.interval_s = interval_s
        self._advise = advise
        self._segment = None        # the segment `_done` belongs to
        self._done = 0              # populated up to here in it
        self.advised_bytes = 0
        self.unavailable: OSError | None = None

    def run_once(self) -> None:
        self._wait(self.interval_s)
        if not self._stop.is_set():
            self.advance()

    def advance(self) -> int:
        """One step: populate what the lead asks for past the last segment's wrote position, if at
        least a step's worth (or up to the segment's end); the bytes advised."""
        if self.unavailable is not None:
            return 0
        files = self.queue.files
        if not files:
            return 0
        segment = files[-1]
        if segment is not self._segment:
            self._segment, self._done = segment, 0
        if segment.write_buffer is not None or segment.read_only or segment.destroyed:
            return 0
        position = segment.wrote_position
        start = max(position, self._done)
        end = min(segment.file_size_bytes, position + self.lead_bytes)
        if end <= start or (end - start < self.min_step_bytes and end < segment.file_size_bytes):
            return 0
        try:
            advised = self._advise(segment.buffer, start, end - start)
        except ValueError:
            return 0        # the map closed under it (the store closing): nothing to populate
        except OSError as error:
            self.unavailable = error
            self._stop.set()
            log.warning("%s stops: madvise(MADV_POPULATE_WRITE) failed (%s); puts fault their "
                        "pages themselves", self.name, error)
            return 0
        self._done = end
        self.advised_bytes += advised
        return advised
