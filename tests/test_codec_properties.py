"""store.codec.properties: spec §2.3 parse rule, Java HashMap order, vectors of §14.4."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec.javahash import java_string_hash
from store.codec.properties import (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, decode_properties,
                                    encode_properties, java_hashmap_order)

UNIQ = "7F00000130391B6D358647B760000000"
EXAMPLE = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": UNIQ, "WAIT": "true"}
VECTOR_4_9 = (b"KEYS\x01k1 k2\x02UNIQ_KEY\x01" + UNIQ.encode() + b"\x02WAIT\x01true\x02TAGS\x01TagA")
VECTOR_5_X = (b"UNIQ_KEY\x01" + UNIQ.encode()
              + b"\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02WAIT\x01true\x02")


def bucket(name: str, capacity: int) -> int:
    h = java_string_hash(name) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def test_separators():
    assert NAME_VALUE_SEPARATOR == "\x01" and PROPERTY_SEPARATOR == "\x02"


@pytest.mark.parametrize("style, expected", [("4.9", VECTOR_4_9), ("5.x", VECTOR_5_X)])
def test_spec_vectors(style, expected):
    assert encode_properties(EXAMPLE, style=style) == expected
    assert len(expected) == (72 if style == "4.9" else 73)
    assert decode_properties(expected) == EXAMPLE


@pytest.mark.parametrize("capacity, buckets", [
    (16, {"KEYS": 7, "UNIQ_KEY": 12, "WAIT": 13, "TAGS": 14}),
    (128, {"UNIQ_KEY": 28, "TAGS": 62, "KEYS": 87, "WAIT": 93}),
])
def test_spec_bucket_indices(capacity, buckets):
    assert {name: bucket(name, capacity) for name in buckets} == buckets


@pytest.mark.parametrize("style, expected", [
    ("4.9", ["KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]),
    ("5.x", ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]),
])
def test_broker_added_cluster_lands_after_uniq_key(style, expected):
    props = dict(EXAMPLE)
    if style == "4.9":
        del props["WAIT"]          # 4.9.7 removes WAIT before serializing
    props["CLUSTER"] = "DefaultCluster"
    assert list(decode_properties(encode_properties(props, style=style))) == expected


def test_capacity_override_and_trailing_separator():
    text = encode_properties(EXAMPLE, style="5.x", capacity=16)
    assert text == VECTOR_4_9 + b"\x02"
    with pytest.raises(ValueError):
        encode_properties(EXAMPLE, capacity=12)
    with pytest.raises(ValueError):
        encode_properties(EXAMPLE, style="6.0")


def test_none_values_skipped_and_empty():
    assert encode_properties({}) == b"" and encode_properties({}, style="5.x") == b""
    assert encode_properties({"A": None}) == b""
    assert encode_properties({"A": None, "B": "x"}, style="5.x") == b"B\x01x\x02"
    assert decode_properties(b"") == {}


@pytest.mark.parametrize("text, expected", [
    ("", {}),
    ("a", {}),
    ("ab", {}),
    ("a\x01", {}),                           # empty value dropped
    ("\x01b", {}),                           # empty name dropped
    ("\x01bc", {}),
    ("ab\x01", {}),
    ("a\x01b", {"a": "b"}),
    ("a\x01b\x02", {"a": "b"}),
    ("a\x01b\x02\x02", {"a": "b"}),
    ("\x02a\x01b", {"a": "b"}),
    ("a\x01\x01c", {"a": "\x01c"}),          # a value may contain \x01
    ("ab\x01c\x01d", {"ab": "c\x01d"}),
    ("a\x01b\x02a\x01c", {"a": "c"}),        # later duplicates win
    ("a\x01b\x02junk\x02c\x01d", {"a": "b", "c": "d"}),
    ("n\x01\u6807\u7b7e\x02e\x01\U0001F600", {"n": "\u6807\u7b7e", "e": "\U0001F600"}),
])
def test_parse_rule(text, expected):
    assert decode_properties(text) == expected
    assert decode_properties(text.encode("utf-8")) == expected
    assert decode_properties(bytearray(text.encode("utf-8"))) == expected
    assert decode_properties(memoryview(text.encode("utf-8"))) == expected


def test_bad_utf8_is_replaced():
    assert decode_properties(b"k\x01\xff\xfe\x02x\x01y") == {"k": "\ufffd\ufffd", "x": "y"}


def java_hashmap_reference(names: list[str], capacity: int) -> list[str]:
    """An independent model of java.util.HashMap: chained buckets, putVal, resize split, treeifyBin."""
    def resize(old):
        table = [[] for _ in range(2 * len(old))]
        for chain in old:                            # the lo/hi split keeps relative order
            for entry in chain:
                table[entry[0] & (len(table) - 1)].append(entry)
        return table

    table: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
    for size, name in enumerate(names, start=1):
        h = java_string_hash(name) & 0xFFFFFFFF
        h ^= h >> 16
        chain = table[h & (len(table) - 1)]
        chain.append((h, name))
        if len(chain) > 8 and len(table) < 64:      # treeifyBin on a small table resizes instead
            table = resize(table)
        if size > len(table) * 3 // 4:
            table = resize(table)
    return [name for chain in table for _, name in chain]


# Names sharing the low 4 bits of their spread hash force the treeifyBin resize of a small table.
COLLIDING = [f"c{i}" for i in range(4000) if bucket(f"c{i}", 16) == 5][:12]


@pytest.mark.parametrize("count", [1, 5, 12, 13, 25, 49, 97])
def test_order_through_resizes(count):
    names = [f"prop{i}" for i in range(count)]
    for capacity in (16, 128):
        assert java_hashmap_order(names, capacity) == java_hashmap_reference(names, capacity)


@pytest.mark.parametrize("count", [8, 9, 10, 12])
def test_order_with_colliding_chain(count):
    names = COLLIDING[:count]
    assert java_hashmap_order(names, 16) == java_hashmap_reference(names, 16)
    if count > 8:   # the 9th colliding name doubled the table although 9 < 0.75 x 16
        assert java_hashmap_order(names, 16) != names


NAME = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
               min_size=1, max_size=12)
VALUE = st.text(st.characters(blacklist_characters="\x02", blacklist_categories=("Cs",)),
                min_size=1, max_size=20)


@given(st.lists(NAME, unique=True, max_size=40))
def test_order_matches_reference_model(names):
    for capacity in (16, 128):
        assert java_hashmap_order(names, capacity) == java_hashmap_reference(names, capacity)


@given(st.dictionaries(NAME, VALUE, max_size=30), st.sampled_from(["4.9", "5.x"]))
def test_round_trip(props, style):
    raw = encode_properties(props, style=style)
    assert decode_properties(raw) == props
    assert raw.endswith(b"\x02") == (style == "5.x" and bool(props))


@given(st.binary(max_size=300))
def test_decode_never_raises_on_bytes(data):
    result = decode_properties(data)
    assert all(name and value and "\x02" not in name + value and "\x01" not in name
               for name, value in result.items())


@given(st.text(max_size=200))
def test_decode_never_raises_on_text(text):
    decode_properties(text)
