"""Runs of index entries passed in bulk by the index check (store.check.index), with the same effect
on its key memory as the entry-by-entry test.

For an entry the walk found right (KEYED: its record, key and timeDiff check out), that test only
looks its keyHash up in `key_of_hash`: a hash not there is remembered while fewer than
MAX_KEYS_REMEMBERED are; a hash already there is compared with its key text (a collision report).
So a run of CLEAN and KEYED entries passes in bulk up to the first KEYED entry whose hash is already
remembered, or repeats an earlier one of the run while the memory has room; that entry goes the
entry-by-entry way. The new hashes before it are remembered in order, up to the cap, by the offset
of their record (the text is read from the record if it is ever asked for).
"""

from __future__ import annotations

import numpy as np

MAX_KEYS_REMEMBERED = 100_000          # for collision reports; bounded memory
KEYED = 1


def pass_run(memory, entries: np.ndarray, kinds: np.ndarray, first: int, stop: int) -> int:
    """Pass entries first..stop-1 (CLEAN or KEYED) until one must go entry by entry; return its
    number (or `stop`)."""
    keyed = first + np.flatnonzero(kinds[first:stop] == KEYED)
    if not len(keyed):
        return stop
    hashes = entries["key_hash"][keyed].astype(np.int64)
    conflict = memory.known(hashes)
    room = MAX_KEYS_REMEMBERED - len(memory)
    if room > 0:
        _, first_seen = np.unique(hashes, return_index=True)
        repeated = np.ones(len(hashes), dtype=bool)
        repeated[first_seen] = False
        conflict |= repeated
    hits = np.flatnonzero(conflict)
    passed = int(hits[0]) if len(hits) else len(hashes)
    if room > 0 and passed:
        take = min(room, passed)
        memory.remember(hashes[:take], entries["phy_offset"][keyed[:take]].astype(np.int64))
    return int(keyed[passed]) if passed < len(keyed) else stop
