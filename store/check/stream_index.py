"""Which index entries point at a walked record whose keys and store time they match, found during
the commit-log walk.

Index entries are appended in dispatch order, so each file's entries follow the log: for every
window of the walk (store.check.columns) each index file is read on from where the previous window
left it, entry by entry, while the entries point into the window. An entry is GOOD when the record
at its phyOffset was walked, its PHYSICALOFFSET is its offset, its keys are known, one of them
hashes to the entry's keyHash, and its timeDiff is the record's store time less the file's
beginTimestamp in seconds (or it is entry 1). The entry numbers of GOOD entries are kept per file
as runs `[low, high)`. Entries out of log order are not GOOD (the record-by-record code decides).
The file is read through its mapping, a bounded chunk at a time, and its pages released.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from store.check.log_view import release_map
from store.codec.index_codec import ENTRY_DTYPE, HASH_SLOT_SIZE, INDEX_HEADER_SIZE, decode_header

CHUNK_ENTRIES = 1 << 16
_TIME_DIFF_MAX = 2**31 - 1


class _IndexFile:
    def __init__(self, path: str, size: int, slots: int, max_index_num: int):
        with open(path, "rb") as handle:
            self.buffer = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
        self.header = decode_header(self.buffer)
        self.count = self.header.index_count if 0 <= self.header.index_count <= max_index_num else 0
        self.position = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE
        self.cursor = 1                     # entry 0 is no entry
        self.runs: list[list[int]] = []

    def entries(self, first: int, count: int) -> np.ndarray:
        return np.frombuffer(self.buffer, dtype=ENTRY_DTYPE, count=count,
                             offset=self.position + first * ENTRY_DTYPE.itemsize)

    def release(self) -> None:
        release_map(self.buffer)


class EntryMatcher:
    """GOOD entries (see the module doc), per index file name, as runs of entry numbers."""

    def __init__(self, index_dir: str, slots: int, max_index_num: int, expected_size: int):
        self.files: dict[str, _IndexFile] = {}
        self.runs: dict[str, list[list[int]]] = {}
        names = sorted(os.listdir(index_dir)) if os.path.isdir(index_dir) else []
        for name in names:
            path = os.path.join(index_dir, name)
            try:
                if name.isdigit() and os.path.isfile(path) and \
                        os.path.getsize(path) == expected_size:
                    self.files[name] = _IndexFile(path, expected_size, slots, max_index_num)
            except (OSError, ValueError):
                continue

    def take(self, columns, starts: np.ndarray) -> None:
        low, high = int(starts[0]), int(starts[-1]) + 1
        for index_file in self.files.values():
            while index_file.cursor < index_file.count:
                first = index_file.cursor
                entries = index_file.entries(first, min(CHUNK_ENTRIES, index_file.count - first))
                phy = entries["phy_offset"].astype(np.int64)
                later = np.flatnonzero(phy >= high)
                cut = int(later[0]) if len(later) else len(phy)
                if cut:
                    good = _good(entries[:cut], phy[:cut], first, low, columns, starts,
                                 index_file.header.begin_timestamp)
                    _add_runs(index_file.runs, first + np.flatnonzero(good))
                index_file.cursor = first + cut
                del entries
                if cut < len(phy):
                    break
            index_file.release()

    def finish(self, scan) -> None:
        for name, index_file in self.files.items():
            self.runs[name] = index_file.runs
            index_file.buffer.close()
        self.files = {}
        scan.entry_matches = self

    def good(self, name: str, first: int, count: int) -> np.ndarray:
        """Mask of entries first..first+count-1 of file `name` that are GOOD."""
        mask = np.zeros(count, dtype=bool)
        for low, high in self.runs.get(name, []):
            if high > first and low < first + count:
                mask[max(low, first) - first:min(high, first + count) - first] = True
        return mask


def _good(entries, phy, first: int, low: int, columns, starts, begin_timestamp: int) -> np.ndarray:
    key_hash = entries["key_hash"].astype(np.int64)
    time_diff = entries["time_diff_s"].astype(np.int64)
    at = _search(starts, phy)
    inside = (phy >= low) & (at < len(starts)) & (key_hash >= 0)
    at = np.minimum(at, len(starts) - 1)
    good = inside & (starts[at] == phy)
    good &= columns.exact[at] & columns.keys_known[at]
    pairs = columns.key_pairs
    if len(pairs):
        wanted = (at << 32) | key_hash
        where = np.minimum(_search(pairs, wanted), len(pairs) - 1)
        good &= pairs[where] == wanted
    else:
        good[:] = False
    expected = np.clip((columns.store_ts[at] - begin_timestamp) // 1000, 0, _TIME_DIFF_MAX)
    good &= (expected == time_diff) | (first + np.arange(len(phy)) == 1)
    return good


def _search(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """`np.searchsorted(haystack, needles)`, in the slice of `haystack` between the needles'
    least and greatest: a chunk of entries points into a small part of the window, and a binary
    search there stays in the cache."""
    if not len(needles):
        return np.zeros(0, dtype=np.intp)
    low = int(np.searchsorted(haystack, needles.min()))
    high = int(np.searchsorted(haystack, needles.max(), side="right"))
    return low + np.searchsorted(haystack[low:high], needles)


def _add_runs(runs: list[list[int]], numbers: np.ndarray) -> None:
    if not len(numbers):
        return
    breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
    lows = numbers[np.concatenate(([0], breaks))].tolist()
    highs = (numbers[np.concatenate((breaks - 1, [len(numbers) - 1]))] + 1).tolist()
    for low, high in zip(lows, highs):
        if runs and runs[-1][1] == low:
            runs[-1][1] = high
        else:
            runs.append([low, high])
