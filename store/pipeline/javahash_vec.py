"""Java `String.hashCode` for a whole Arrow string array at once (tagsCode, index key hashes).

`h = sum(c_j * 31^(n-1-j)) mod 2^32` over UTF-16 code units. For ASCII values the code units are the
bytes, so the sum is computed with numpy over the array's data buffer: uint64 arithmetic wraps modulo
2^64, a multiple of 2^32, so masking at the end gives the exact 32-bit result. Values with non-ASCII
characters (rare: tags and keys are usually ASCII) go through the scalar `store.codec.javahash`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.codec.javahash import java_string_hash

_MASK32 = np.uint64(0xFFFFFFFF)


def _powers_of_31(count: int) -> np.ndarray:
    powers = np.ones(max(count, 1), dtype=np.uint64)
    for i in range(1, count):  # bounded by the longest value, not by the number of values
        powers[i] = (powers[i - 1] * np.uint64(31)) & _MASK32
    return powers


def java_hashes(values: pa.Array) -> np.ndarray:
    """int32 Java hash of every value (0 for null or empty)."""
    values = values.cast(pa.string())
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    filled = values.fill_null("")
    offsets = np.frombuffer(filled.buffers()[1], dtype=np.int32)[filled.offset : filled.offset + n + 1].astype(np.int64)
    data_buffer = filled.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    total = int(lengths.sum())
    result = np.zeros(n, dtype=np.uint64)
    if total:  # numpy warns on uint64 wrap-around only for scalars; the arrays below wrap silently
        chars = data[offsets[0] : offsets[-1]].astype(np.uint64)
        row = np.repeat(np.arange(n), lengths)
        position_in_row = np.arange(total) - np.repeat(offsets[:-1] - offsets[0], lengths)
        exponent = lengths[row] - 1 - position_in_row
        terms = (chars * _powers_of_31(int(lengths.max()))[exponent]) & _MASK32
        running = np.zeros(total + 1, dtype=np.uint64)
        np.cumsum(terms, out=running[1:])  # wraps modulo 2^64, harmless for a result modulo 2^32
        local = offsets - offsets[0]
        result = running[local[1:]] - running[local[:-1]]
    hashes = (result & _MASK32).astype(np.uint32).view(np.int32).copy()
    non_ascii = np.asarray(pc.invert(pc.string_is_ascii(filled)).to_numpy(zero_copy_only=False), dtype=bool)
    for i in np.flatnonzero(non_ascii):
        hashes[i] = java_string_hash(filled[i].as_py())
    return hashes


def index_key_hashes(key_strings: pa.Array) -> np.ndarray:
    """keyHash of index entries: abs(javaHash) with Integer.MIN_VALUE -> 0 (spec §5.4)."""
    h = java_hashes(key_strings).astype(np.int64)
    return np.where(h == -(2**31), 0, np.abs(h)).astype(np.int32)
