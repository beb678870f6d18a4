"""The fuzz driver's `cq_keys` target (store/kernel/c/cq_keys.c) against its twin
(store.kernel.cq_keys.cq_keys_py), also run unsanitized by tests/test_kernel_cq_keys.py.

Input: runs of (topic, queue id) with topics of every length class (empty, ASCII, UTF-8, over 127
bytes) and queue ids at and past the int32 edges, lengths that cover the offsets or (now and then)
do not (0, negative, one too many or too few), offsets at int64 edges, the buffers sometimes
unaligned by a byte, heads partly known and a `head_of` that sometimes returns text or raises; and
now and then a run that is not a (str, int) tuple. Compared as outcomes: the same keys and heads, or
the same exception and sentence.
"""

from __future__ import annotations

import numpy as np

from store.codec import rocksdb_cq as codec
from store.kernel.cq_keys import cq_keys_py
from tests.kernel_fuzz.edges import INT64_EDGES

TOPICS = ["", "T", "TopicA", "ünï", "x" * 127, "y" * 128, "z" * 3000]
QUEUE_IDS = [0, 1, 7, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**64]


def _buffer(rng, values):
    data = np.array(values, dtype=np.int64).tobytes()
    if rng.random() < 0.2:      # one byte in: the C reads any alignment
        return memoryview(b"\x00" + data)[1:]
    return np.frombuffer(data, dtype=np.int64) if data else np.empty(0, dtype=np.int64)


def cq_keys(fuzzer, outcome, disagreement) -> None:
    rng = fuzzer.rng
    runs = rng.randrange(0, 40)
    queues = [(rng.choice(TOPICS), rng.choice(QUEUE_IDS) if rng.random() < 0.1
               else rng.randrange(0, 64)) for _ in range(runs)]
    if runs and rng.random() < 0.05:
        queues[rng.randrange(runs)] = rng.choice([["T", 0], ("T",), (b"T", 0), ("T", 1.0), None])
    lengths = [rng.choice([1, 1, 1, 2, 3]) for _ in range(runs)]
    offsets = [rng.choice(INT64_EDGES) if rng.random() < 0.3 else rng.randrange(1 << 40)
               for _ in range(sum(lengths))]
    if runs and rng.random() < 0.1:
        lengths[rng.randrange(runs)] = rng.choice([0, -1, 2**62, -2**63])
    if rng.random() < 0.05:
        offsets.append(5)
    known = {topic: codec.topic_head(topic) for topic in rng.sample(TOPICS, rng.randrange(3))}
    mode = rng.random()

    def head_of(topic):
        if mode < 0.03:
            raise LookupError(f"no head for {topic!r}")
        if mode < 0.06:
            return topic
        return codec.topic_head(topic)
    fuzzer.last_input = {"target": "cq_keys", "queues": repr(queues)[:2000], "lengths": lengths,
                         "offsets": offsets[:200], "known": sorted(known), "mode": mode}
    native_heads, twin_heads = dict(known), dict(known)
    got = outcome(fuzzer.native.cq_keys, queues, _buffer(rng, lengths), _buffer(rng, offsets),
                  native_heads, head_of)
    fuzzer.executions["cq_keys"] += 1
    want = outcome(cq_keys_py, queues, np.array(lengths, dtype=np.int64),
                   np.array(offsets, dtype=np.int64), twin_heads, head_of)
    fuzzer.compared["cq_keys"] += 1
    if got != want or native_heads != twin_heads:
        raise disagreement(f"cq_keys: C {str(got)[:300]} != twin {str(want)[:300]}")
