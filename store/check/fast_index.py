"""Column-wise verdicts for the index check (store.check.index): which slot tables need the chain walk,
which entries need the entry-by-entry test.

An entry is CLEAN when that test would do nothing (a record that expired), KEYED when it would find
its record, keys and timeDiff right and only remember its keyHash (no other entry has that hash,
so no collision can involve it), DIRTY otherwise: those go through the entry-by-entry code, which
decides and reports.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from store.check.fast_units import record_numbers
from store.codec.index_codec import ENTRY_DTYPE, HASH_SLOT_SIZE, INDEX_HEADER_SIZE, decode_header

CLEAN, KEYED, DIRTY = 0, 1, 2
_TIME_DIFF_MAX = 2**31 - 1


def shared_hashes(index_dir: str, names, expected_size: int, slots: int,
                  max_index_num: int) -> np.ndarray:
    """Sorted keyHashes that more than one entry of the index files holds."""
    parts = []
    for name in names:
        path = os.path.join(index_dir, name)
        if not name.isdigit() or not os.path.isfile(path) or os.path.getsize(path) != expected_size:
            continue
        with open(path, "rb") as handle:
            with mmap.mmap(handle.fileno(), expected_size, access=mmap.ACCESS_READ) as buffer:
                header = decode_header(buffer)
                if not 1 < header.index_count <= max_index_num:
                    continue
                entries = np.frombuffer(buffer, dtype=ENTRY_DTYPE, count=header.index_count,
                                        offset=INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE)
                parts.append(entries["key_hash"][1:].astype(np.int64))
                del entries
    if not parts:
        return np.zeros(0, dtype=np.int64)
    values, counts = np.unique(np.concatenate(parts), return_counts=True)
    return values[counts > 1]


def chains_clean(slot_table: np.ndarray, entries: np.ndarray, slots: int, index_count: int) -> bool:
    """Whether the chain walk would find nothing: every entry has exactly one link to it (from its
    slot or from a newer entry), links point to older entries, and every keyHash is >= 0 and in
    the slot of what links to it (so, by induction from the newest entry, each is reached once,
    on its own slot's chain)."""
    if index_count <= 1:
        return True
    key_hash = entries["key_hash"].astype(np.int64)
    prev = entries["prev_index"].astype(np.int64)[1:]
    numbers = np.arange(1, index_count)
    if ((prev < 0) | (prev >= numbers)).any() or (key_hash[1:] < 0).any():
        return False
    head_slots = np.flatnonzero((slot_table > 0) & (slot_table < index_count))
    heads = slot_table[head_slots].astype(np.int64)
    linked = prev > 0
    links_in = np.bincount(heads, minlength=index_count) + \
        np.bincount(prev[linked], minlength=index_count)
    if (links_in[1:] != 1).any():
        return False
    if (key_hash[heads] % slots != head_slots).any():
        return False
    return not (key_hash[prev[linked]] % slots != key_hash[1:][linked] % slots).any()


def entry_kinds(entries: np.ndarray, header, scan, shared: np.ndarray) -> np.ndarray:
    """CLEAN / KEYED / DIRTY for every entry (entry 0 is no entry: CLEAN)."""
    key_hash = entries["key_hash"].astype(np.int64)
    phy = entries["phy_offset"].astype(np.int64)
    time_diff = entries["time_diff_s"].astype(np.int64)
    kinds = np.full(len(entries), DIRTY, dtype=np.int8)
    kinds[0] = CLEAN
    sane = (key_hash >= 0) & (time_diff >= 0) & (phy >= 0)
    sane[0] = False
    expired = sane & (phy < scan.min_offset)
    kinds[expired] = CLEAN
    columns = scan.columns
    live = np.flatnonzero(sane & ~expired & ((phy < scan.end_offset) | scan.capped))
    if columns is None or not len(live):
        return kinds
    record = record_numbers(scan, phy[live])
    found = record >= 0
    live, record = live[found], record[found]
    known = columns.keys_known[record]
    live, record = live[known], record[known]
    pairs = columns.key_pairs
    wanted = (record << 32) | key_hash[live]
    at = np.searchsorted(pairs, wanted)
    has_key = (at < len(pairs)) & (pairs[np.minimum(at, len(pairs) - 1)] == wanted) \
        if len(pairs) else np.zeros(len(live), dtype=bool)
    expected = np.clip((columns.store_ts[record] - header.begin_timestamp) // 1000, 0, _TIME_DIFF_MAX)
    timely = (expected == time_diff[live]) | (live == 1)
    at = np.searchsorted(shared, key_hash[live])
    unique = ~((at < len(shared)) & (shared[np.minimum(at, max(len(shared) - 1, 0))] == key_hash[live])) \
        if len(shared) else np.ones(len(live), dtype=bool)
    kinds[live[has_key & timely & unique]] = KEYED
    return kinds
