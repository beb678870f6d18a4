"""Column-wise verdicts for the index check (store.check.index): which slot tables need the chain walk,
which entries need the entry-by-entry test.

An entry is CLEAN when that test would do nothing (a record that expired), KEYED when it would find
its record, keys and timeDiff right and only remember its keyHash (no other entry has that hash,
so no collision can involve it), DIRTY otherwise: those go through the entry-by-entry code, which
decides and reports.
"""

from __future__ import annotations

import numpy as np

CLEAN, KEYED, DIRTY = 0, 1, 2
CHUNK = 1 << 16                 # entries judged at a time
CHAIN_CHUNK = 1 << 20           # slots or entries read at a time by the chain check


def chains_clean(slot_table: np.ndarray, entries: np.ndarray, slots: int, index_count: int,
                 release=None) -> bool:
    """Whether the chain walk would find nothing: every entry has exactly one link to it (from its
    slot or from a newer entry), links point to older entries, and every keyHash is >= 0 and in
    the slot of what links to it (so, by induction from the newest entry, each is reached once,
    on its own slot's chain).

    Reads the entries once, in order, a chunk at a time (no copy of the file), calling `release()`
    after each (to drop the pages read from the process); each entry's slot is kept in an array
    (4 bytes an entry, bounded by maxIndexNum), so that the links, which point anywhere into the
    file, are followed in it and not in the mapped entries (their pages would all stay resident)."""
    if index_count <= 1:
        return True
    release = release or (lambda: None)
    slot_of = np.empty(index_count, dtype=np.int32)
    slot_of[0] = -1
    linked_to = np.zeros(index_count, dtype=bool)
    links = 0
    for first in range(1, index_count, CHAIN_CHUNK):
        part = entries[first:first + CHAIN_CHUNK]
        key_hash = part["key_hash"].astype(np.int64)
        prev = part["prev_index"].astype(np.int64)
        numbers = np.arange(first, first + len(part))
        if ((prev < 0) | (prev >= numbers)).any() or (key_hash < 0).any():
            return False
        slot_of[first:first + len(part)] = key_hash % slots
        linked = prev > 0
        targets = prev[linked]                       # older entries: their slots are known
        if (slot_of[targets] != slot_of[first:first + len(part)][linked]).any():
            return False
        linked_to[targets] = True
        links += len(targets)
        release()
    for first in range(0, len(slot_table), CHAIN_CHUNK):
        table = slot_table[first:first + CHAIN_CHUNK]
        which = np.flatnonzero((table > 0) & (table < index_count))
        heads = table[which].astype(np.int64)
        if (slot_of[heads] != which + first).any():
            return False
        linked_to[heads] = True
        links += len(heads)
        release()
    return links == index_count - 1 and bool(linked_to[1:].all())


def entry_kinds(entries: np.ndarray, first: int, header, scan, name: str) -> np.ndarray:
    """CLEAN / KEYED / DIRTY for entries `first`.. of file `name` (entry 0 is no entry: CLEAN).
    KEYED here: the entry-by-entry test would find its record, keys and timeDiff right; whether
    its keyHash may be only remembered is up to the caller (store.check.index)."""
    key_hash = entries["key_hash"].astype(np.int64)
    phy = entries["phy_offset"].astype(np.int64)
    time_diff = entries["time_diff_s"].astype(np.int64)
    kinds = np.full(len(entries), DIRTY, dtype=np.int8)
    sane = (key_hash >= 0) & (time_diff >= 0) & (phy >= 0)
    if first == 0 and len(entries):
        sane[0] = False
    expired = sane & (phy < scan.min_offset)
    kinds[expired] = CLEAN
    if first == 0 and len(entries):
        kinds[0] = CLEAN
    live = sane & ~expired & ((phy < scan.end_offset) | scan.capped) & (phy < scan.walked_to)
    kinds[live & good_entries(scan, name, first, len(entries))] = KEYED
    return kinds


def good_entries(scan, name: str, first: int, count: int) -> np.ndarray:
    """Which entries the walk found GOOD (store.check.stream_index); all False when unknown."""
    if scan.entry_matches is None:
        return np.zeros(count, dtype=bool)
    return scan.entry_matches.good(name, first, count)
