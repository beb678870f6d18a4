"""The slot-chain verdict of each index file (`fast_index.chains_clean`), worked out on a thread of
its own while the consume queues are checked.

The verdict is array work over every entry of the file (a few hundred ms for a full 20 M-entry
file); numpy releases the interpreter lock for most of it, so the two checks overlap on two cores.
The index check (store.check.index) asks `verdict(path, index_count)` for each file and works the
verdict out itself when there is none: the file was not readable here, or its indexCount changed
since (a broker still writing it).
"""

from __future__ import annotations

import mmap
import os
import threading

import numpy as np

from store.check import fast_index
from store.check.log_view import release_map
from store.codec.index_codec import (ENTRY_DTYPE, HASH_SLOT_SIZE, INDEX_HEADER_SIZE, decode_header,
                                     index_file_size)


class ChainVerdicts:
    """`chains_clean` of every index file of `index_dir`, computed on a thread started here."""

    def __init__(self, index_dir: str, slots: int, max_index_num: int):
        self._verdicts: dict[str, tuple[int, bool]] = {}
        self._stop = False
        self._thread = threading.Thread(target=self._run, args=(index_dir, slots, max_index_num),
                                        name="check-index-chains", daemon=True)
        self._thread.start()

    def _run(self, index_dir: str, slots: int, max_index_num: int) -> None:
        expected = index_file_size(slots, max_index_num)
        try:
            names = sorted(os.listdir(index_dir))
        except OSError:
            return
        for name in names:
            if self._stop:
                return
            path = os.path.join(index_dir, name)
            try:
                if name.isdigit() and os.path.isfile(path) and os.path.getsize(path) == expected:
                    with open(path, "rb") as handle:
                        with mmap.mmap(handle.fileno(), expected, access=mmap.ACCESS_READ) as data:
                            found = _verdict(data, slots, max_index_num)
                    if found is not None:
                        self._verdicts[path] = found
            except (OSError, ValueError, BufferError):
                continue              # the index check reads the file itself and reports

    def verdict(self, path: str, index_count: int) -> bool | None:
        """The verdict for `path` if it was worked out at this `index_count` (the header's)."""
        self._thread.join()
        found = self._verdicts.get(path)
        return found[1] if found is not None and found[0] == index_count else None

    def close(self) -> None:
        self._stop = True
        self._thread.join()


def _verdict(data: mmap.mmap, slots: int, max_index_num: int) -> tuple[int, bool] | None:
    header = decode_header(data)
    if not 0 <= header.index_count <= max_index_num:
        return None
    index_count = max(header.index_count, 1)
    slot_table = np.frombuffer(data, dtype=">i4", count=slots, offset=INDEX_HEADER_SIZE)
    entries = np.frombuffer(data, dtype=ENTRY_DTYPE, count=index_count,
                            offset=INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE)
    try:
        return header.index_count, fast_index.chains_clean(slot_table, entries, slots,
                                                           index_count, lambda: release_map(data))
    finally:
        del slot_table, entries       # no export of the map may outlive it

