"""Java's `String.hashCode`, the hash behind tagsCode and the index slots.

`h = 31*h + c` over the string's UTF-16 code units, wrapping at 32 bits, returned as a signed int32.
A character outside the BMP contributes two code units (its surrogate pair).
"""

from __future__ import annotations

_MASK32 = 0xFFFFFFFF
INT32_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Return `text.hashCode()` as Java computes it (signed 32-bit)."""
    h = 0
    if text.isascii():
        for byte in text.encode("ascii"):
            h = (31 * h + byte) & _MASK32
    else:
        units = text.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """tagsCode of a TAGS value: the Java hash sign-extended to 64 bits; no or empty tag gives 0."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key_string: str) -> int:
    """keyHash stored in index entries: abs(javaHash), but 0 for Integer.MIN_VALUE (Math.abs overflow)."""
    h = java_string_hash(key_string)
    if h == INT32_MIN:
        return 0
    return abs(h)


def java_string_hashes(texts: list[str]):
    """`java_string_hash` of many strings at once, as a numpy int64 array of signed int32 values.

    ASCII strings (the usual keys) are hashed in one vectorized pass: the hash is
    sum(c[i] * 31**(n-1-i)) mod 2**32, computed with uint64 arithmetic that wraps mod 2**64, whose low
    32 bits are the Java result. Other strings fall back to the scalar loop.
    """
    import numpy as np

    from store import kernel
    if kernel.COMPILED:
        return kernel.java_hashes(texts)
    count = len(texts)
    result = np.zeros(count, dtype=np.int64)
    if count == 0:
        return result
    joined = "".join(texts)
    if not joined.isascii():
        return np.array([java_string_hash(t) for t in texts], dtype=np.int64)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=count)
    chars = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).astype(np.uint64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    if chars.size:
        max_len = int(lengths.max())
        powers = np.array(_powers_of_31(max_len), dtype=np.uint64)
        key_of_char = np.repeat(np.arange(count), lengths)
        from_end = (ends[key_of_char] - 1) - np.arange(chars.size)
        weighted = chars * powers[from_end]
        nonempty = lengths > 0
        sums = np.add.reduceat(weighted, starts[nonempty]) if nonempty.any() else weighted[:0]
        low = (sums & np.uint64(0xFFFFFFFF)).astype(np.int64)
        result[nonempty] = np.where(low >= 2**31, low - 2**32, low)
    return result


_POWERS: list[int] = [1]


def _powers_of_31(count: int) -> list[int]:
    """31**k mod 2**64 for k < count (cached; keys are short)."""
    while len(_POWERS) < count:
        _POWERS.append((_POWERS[-1] * 31) & 0xFFFFFFFFFFFFFFFF)
    return _POWERS[:count]


def index_key_hashes(key_strings: list[str]):
    """`index_key_hash` of many keys at once (numpy int64 array)."""
    return index_key_hashes_of(java_string_hashes(key_strings))


def index_key_hashes_of(java_hashes):
    """`index_key_hash` from Java hashes already computed (numpy int64 array in, array out)."""
    import numpy as np

    return np.where(java_hashes == INT32_MIN, 0, np.abs(java_hashes))
