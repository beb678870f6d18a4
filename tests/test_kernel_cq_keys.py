"""cq_keys (store/kernel/c/cq_keys.c) against its twin (store.kernel.cq_keys.cq_keys_py) and against
the codec's keys (`queue_keys`, `offset_key`, the keys `put_units` writes): the same keys in the
same order, the same heads remembered, the same refusals and sentences."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from store import kernel
from store.codec import rocksdb_cq as codec
from store.kernel.cq_keys import cq_keys_py

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
FUNCTIONS = [pytest.param(cq_keys_py, id="twin"),
             pytest.param(getattr(kernel._native, "cq_keys", None), id="native",
                          marks=needs_native)]
TOPICS = ["T", "TopicA", "%RETRY%group", "ünï", "x" * 127, "y" * 300, ""]
QUEUE_IDS = [0, 1, 7, 255, 256, 65535, 2**31 - 1, -1, -2**31]
OFFSETS = [0, 1, 255, 2**31, 2**63 - 1, -1, -2**63]


def _case(rng: random.Random):
    runs = rng.randrange(0, 60)
    queues = [(rng.choice(TOPICS), rng.choice(QUEUE_IDS)) for _ in range(runs)]
    lengths = [rng.choice([1, 1, 1, 2, 5]) for _ in range(runs)]
    offsets = [rng.choice(OFFSETS) if rng.random() < 0.2 else rng.randrange(10**6)
               for _ in range(sum(lengths))]
    return queues, np.array(lengths, dtype=np.int64), np.array(offsets, dtype=np.int64)


def _expected(queues, lengths, offsets):
    unit_keys, max_keys, unit = [], [], 0
    for queue, length in zip(queues, lengths.tolist()):
        prefix, max_key = codec.queue_keys(*queue)
        max_keys.append(max_key)
        for offset in offsets[unit:unit + length].tolist():
            unit_keys.append(prefix + struct.pack(">q", offset))
        unit += length
    return unit_keys, max_keys


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("seed", range(30))
def test_cq_keys_are_the_codecs_keys(function, seed):
    queues, lengths, offsets = _case(random.Random(seed))
    heads = {}
    assert function(queues, lengths, offsets, heads, codec.topic_head) == \
        _expected(queues, lengths, offsets)
    assert heads == {topic: codec.topic_head(topic) for topic, _ in queues}


def test_the_keys_are_the_ones_rocketmq_lays_out():
    # RocksDBConsumeQueueTable: topicLen(4) CTRL_1 topic CTRL_1 queueId(4) CTRL_1 cqOffset(8);
    # RocksDBConsumeQueueOffsetTable: topicLen(4) CTRL_1 topic CTRL_1 "max" CTRL_1 queueId(4).
    units, maxes = cq_keys_py([("TopicA", 3)], np.array([1]), np.array([9]), {}, codec.topic_head)
    assert units == [b"\x00\x00\x00\x06\x01TopicA\x01\x00\x00\x00\x03\x01" + (9).to_bytes(8, "big")]
    assert maxes == [b"\x00\x00\x00\x06\x01TopicA\x01max\x01\x00\x00\x00\x03"]
    assert maxes[0] == codec.offset_key("TopicA", 3, codec.MAX_KIND)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_known_heads_are_used_and_new_ones_made_once(function):
    calls = []

    def head_of(topic):
        calls.append(topic)
        return b"<" + topic.encode() + b">"
    heads = {"A": b"[A]"}
    units, maxes = function([("A", 1), ("B", 2), ("B", 3)], np.array([1, 1, 1]),
                            np.array([5, 6, 7]), heads, head_of)
    assert calls == ["B"]
    assert heads == {"A": b"[A]", "B": b"<B>"}
    assert units[0].startswith(b"[A]") and units[2].startswith(b"<B>")
    assert maxes == [b"[A]max\x01\x00\x00\x00\x01", b"<B>max\x01\x00\x00\x00\x02",
                     b"<B>max\x01\x00\x00\x00\x03"]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_lists_and_unaligned_buffers_are_read_alike(function):
    offsets = bytearray(1) + np.array([3, 4], dtype=np.int64).tobytes()
    lengths = bytearray(1) + np.array([2], dtype=np.int64).tobytes()
    got = function([("T", 0)], memoryview(lengths)[1:], memoryview(offsets)[1:], {},
                   codec.topic_head)
    assert got == _expected([("T", 0)], np.array([2]), np.array([3, 4]))


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("arguments, error, sentence", [
    (((), [1], [1], {}, codec.topic_head), TypeError, "queues must be a list"),
    (([("T", 0)], [1], [1], [], codec.topic_head), TypeError, "heads a dict"),
    (([("T", 0)], [1], [1], {}, None), TypeError, "head_of callable"),
    (([("T", 0)], [1, 1], [1], {}, codec.topic_head), ValueError, "one per queue"),
    (([("T", 0)], [1], b"1234567", {}, codec.topic_head), ValueError, "one per queue"),
    (([("T", 0)], [0], [], {}, codec.topic_head), ValueError, "must be >= 1"),
    (([("T", 0)], [2], [1], {}, codec.topic_head), ValueError, "cover the offsets"),
    (([("T", 0)], [1], [1, 2], {}, codec.topic_head), ValueError, "cover the offsets"),
    (([("T", 0)], [-1], [1], {}, codec.topic_head), ValueError, "must be >= 1"),
    (([["T", 0]], [1], [1], {}, codec.topic_head), TypeError, r"a \(str, int\) tuple"),
    (([("T", 0, 1)], [1], [1], {}, codec.topic_head), TypeError, r"a \(str, int\) tuple"),
    (([(b"T", 0)], [1], [1], {}, codec.topic_head), TypeError, r"a \(str, int\) tuple"),
    (([("T", 0.0)], [1], [1], {}, codec.topic_head), TypeError, r"a \(str, int\) tuple"),
    (([("T", True)], [1], [1], {}, codec.topic_head), TypeError, r"a \(str, int\) tuple"),
    (([("T", 2**31)], [1], [1], {}, codec.topic_head), OverflowError, "int32"),
    (([("T", -2**31 - 1)], [1], [1], {}, codec.topic_head), OverflowError, "int32"),
    (([("T", 2**70)], [1], [1], {}, codec.topic_head), OverflowError, "int32"),
    (([("T", 0)], [1], [1], {}, lambda topic: "text"), TypeError, "must return bytes"),
    (([("T", 0)], [1], [1], {"T": "text"}, codec.topic_head), TypeError, "must be bytes"),
])
def test_bad_arguments_are_refused_alike(function, arguments, error, sentence):
    queues, lengths, offsets, heads, head_of = arguments
    lengths = np.array(lengths, dtype=np.int64) if isinstance(lengths, list) else lengths
    offsets = np.array(offsets, dtype=np.int64) if isinstance(offsets, list) else offsets
    with pytest.raises(error, match=sentence):
        function(queues, lengths, offsets, heads, head_of)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_failing_head_of_is_raised(function):
    def head_of(topic):
        raise KeyError("no head")
    with pytest.raises(KeyError, match="no head"):
        function([("T", 0)], np.array([1]), np.array([1]), {}, head_of)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_argument_count_is_checked(function):
    with pytest.raises(TypeError, match=r"cq_keys\(queues, lengths, offsets, heads, head_of\)"):
        function([], np.array([], dtype=np.int64), np.array([], dtype=np.int64), {})
