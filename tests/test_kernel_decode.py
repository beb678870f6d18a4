"""`decode_records` (store/kernel/c/decode.c) against its twin and `decode_message` record by record:
the same MessageRecords (equality, repr, field types, properties order) or the same refusal."""

from __future__ import annotations

import dataclasses
import os
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import kernel
from store.codec import message as msgcodec
from store.codec import msgid
from store.codec.properties import decode_properties, encode_properties
from store.errors import CorruptDataError
from store.kernel import decode as kdecode
from tests.test_kernel import _random_record

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
ARGS = (msgcodec.MessageRecord, msgcodec.decode_message, decode_properties, msgid.host_to_string)


def _outcome(function, records, *args):
    try:
        return ("ok", function(records, *args))
    except Exception as error:             # both twins' refusals are compared
        return ("raise", type(error).__name__, str(error))


def _typed(records):
    """Every field with its type, and the properties in order: what == alone would not show."""
    return [[(type(getattr(r, f.name)), getattr(r, f.name)) for f in dataclasses.fields(r)]
            + [list(r.properties.items())] for r in records]


def _check_same(records, args=ARGS):
    expected = _outcome(kdecode._decode_records_py, records, *args)
    if kernel.COMPILED:
        got = _outcome(kernel._native.decode_records, records, *args)
        assert got == expected
        if got[0] == "ok":
            assert repr(got[1]) == repr(expected[1])
            assert _typed(got[1]) == _typed(expected[1])
    return expected


def _mutated(rng: random.Random, record: bytes) -> bytes:
    """A record with a length field forged, a cut, or bytes flipped."""
    buf = bytearray(record)
    roll = rng.random()
    if roll < 0.3:
        return bytes(buf[:rng.randrange(len(buf) + 1)])
    if roll < 0.6:
        sys_flag = struct.unpack_from(">i", buf, 36)[0]
        body_length_at = 68 + (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)
        at = rng.choice([0, 4, 36, body_length_at, len(buf) - 2, len(buf) - 3])
        value = rng.choice([0, -1, 1, 7, 40, 127, 128, 0x7FFF, -0x8000, 0x7FFFFFFF, len(buf)])
        buf[at:at + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
        return bytes(buf[:len(record)])
    for _ in range(rng.randrange(1, 6)):
        buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf)


def test_twin_equals_decode_message_record_by_record():
    rng = random.Random(5)
    records = [bytes(_random_record(rng)) for _ in range(50)]
    assert kdecode._decode_records_py(records, *ARGS) == \
        [msgcodec.decode_message(raw) for raw in records]


@needs_native
@pytest.mark.parametrize("seed", range(8))
def test_random_records_decode_the_same(seed):
    rng = random.Random(seed)
    records = [bytes(_random_record(rng)) for _ in range(40)]
    forms = [records, [bytearray(r) for r in records], [memoryview(r) for r in records]]
    for form in forms:
        assert _check_same(form)[0] == "ok"


@needs_native
@pytest.mark.parametrize("seed", range(8))
def test_mutated_records_decode_or_refuse_the_same(seed):
    rng = random.Random(100 + seed)
    for _ in range(200):
        good = [bytes(_random_record(rng)) for _ in range(rng.randrange(0, 4))]
        bad = _mutated(rng, bytes(_random_record(rng)))
        _check_same(good + [bad] + good)


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topic=st.text(min_size=1, max_size=40), version=st.sampled_from([1, 2]),
       props=st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=5),
       raw_props=st.binary(max_size=40), use_raw=st.booleans(), body=st.binary(max_size=64),
       born=st.sampled_from(["1.2.3.4:5", "[::1]:9", "255.255.255.255:65535", "0.0.0.0:-1"]),
       store=st.sampled_from(["127.0.0.1:10911", "[fe80::1:2]:7", "9.9.9.9:0"]))
def test_any_fields_decode_the_same(topic, version, props, raw_props, use_raw, body, born, store):
    properties_raw = raw_props if use_raw else encode_properties(props)
    try:
        record = msgcodec.encode_message(
            topic=topic, queue_id=3, body=body, properties_raw=properties_raw, born_timestamp=1,
            born_host=born, store_timestamp=2, store_host=store, version=version)
    except ValueError:
        return                          # a field the format cannot hold
    outcome = _check_same([bytes(record)])
    assert outcome[0] == "ok"
    assert outcome[1][0].properties == decode_properties(properties_raw)


@needs_native
def test_odd_properties_follow_decode_properties():
    cases = [b"", b"\x02", b"a\x01b", b"\x01ab", b"ab\x01", b"a\x01\x01b\x02c\x01d\x02",
             b"TAGS\x01x\x02TAGS\x01y", b"\xff\x01\xfe", b"n\x01v\xc3\xa9", b"ab", b"a\x01b\x02\x02"]
    for raw in cases:
        record = msgcodec.encode_message(topic="T", queue_id=0, body=b"b", properties_raw=raw,
                                         born_timestamp=1, born_host="1.1.1.1:1",
                                         store_timestamp=1, store_host="2.2.2.2:2")
        assert _check_same([record])[1][0].properties == decode_properties(raw)


@needs_native
def test_not_a_buffer_goes_to_decode_one():
    good = bytes(_random_record(random.Random(1)))
    for odd in ["text", None, 5, b"", memoryview(good * 2)[::2]]:
        outcome = _check_same([good, odd])
        assert outcome[0] == "raise"


def test_refusals_are_the_same():
    good = bytes(_random_record(random.Random(2)))
    with pytest.raises(CorruptDataError):
        kdecode._decode_records_py([good[:50]], *ARGS)

    @dataclasses.dataclass(slots=True)
    class Short:
        store_size: int

    for records, cls in [((good,), msgcodec.MessageRecord), ([good], Short), ([good], int),
                         ([good], msgcodec.DispatchRequest)]:
        outcome = _check_same(records, (cls,) + ARGS[1:])
        assert outcome[0] == "raise" and outcome[1] == "TypeError"


def test_decode_messages_is_the_decode_of_each():
    rng = random.Random(9)
    records = [bytes(_random_record(rng)) for _ in range(30)] + [os.urandom(3)]
    assert msgcodec.decode_messages(records[:-1]) == [msgcodec.decode_message(r) for r in records[:-1]]
    with pytest.raises(CorruptDataError) as got:
        msgcodec.decode_messages(records)
    with pytest.raises(CorruptDataError) as expected:
        msgcodec.decode_message(records[-1])
    assert str(got.value) == str(expected.value)


@needs_native
def test_a_refused_class_leaves_the_learnt_layout_whole():
    """A class whose first slots match MessageRecord's and a later one does not is refused; the
    offsets learnt for MessageRecord before it must stay as they were."""
    good = bytes(_random_record(random.Random(3)))
    before = _check_same([good])
    names = [field.name for field in dataclasses.fields(msgcodec.MessageRecord)]
    # Slots in another order than MessageRecord's layout: the same names up to the last, a stranger.
    Partial = type("Partial", (), {"__slots__": ("extra",) + tuple(names[:-1]) + ("odd",)})
    Partial.__slots__ = tuple(names[:-1]) + ("odd",)
    outcome = _check_same([good], (Partial,) + ARGS[1:])
    assert outcome[0] == "raise" and outcome[1] == "TypeError"
    assert _check_same([good]) == before
