r"""The PROPERTIES field of a commit-log record (spec §2.3, vectors §14.4).

The field is UTF-8 text made of entries, each `name` + NAME_VALUE_SEPARATOR + `value` +
PROPERTY_SEPARATOR:

| part   | offset        | size_bytes | meaning                                            |
|--------|---------------|------------|----------------------------------------------------|
| name   | entry start   | k          | UTF-8, never contains `\x01` or `\x02`             |
| `\x01` | entry + k     | 1          | NAME_VALUE_SEPARATOR                               |
| value  | entry + k + 1 | v          | UTF-8, may contain `\x01`, never `\x02`            |
| `\x02` | entry + k+1+v | 1          | PROPERTY_SEPARATOR (4.9.7 drops the very last one) |

The whole field is at most 32,767 bytes (PROPERTIES LENGTH is a signed short); `encode_message`
enforces that, not this module, so the put path can report RocketMQ's own status for it.

Entry order only matters for byte-identical output: brokers serialize a `java.util.HashMap`, so
`encode_properties` emits entries in Java HashMap iteration order (capacity 16 for 4.9.7, 128 for 5.x).
Readers never depend on order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

from store.codec.javahash import java_string_hash

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_LENGTH = 32767

STYLE_4_9 = "4.9"
STYLE_5_X = "5.x"
# Initial HashMap table size each broker version parses request properties into (spec §2.3).
HASHMAP_INITIAL_CAPACITY = {STYLE_4_9: 16, STYLE_5_X: 128}

_TREEIFY_THRESHOLD = 8        # java.util.HashMap: a chain this long turns into a tree on the next put
_MIN_TREEIFY_CAPACITY = 64    # ... unless the table is smaller, in which case the table doubles

assert len(NAME_VALUE_SEPARATOR.encode()) == 1 and len(PROPERTY_SEPARATOR.encode()) == 1


def decode_properties(data: bytes | bytearray | memoryview | str) -> dict[str, str]:
    """Parse a PROPERTIES field exactly like RocketMQ's `string2messageProperties`.

    Bad UTF-8 becomes U+FFFD (Java's decoder does the same). Segments with an empty name or an empty
    value are dropped; a later duplicate name overwrites an earlier one. Never raises on any bytes.
    """
    if isinstance(data, str):
        text = data
    else:
        text = bytes(data).decode("utf-8", "replace")
    properties: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        # Java measures in UTF-16 units; the index test below decides the same way for any length.
        if len(segment) >= 3:
            separator = segment.find(NAME_VALUE_SEPARATOR)
            if 0 < separator < len(segment) - 1:
                properties[segment[:separator]] = segment[separator + 1:]
    return properties


@lru_cache(maxsize=4096)
def _spread_hash(name: str) -> int:
    """`HashMap.hash(name)`: the Java hash with its high half folded into the low half (unsigned)."""
    h = java_string_hash(name) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _final_capacity(hashes: list[int], capacity: int) -> int:
    """Table size of a Java HashMap after putting keys with these spread hashes, in order.

    The table doubles when the size exceeds 0.75 x capacity, and also when a key joins a chain that
    already holds 8 keys while the table is smaller than 64 (`treeifyBin` resizes instead of making a
    tree). Resizing keeps the relative order of keys inside a bucket, so the capacity is all we need.
    """
    counts: dict[int, int] = {}
    for size, spread in enumerate(hashes, start=1):
        bucket = spread & (capacity - 1)
        chain = counts.get(bucket, 0)
        counts[bucket] = chain + 1
        grew = False
        if chain >= _TREEIFY_THRESHOLD and capacity < _MIN_TREEIFY_CAPACITY:
            capacity *= 2
            grew = True
        if size > capacity * 3 // 4:
            capacity *= 2
            grew = True
        if grew:
            counts = {}
            for earlier in hashes[:size]:
                key = earlier & (capacity - 1)
                counts[key] = counts.get(key, 0) + 1
    return capacity


def java_hashmap_order(names: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """`names` (distinct, in insertion order) in the iteration order of a Java HashMap.

    Buckets are visited 0..capacity-1; inside a bucket keys keep insertion order. Tree bins (8+
    names colliding in a table of 64 or more) keep insertion order too: UNVERIFIED (spec §17.4).
    """
    assert initial_capacity > 0 and initial_capacity & (initial_capacity - 1) == 0
    ordered = list(names)
    hashes = [_spread_hash(name) for name in ordered]
    capacity = _final_capacity(hashes, initial_capacity)
    mask = capacity - 1
    positions = sorted(range(len(ordered)), key=lambda i: hashes[i] & mask)  # stable sort
    return [ordered[i] for i in positions]


@lru_cache(maxsize=1024)
def _cached_order(names: tuple[str, ...], capacity: int) -> tuple[str, ...]:
    # Messages of one producer mostly carry the same property names: order them once.
    return tuple(java_hashmap_order(names, capacity))


def encode_properties(props: Mapping[str, str | None], *, style: str = STYLE_4_9,
                      capacity: int | None = None) -> bytes:
    """Serialize properties as a broker of `style` ("4.9" or "5.x") would store them.

    Entries come out in Java HashMap order (the mapping's order is the insertion order); None values
    are skipped. "4.9" drops the final PROPERTY_SEPARATOR, "5.x" keeps it. `capacity` overrides the
    style's initial table size: a 5.x store fed `Message` objects directly (not through the broker's
    request parser) serializes the message's own 16-bucket map, as the 5.3.3 fixtures show. Like
    RocketMQ, names and values are not checked for separators and the length is not checked here.
    """
    if style not in HASHMAP_INITIAL_CAPACITY:
        raise ValueError(f"unknown properties style {style!r}; expected '4.9' or '5.x'")
    if capacity is None:
        capacity = HASHMAP_INITIAL_CAPACITY[style]
    elif capacity <= 0 or capacity & (capacity - 1):
        raise ValueError(f"a HashMap capacity is a power of two, not {capacity}")
    # A None value still occupies a HashMap slot (it counts towards resizing); it is only skipped
    # when the string is written, as `messageProperties2String` does.
    names = list(props)
    if len(names) > 1:
        names = _cached_order(tuple(names), capacity)
    order = [(name, props[name]) for name in names if props[name] is not None]
    if not order:
        return b""
    text = "".join([name + NAME_VALUE_SEPARATOR + value + PROPERTY_SEPARATOR for name, value in order])
    if style == STYLE_4_9:
        text = text[:-1]
    return text.encode("utf-8")
