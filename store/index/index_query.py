"""The query side of one index file: hashing a query key, walking a slot's chain, the dumps.

`IndexFileQueries` is a mixin of `IndexFile` (`store.index.index_file`, RocketMQ's `IndexFile`): its
`selectPhyOffset` (`select`), the teaching view's hop-by-hop `walk_chain`, and copies of the slot table
and entries. It reads `max_hash_slot_num`, `max_index_num`, `index_count`, `begin_timestamp`,
`read_only` and `_entries_position`, and calls `_load_header` and `_require_map`. The byte layout is in
`store.codec.index_codec`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from store.codec.index_codec import (
    ENTRY_DTYPE, ENTRY_STRUCT, HASH_SLOT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, SLOT_STRUCT,
)
from store.codec.javahash import index_key_hash
from store.kernel.lookup import index_select

_unpack_slot = SLOT_STRUCT.unpack_from
_unpack_entry = ENTRY_STRUCT.unpack_from
_MASK32 = 0xFFFFFFFF
_BYTE_ORDER = sys.byteorder
try:   # the compiled kernel's Java hash of a list of strings: native int32s in a bytes object
    from store.kernel import COMPILED as _KERNEL_COMPILED
    from store.kernel import _native as _KERNEL
    _native_hashes = _KERNEL.java_hashes if _KERNEL_COMPILED else None
except (ImportError, AttributeError):
    _native_hashes = None
_INT32_MIN_UNSIGNED = 0x80000000
_PREFIX_STATES: dict[str, int] = {}   # "topic#" -> Java hash state after it (unsigned 32-bit)
_MAX_PREFIX_STATES = 4096


def query_key_hash(key_string: str, prefix_length: int = 0) -> int:
    """`index_key_hash(key_string)` (abs of Java's hashCode, 0 for Integer.MIN_VALUE), faster.

    With the compiled kernel, one C call. Otherwise Java's hash, a left-to-right loop, resumes
    from the cached state after the first `prefix_length` characters (a query's "topic#", the
    same for every query of a topic), so only the rest is hashed per query. Non-ASCII strings
    take `index_key_hash`.
    """
    if not key_string.isascii():
        return index_key_hash(key_string)
    if _native_hashes is not None:
        h = int.from_bytes(_native_hashes([key_string]), _BYTE_ORDER)  # unsigned 32-bit
    else:
        h = 0
        rest = key_string
        if prefix_length:
            prefix = key_string[:prefix_length]
            h = _PREFIX_STATES.get(prefix, -1)
            if h < 0:
                h = 0
                for byte in prefix.encode("ascii"):
                    h = (31 * h + byte) & _MASK32
                if len(_PREFIX_STATES) >= _MAX_PREFIX_STATES:
                    _PREFIX_STATES.clear()
                _PREFIX_STATES[prefix] = h
            rest = key_string[prefix_length:]
        for byte in rest.encode("ascii"):
            h = (31 * h + byte) & _MASK32
    if h < _INT32_MIN_UNSIGNED:
        return h
    return 0 if h == _INT32_MIN_UNSIGNED else (1 << 32) - h


@dataclass(frozen=True, slots=True)
class ChainStep:
    """One hop of a slot chain, for the teaching view (`IndexFile.walk_chain`)."""

    slot: int
    entry_number: int
    key_hash: int
    phy_offset: int
    time_diff_s: int
    store_time_ms: int          # begin_timestamp + time_diff_s * 1000, as the query computes it
    prev_index: int
    hash_matches: bool


class IndexFileQueries:
    """The read side of `IndexFile` (see the module docstring for what it uses)."""

    # -- read --------------------------------------------------------------------------------------

    def select(self, result: list[int], key_string: str, max_num: int, begin_ms: int,
               end_ms: int, key_hash: int | None = None) -> None:
        """selectPhyOffset (spec §5.8): append matching phy offsets, newest first, to `result`.

        `key_hash` may be passed precomputed (`query_key_hash(key_string)`; a query walks several
        files with the same key)."""
        if self.read_only:
            self._load_header()
        if key_hash is None:
            key_hash = query_key_hash(key_string)
        # The walk itself: store.kernel.lookup (compiled, or its Python twin).
        index_select(self._require_map(), key_hash, self.max_hash_slot_num, self.max_index_num,
                     self.index_count, self.begin_timestamp, max_num, begin_ms, end_ms, result)

    def walk_chain(self, key_string: str) -> list[ChainStep]:
        """Every hop of the chain `key_string` hashes to (whatever the time), for the teaching view.

        Follows the same stop rules as `select` except the time window; at most index_count steps.
        """
        if self.read_only:
            self._load_header()
        buf = self._require_map()
        key_hash = query_key_hash(key_string)
        slot = key_hash % self.max_hash_slot_num
        entry_number = _unpack_slot(buf, INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE)[0]
        steps: list[ChainStep] = []
        if entry_number <= 0 or entry_number > self.index_count or self.index_count <= 1:
            return steps
        for _step in range(self.index_count):
            if entry_number >= self.max_index_num:
                break
            read_hash, read_phy, time_diff_s, prev = _unpack_entry(
                buf, self._entries_position + entry_number * INDEX_ENTRY_SIZE)
            steps.append(ChainStep(slot, entry_number, read_hash, read_phy, time_diff_s,
                                   self.begin_timestamp + time_diff_s * 1000, prev,
                                   read_hash == key_hash))
            if time_diff_s < 0 or prev <= 0 or prev > self.index_count or prev == entry_number:
                break
            entry_number = prev
        return steps

    def slot_table(self) -> np.ndarray:
        """All hash slots as a native int32 array (a copy, so the map can be closed)."""
        view = np.frombuffer(self._require_map(), dtype=">i4", count=self.max_hash_slot_num,
                             offset=INDEX_HEADER_SIZE)
        return view.astype(np.int32)

    def entries(self) -> np.ndarray:
        """Entries 0 .. index_count-1 as a structured array (a copy; row number = entry number,
        row 0 is the unused entry 0)."""
        if self.read_only:
            self._load_header()
        count = min(self.index_count, self.max_index_num)
        view = np.frombuffer(self._require_map(), dtype=ENTRY_DTYPE, count=count,
                             offset=self._entries_position)
        return view.copy()

    def read_bytes(self) -> bytes:
        """The whole file content (for tests and dumps)."""
        return bytes(self._require_map())
