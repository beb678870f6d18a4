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
