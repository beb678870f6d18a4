"""Index-file views: headers, slot occupancy, chain lengths, and a key lookup walked step by step."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from app.overview_data import format_ms
from store.codec import message as msgcodec
from store.codec.index_codec import build_key, key_hash_and_slot
from store.codec.javahash import java_string_hash
from store.errors import CorruptDataError

MAX_HEATMAP_CELLS = 64 * 64


def header_table(store) -> pd.DataFrame:
    """One row per index file: its header as stored."""
    rows = []
    for name, h in store.inspect.index_headers():
        rows.append({"file": name, "begin_time": format_ms(h.begin_timestamp),
                     "end_time": format_ms(h.end_timestamp), "begin_phy_offset": h.begin_phy_offset,
                     "end_phy_offset": h.end_phy_offset, "hash_slot_count": h.hash_slot_count,
                     "index_count": h.index_count,
                     "entries_used": max(0, h.index_count - 1)})
    return pd.DataFrame(rows, columns=["file", "begin_time", "end_time", "begin_phy_offset",
                                       "end_phy_offset", "hash_slot_count", "index_count",
                                       "entries_used"])


def entries_per_slot(entries: np.ndarray, max_hash_slot_num: int) -> np.ndarray:
    """How many entries of a file hash to each slot (= that slot's chain length, all keys)."""
    if entries is None or len(entries) <= 1:
        return np.zeros(max_hash_slot_num, dtype=np.int64)
    key_hashes = entries["key_hash"][1:].astype(np.int64)   # row 0 is the unused entry 0
    return np.bincount(key_hashes % max_hash_slot_num, minlength=max_hash_slot_num)


def occupancy_grid(per_slot: np.ndarray, max_cells: int = MAX_HEATMAP_CELLS) -> tuple[np.ndarray, int]:
    """Per-slot counts as a 2-D grid for a heatmap; slots are summed in bins when there are more
    than `max_cells`. Returns (grid, slots per cell)."""
    slots = len(per_slot)
    per_cell = max(1, math.ceil(slots / max_cells))
    cells = math.ceil(slots / per_cell)
    padded = np.zeros(cells * per_cell, dtype=np.int64)
    padded[:slots] = per_slot
    binned = padded.reshape(cells, per_cell).sum(axis=1)
    width = max(1, math.ceil(math.sqrt(cells)))
    height = math.ceil(cells / width)
    grid = np.zeros(width * height, dtype=np.int64)
    grid[:cells] = binned
    return grid.reshape(height, width), per_cell


@dataclass(frozen=True)
class KeyWalk:
    key_string: str
    java_hash: int
    key_hash: int
    slot: int
    steps: pd.DataFrame          # one row per hop, newest file first
    matches: pd.DataFrame        # records whose keys really contain the key
    collisions: int              # hops whose hash matched but the record does not carry the key
    files: tuple = ()            # every index file walked, newest first (empty slots included)


def walk_key(store, topic: str, key: str, max_steps: int = 500) -> KeyWalk:
    """Every hop of the slot chain `topic#key` hashes to, in every index file, and the records."""
    slots = store.config.max_hash_slot_num
    key_string = build_key(topic, key)
    key_hash, slot = key_hash_and_slot(key_string, slots)
    rows, matches = [], []
    collisions = 0
    files = []
    for file_name, steps in store.inspect.index_chain(topic, key):
        files.append(file_name)
        for hop, step in enumerate(steps):
            if len(rows) >= max_steps:
                break
            row = {"file": file_name, "hop": hop, "entry": step.entry_number, "slot": step.slot,
                   "key_hash": step.key_hash, "hash_matches": step.hash_matches,
                   "phy_offset": step.phy_offset, "time_diff_s": step.time_diff_s,
                   "store_time": format_ms(step.store_time_ms), "prev_entry": step.prev_index,
                   "verdict": "other key in the same slot"}
            if step.hash_matches:
                record = _record_at(store, step.phy_offset)
                if record is None:
                    row["verdict"] = "hash matches; record no longer readable"
                elif record.topic == topic and (key in record.key_list or key == record.uniq_key):
                    row["verdict"] = "match"
                    matches.append(record)
                else:
                    row["verdict"] = "hash collision: same 32-bit hash, different key"
                    collisions += 1
            rows.append(row)
    from app.commitlog_data import message_row
    return KeyWalk(key_string, java_string_hash(key_string), key_hash, slot, pd.DataFrame(rows),
                   pd.DataFrame([message_row(r) for r in matches]), collisions, tuple(files))


def _record_at(store, phy_offset: int):
    raw = store.inspect.record_bytes(phy_offset)
    if raw is None:
        return None
    try:
        return msgcodec.decode_message(raw)
    except CorruptDataError:
        return None
