"""The compiled put encoder (`store.kernel.encode_put`, store/kernel/c/put.c) against the Python put
path (`store.commitlog.put_path._encode_for_put`): the same record bytes and draft, or a decline
where the Python path refuses or decides."""

from __future__ import annotations

import collections
import os
import random

import pytest

from store import kernel


def _random_message(rng: random.Random):
    from store.api import Message

    def pick(options):      # mostly the first (ordinary) option, sometimes anything
        return options[0] if rng.random() < 0.6 else rng.choice(options)
    properties = None
    if rng.random() < 0.7:
        properties = {}
        for _ in range(pick([2, 0, 1, 3, 9, 13, 70])):
            properties[rng.choice(["UNIQ_KEY", "a", "KEYS", "TAGS", "p" + str(rng.randrange(200)),
                             "é", "DELAY", "x\x01y", "", "w{}"])] = \
                rng.choice(["v", "1", "", "ü\U0001F600", "a\x01b", "c\x02", "7F00"])
    body = os.urandom(rng.randrange(0, 64))
    return Message(
        topic=pick(["T", "BenchTopic", "bad topic!", "t" * 130, "%RETRY%g", "T_2"]),
        body=pick([body, body, bytearray(body), "text"]),
        queue_id=pick([0, 1, 7, 65535, 65536, -1, True]),
        tags=pick([None, "", "TagA", "a\x01", 5, "tä"]),
        keys=pick([(), ["k1", "k2"], ("", "k"), "k1 k2", ["a\x02"], [1], ("k",) * 3]),
        properties=properties,
        flag=pick([0, 0, 3, 2**31, -2**31]),
        sys_flag=pick([0, 0, 4, 8, 12, 0x10, 2**40]),
        born_timestamp=pick([None, 0, 1700000000000, 2**63, 1.5]),
        born_host=pick([None, None, "", "10.1.2.3:77", "[::1]:5", "nohost"]))


@pytest.mark.skipif(kernel.encode_put is None, reason="the C kernel is not built")
@pytest.mark.parametrize("style", ["4.9", "5.x"])
def test_encode_put_matches_the_python_path(style):
    from store.commitlog import put_path
    rng = random.Random(11 if style == "4.9" else 12)
    settings = put_path.PutSettings("127.0.0.1:10911", 4096, style, style == "5.x",
                                    (1000, 5000), 1 << 20)
    accepted = declined = 0
    for _ in range(3000):
        message = _random_message(rng)
        try:
            expected = put_path._encode_for_put(message, settings, 1_700_000_000_123)
        except put_path.PutRefused:
            expected = None
        fast = kernel.encode_put(message, settings.kernel_context, 1_700_000_000_123)
        if fast is None:
            declined += 1
            continue
        accepted += 1
        assert expected is not None, message           # never accepts what Python refuses
        record, draft = expected
        assert fast[0] == record
        assert fast[1:] == (draft.topic, draft.queue_id, draft.sys_flag, draft.tags_code,
                            draft.keys, draft.uniq_key, draft.store_timestamp_position)
    assert accepted > 100 and declined > 100


@pytest.mark.skipif(kernel.encode_put is None, reason="the C kernel is not built")
def test_encode_put_reads_a_message_at_its_slots_as_getattr_reads_it():
    """The compiled encoder reads store.api.Message's fields at their slots; any other class (a
    plain object, a subclass that overrides a field with a property) by getattr. Each gives the
    same answer as the Python path's attribute reads."""
    import dataclasses
    import types

    from store.api import Message
    from store.commitlog import put_path

    class Renamed(Message):
        __slots__ = ()

        @property
        def topic(self):                  # whatever the slot holds
            return "BenchTopic"

        @topic.setter
        def topic(self, value):
            Message.__dict__["topic"].__set__(self, value)

    settings = put_path.PutSettings("127.0.0.1:10911", 4096, "4.9", False, (1000,), 1 << 20)
    rng = random.Random(14)
    compared = collections.Counter()
    for _ in range(500):
        message = _random_message(rng)
        fields = {f.name: getattr(message, f.name) for f in dataclasses.fields(Message)}
        for other in (message, types.SimpleNamespace(**fields), Renamed(**fields)):
            try:
                expected = put_path._encode_for_put(other, settings, 77)
            except put_path.PutRefused:
                expected = None
            fast = kernel.encode_put(other, settings.kernel_context, 77)
            if fast is not None:
                compared[type(other)] += 1
                record, draft = expected
                assert fast[0] == record and fast[1] == draft.topic == other.topic
    assert min(compared.values()) > 50 and len(compared) == 3
    half = object.__new__(Message)                       # slots left unset: getattr's error
    object.__setattr__(half, "topic", "T")
    with pytest.raises(AttributeError, match="body"):
        kernel.encode_put(half, settings.kernel_context, 77)


@pytest.mark.skipif(kernel.encode_put is None, reason="the C kernel is not built")
def test_encode_put_orders_many_properties_like_java_hashmap():
    from itertools import product

    from store.commitlog import put_path
    from store.api import Message
    rng = random.Random(13)
    colliding = ["".join(parts) for parts in product(["Aa", "BB"], repeat=4)]   # one Java hash
    settings = put_path.PutSettings("127.0.0.1:10911", 1 << 20, "4.9", False, (1000,), 1 << 22)
    for _ in range(300):
        names = rng.sample(colliding, rng.randrange(0, 16)) + \
            [f"p{rng.randrange(10_000)}" for _ in range(rng.randrange(0, 50))]
        properties = {name: f"v{rng.randrange(99)}" for name in names}
        message = Message("T", b"body", 0, rng.choice([None, "TagA"]), rng.choice([(), ("k",)]),
                          properties)
        record, draft = put_path._encode_for_put(message, settings, 5)
        fast = kernel.encode_put(message, settings.kernel_context, 5)
        if len(properties) + 2 > 64:
            continue                                          # beyond the compiled path's table
        assert fast is not None and fast[0] == record
