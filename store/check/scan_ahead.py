"""The check's commit-log walk, scanned ahead on a second thread.

`ScanAhead(plan)` scans the segments of `plan` in order, batch by batch (`kernel.scan`, then the C
parts of `store.check.columns.RecordColumns._take`: queue groups, key hashes, tag groups; all of them
release the GIL), up to `depth` batches ahead of the walk, while the walk's thread judges the
batches before them. `take(buf, position, size)` hands the walk the batch it asks for when the
thread scanned exactly that one, else None (the walk scans it itself): a walk that left a segment's
batches for the record-by-record path (a record the kernel does not judge) gets no more batches of
that segment, and the thread skips the rest of it.

Nothing is shared but the batches handed over: the thread writes into a buffer only while it holds
it (taken from `free`), the walk reads one only after `take` (until its next call). `close` stops the
thread and waits for it, so no read of a segment's map outlives the walk.
"""

from __future__ import annotations

import queue
import threading

from store import kernel

_END = object()


class _Batch:
    __slots__ = ("index", "buf", "position", "out", "answer")

    def __init__(self, index: int, buf, position: int, out, answer):
        self.index, self.buf, self.position, self.out, self.answer = (index, buf, position, out,
                                                                      answer)


class ScanAhead:
    def __init__(self, plan: list, rows: int, scan_columns, depth: int = 1):
        """`plan`: (buf, size) of the segments the walk takes, in order; `scan_columns(buf,
        position, size, out)` -> (count, stop, kind, parts), run on the thread."""
        self._plan = plan
        self._order = {id(buf): index for index, (buf, _) in enumerate(plan)}
        self._scan_columns = scan_columns
        self._free: queue.Queue = queue.Queue()
        for _ in range(depth + 1):
            self._free.put(kernel.scan_buffer(rows))
        self._ready: queue.Queue = queue.Queue()
        self._skip: set[int] = set()          # plan indexes the walk left (no more batches)
        self._stop = False
        self._held = None                     # the buffer of the batch the walk has now
        self._peeked = None                   # a batch of a later segment, taken off _ready
        self._thread = threading.Thread(target=self._run, name="rmq-check-scan", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for index, (buf, size) in enumerate(self._plan):
                position = 0
                while position < size and index not in self._skip:
                    out = self._free.get()
                    if self._stop:
                        return
                    try:
                        answer = self._scan_columns(buf, position, size, out)
                    except Exception:               # the walk's own scan meets it, and decides
                        self._ready.put(_Batch(index, buf, position, out, None))
                        break
                    self._ready.put(_Batch(index, buf, position, out, answer))
                    count, stop, kind, _ = answer
                    if kind != kernel.STOP_FULL or stop >= size:
                        break
                    position = stop
        finally:
            self._ready.put(_END)

    def take(self, buf, position: int, size: int):
        """(count, stop, kind, rows, parts) of the batch of `buf` at `position`, or None."""
        if self._held is not None:
            self._free.put(self._held)        # the walk is done with the previous batch
            self._held = None
        index = self._order.get(id(buf))
        if index is None or index in self._skip or self._plan[index][1] != size:
            return None
        while True:
            batch = self._peeked if self._peeked is not None else self._ready.get()
            self._peeked = None
            if batch is _END or batch.index > index:
                self._peeked = batch          # the thread is past this segment
                return None
            if batch.index < index or batch.position < position:
                self._free.put(batch.out)     # a batch the walk went past
                continue
            if batch.position > position or batch.answer is None:
                self._free.put(batch.out)     # the walk left the thread's batches
                self._skip.add(index)
                return None
            self._held = batch.out
            count, stop, kind, parts = batch.answer
            return count, stop, kind, batch.out[:count], parts

    def close(self) -> None:
        self._stop = True
        self._skip.update(range(len(self._plan)))
        self._free.put(None)                  # wakes a thread waiting for a buffer
        self._thread.join()
        self._held = self._peeked = None
