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


def unaligned_view(buf: np.ndarray, dtype: str) -> np.ndarray:
    """`buf` seen as one `dtype` item starting at every byte (overlapping, read-only), so that
    `unaligned_view(buf, ">i4")[positions]` reads big-endian ints at any positions with one gather."""
    itemsize = np.dtype(dtype).itemsize
    count = max(buf.shape[0] - itemsize + 1, 0)
    return np.ndarray((count,), dtype=dtype, buffer=buf, offset=0, strides=(1,))


def gather_int(buf: np.ndarray, positions: np.ndarray, width_bytes: int, *, signed: bool = True) -> np.ndarray:
    """Big-endian integers of `width_bytes` (1, 2, 4 or 8) at each of `positions`, as native int64."""
    n = positions.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    kind = "i" if signed else "u"
    if buf.flags.c_contiguous:
        positions = positions.astype(np.int64, copy=False)
        if int(positions.min()) < 0:
            raise IndexError("negative position")
        return unaligned_view(buf, f">{kind}{width_bytes}")[positions].astype(np.int64)
    index = positions.astype(np.int64)[:, None] + np.arange(width_bytes, dtype=np.int64)
    raw = np.ascontiguousarray(buf[index])
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
    are described as an Arrow `binary_view` array over `buf` (one 16-byte view per slice, built with
    numpy) and cast to `binary`, which copies each slice once in Arrow's C++ (no Python per slice). An
    earlier version selected bytes with a +1/-1 step mask over the whole covered range: it read every
    byte of the segment once per column, 5-8x slower than either; the one after joined memoryview
    slices in Python (about 0.3 us per slice).
    """
    n = starts.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1]) if n else 0
    if total == 0:
        return offsets, np.zeros(0, dtype=np.uint8)
    starts = starts.astype(np.int64, copy=False)
    assert int(starts.min()) >= 0 and int((starts + lengths).max()) <= buf.shape[0], "slice outside the buffer"
    joined = _view_join(buf, starts, lengths, total)
    if joined is None and total <= GATHER_MAX_MEAN_LENGTH * n:
        index = np.arange(total, dtype=np.int64)
        index += np.repeat(starts - offsets[:-1], lengths)
        return offsets, buf[index]
    if joined is None:
        view = memoryview(buf)
        ends = (starts + lengths).tolist()
        data = b"".join([view[start:end] for start, end in zip(starts.tolist(), ends)])
        return offsets, np.frombuffer(data, dtype=np.uint8)
    return offsets, joined


VIEW_INLINE_BYTES = 12  # binary_view: values up to 12 bytes live in the view itself
# Per value length 0..12 (13 = longer): the masks of the view's three 4-byte lanes after the length.
_VIEW_MASKS = np.array(
    [[(1 << (8 * max(0, min(4, length - 4 * lane)))) - 1 for lane in range(3)] for length in range(13)]
    + [[0xFFFFFFFF, 0, 0]], dtype="<u4")


def _view_join(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, total: int) -> np.ndarray | None:
    """The slices concatenated by Arrow (binary_view -> binary cast), or None if they cannot be viewed."""
    if total >= 2**31 or not buf.flags.c_contiguous or not hasattr(pa, "binary_view"):
        return None   # (binary_view: pyarrow >= 16; older ones take the former paths)
    base = int(starts.min())
    relative = starts - base
    span = int((starts + lengths).max()) - base
    if span >= 2**31:
        return None
    n = starts.shape[0]
    region = buf[base:base + span + VIEW_INLINE_BYTES]
    if region.shape[0] < span + VIEW_INLINE_BYTES:   # a slice ends within 12 bytes of the buffer's end
        region = np.concatenate([region, np.zeros(VIEW_INLINE_BYTES, dtype=np.uint8)])
    lengths = lengths.astype(np.int64, copy=False)
    views = np.empty((n, 4), dtype="<u4")
    views[:, 0] = lengths
    # The first 12 bytes (little-endian lanes), zero padded past the value; for longer values lane 0
    # is the prefix and lanes 1-2 become the buffer index (0) and the offset.
    head = np.empty((n, 2), dtype="<u4")
    head.view("<u8")[:, 0] = unaligned_view(region, "<u8")[relative]
    views[:, 1:3] = head
    views[:, 3] = unaligned_view(region, "<u4")[relative + 8]
    views[:, 1:4] &= _VIEW_MASKS[np.minimum(lengths, VIEW_INLINE_BYTES + 1)]
    out_of_line = lengths > VIEW_INLINE_BYTES
    views[:, 3] += np.where(out_of_line, relative, 0).astype(np.uint32)
    array = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), pa.py_buffer(region)])
    try:
        flat = array.cast(pa.binary())
    except pa.ArrowNotImplementedError:
        return None
    return np.frombuffer(flat.buffers()[2], dtype=np.uint8, count=total)


def ragged_binary(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                  validity: np.ndarray | None = None) -> pa.Array:
    """`binary_array(*ragged_slices(...))`: the slices as an Arrow `binary` array."""
    return binary_array(*ragged_slices(buf, starts, lengths), validity)


def ragged_string(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                  validity: np.ndarray | None = None) -> pa.Array:
    """`string_array(*ragged_slices(...))`: the slices as an Arrow `string` array (U+FFFD for bad UTF-8)."""
    if validity is not None:
        lengths = np.where(validity, lengths, 0)
    return string_array(*ragged_slices(buf, starts, lengths), validity)


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
