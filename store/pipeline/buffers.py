"""Batch-sized buffers handed out again once nothing refers to them (`RECYCLER`)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pyarrow as pa


class BufferRecycler:
    """Buffers (decode_columns' outputs, the scan's rows) that come back when their users are gone.

    A fresh buffer page-faults on every 4 KiB it is written (the kernel zeroes each page: a quarter
    of the all-columns decode's time in `perf`, and most of a first run's, as Arrow's pool hands
    freed batch-sized blocks back to the system). Each buffer given out is a view of an array kept
    here; when nothing else refers to that array (the Arrow buffers wrapping the view are freed),
    it is handed out again, already mapped. At most `keep_bytes` are kept; past that, or for small
    outputs, Arrow's pool allocates as before.
    """

    SMALL = 1 << 16

    def __init__(self, keep_bytes: int = 256 << 20):
        self.keep_bytes = keep_bytes
        self._arrays: list[np.ndarray] = []
        self._kept = 0
        self._lock = threading.Lock()

    def __call__(self, size: int):
        if size < self.SMALL:
            return pa.allocate_buffer(size)
        with self._lock:
            best = -1
            for i in range(len(self._arrays)):
                # 2 references: the list's and getrefcount's argument; a view given out adds one.
                if self._arrays[i].shape[0] >= size and sys.getrefcount(self._arrays[i]) == 2 and (
                        best < 0 or self._arrays[i].shape[0] < self._arrays[best].shape[0]):
                    best = i
            if best >= 0:
                return pa.py_buffer(self._arrays[best][:size])
            capacity = -(-size // self.SMALL) * self.SMALL
            if self._kept + capacity > self.keep_bytes:
                return pa.allocate_buffer(size)
            # numpy asks large arrays for transparent huge pages (its madvise_hugepage default):
            # one fault per 2 MiB where the system has them, the first time only.
            array = np.empty(capacity, dtype=np.uint8)
            self._arrays.append(array)
            self._kept += capacity
            return pa.py_buffer(array[:size])


RECYCLER = BufferRecycler()   # decode_columns' outputs and the scan's rows
