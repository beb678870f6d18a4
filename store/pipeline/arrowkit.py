"""numpy -> Arrow building blocks shared by every vectorised decoder.

Everything here works on a flat `uint8` numpy view of a file (usually over an `mmap`) and on arrays of
byte positions. Nothing loops in Python per record: integers are gathered with fancy indexing, variable
length fields are cut out with one boolean mask, and text (hosts, ids) is assembled from a matrix of
characters plus a mask of which characters to keep.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_HEX_UPPER = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_HEX_LOWER = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def gather_int(buf: np.ndarray, positions: np.ndarray, width_bytes: int, *, signed: bool = True) -> np.ndarray:
    """Big-endian integers of `width_bytes` (1, 2, 4 or 8) at each of `positions`, as native int64."""
    n = positions.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    index = positions.astype(np.int64)[:, None] + np.arange(width_bytes, dtype=np.int64)
    raw = np.ascontiguousarray(buf[index])
    kind = "i" if signed else "u"
    return raw.view(f">{kind}{width_bytes}").reshape(n).astype(np.int64)


def gather_bytes(buf: np.ndarray, positions: np.ndarray, width_bytes: int) -> np.ndarray:
    """An (n, width_bytes) uint8 matrix of the bytes starting at each position."""
    index = positions.astype(np.int64)[:, None] + np.arange(width_bytes, dtype=np.int64)
    return buf[index]


GATHER_MAX_MEAN_LENGTH = 32   # shorter fields: one fancy-index gather; longer: one memcpy per slice


def ragged_slices(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate `buf[starts[i] : starts[i] + lengths[i]]` for every i.

    Returns (offsets int64 of length n+1, data uint8). Two strategies, picked by the mean length
    (bench/decode_bench.py, 1 KiB records): short fields (topics) are gathered with one index array
    (8 bytes of index per byte copied, but no per-slice Python work); long ones (bodies, properties)
    are joined from memoryview slices, one memcpy per slice and only the wanted bytes touched. An
    earlier version selected bytes with a +1/-1 step mask over the whole covered range: it read every
    byte of the segment once per column, 5-8x slower than either.
    """
    n = starts.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1]) if n else 0
    if total == 0:
        return offsets, np.zeros(0, dtype=np.uint8)
    starts = starts.astype(np.int64, copy=False)
    assert int(starts.min()) >= 0 and int((starts + lengths).max()) <= buf.shape[0], "slice outside the buffer"
    if total <= GATHER_MAX_MEAN_LENGTH * n:
        index = np.arange(total, dtype=np.int64)
        index += np.repeat(starts - offsets[:-1], lengths)
        return offsets, buf[index]
    view = memoryview(buf)
    ends = (starts + lengths).tolist()
    data = b"".join([view[start:end] for start, end in zip(starts.tolist(), ends)])
    return offsets, np.frombuffer(data, dtype=np.uint8)


def binary_array(offsets: np.ndarray, data: np.ndarray, validity: np.ndarray | None = None) -> pa.Array:
    """A `binary` Arrow array from int64 offsets (converted to int32) and bytes."""
    return _varlen_array(pa.binary(), offsets, data, validity)


def string_array(offsets: np.ndarray, data: np.ndarray, validity: np.ndarray | None = None) -> pa.Array:
    """A `string` Arrow array; bytes that are not UTF-8 are replaced by U+FFFD like Java's decoder."""
    array = _varlen_array(pa.string(), offsets, data, validity)
    try:
        array.validate(full=True)
        return array
    except pa.ArrowInvalid:
        # Rare path (a producer wrote invalid UTF-8): decode those values the way Java would.
        raw = _varlen_array(pa.binary(), offsets, data, validity).to_pylist()
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in raw], type=pa.string())


def _varlen_array(arrow_type: pa.DataType, offsets: np.ndarray, data: np.ndarray, validity) -> pa.Array:
    n = offsets.shape[0] - 1
    assert offsets[-1] < 2**31, "a batch may hold at most 2 GiB of one variable-length column"
    validity_buffer = None
    null_count = 0
    if validity is not None and not bool(np.all(validity)):
        validity_buffer = pa.py_buffer(np.packbits(validity.astype(np.uint8), bitorder="little"))
        null_count = int(n - np.count_nonzero(validity))
    return pa.Array.from_buffers(
        arrow_type,
        n,
        [validity_buffer, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(np.ascontiguousarray(data))],
        null_count=null_count,
    )


def masked_text(chars: np.ndarray, keep: np.ndarray) -> pa.Array:
    """Strings made of the kept characters of each row of an (n, width) ASCII matrix."""
    lengths = keep.sum(axis=1, dtype=np.int64)
    offsets = np.zeros(chars.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return _varlen_array(pa.string(), offsets, chars[keep], None)


def decimal_digits(values: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(chars, keep) for the decimal text of non-negative `values`, right-aligned in `width` columns."""
    values = values.astype(np.int64)
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    digits = (values[:, None] // powers) % 10
    chars = (digits + ord("0")).astype(np.uint8)
    significant = values[:, None] >= powers
    significant[:, -1] = True  # "0" keeps its last digit
    return chars, significant


def hex_chars(raw: np.ndarray, *, upper: bool = True) -> np.ndarray:
    """(n, 2w) hex characters of an (n, w) uint8 matrix."""
    table = _HEX_UPPER if upper else _HEX_LOWER
    out = np.empty((raw.shape[0], raw.shape[1] * 2), dtype=np.uint8)
    out[:, 0::2] = table[raw >> 4]
    out[:, 1::2] = table[raw & 0x0F]
    return out


def constant_column(char: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A one-character column (chars, keep) for `masked_text` layouts."""
    return np.full((n, 1), ord(char), dtype=np.uint8), np.ones((n, 1), dtype=bool)


def join_columns(parts: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """Concatenate (chars, keep) column groups left to right into one string array."""
    chars = np.concatenate([p[0] for p in parts], axis=1)
    keep = np.concatenate([p[1] for p in parts], axis=1)
    return masked_text(chars, keep)


def take_or_null(values: pa.Array, index: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """values[index[i]] for every i, null where index[i] < 0."""
    if values.type != dtype:
        values = values.cast(dtype)
    mask = index < 0
    arrow_index = pa.array(np.where(mask, 0, index), type=pa.int64(), mask=mask)
    if len(values) == 0:
        return pa.nulls(index.shape[0], type=dtype)
    return values.take(arrow_index)


def java_hashes(values: pa.Array) -> np.ndarray:
    """Java `String.hashCode` (int32) of every value of a string array; 0 for null or empty.

    The hashing itself is `store.codec.javahash.java_string_hashes` (vectorised over ASCII, exact
    UTF-16 rule otherwise). Only the distinct values are turned into Python strings and hashed: tags
    repeat a lot, so a batch of a million records usually costs a handful of hashes plus one `take`.
    """
    import pyarrow.compute as pc

    from store.codec.javahash import java_string_hashes

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if len(values) == 0:
        return np.zeros(0, dtype=np.int32)
    encoded = pc.dictionary_encode(values.cast(pa.string()).fill_null(""))
    distinct = java_string_hashes(encoded.dictionary.to_pylist()).astype(np.int32)
    return distinct[encoded.indices.to_numpy(zero_copy_only=False)]
