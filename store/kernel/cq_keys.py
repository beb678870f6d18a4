"""`cq_keys` (C: c/cq_keys.c): the RocksDB consume queue's unit keys and `max` keys of a dispatch
pass in one call, for `store.consumequeue.rocksdb.value_runs`.

RocketMQ 5.x `RocksDBConsumeQueueTable.buildCQKeyByteBuffer` and `RocksDBConsumeQueueOffsetTable`'s
`buildOffsetKeyByteBuffer` lay them out as `store.codec.rocksdb_cq` writes them: a unit key is the
topic head, the queue id (>i4), CTRL_1 and the queue offset (>i8); a `max` key is the topic head,
b"max", CTRL_1 and the queue id. The topic heads come from the caller (`heads`, filled through
`head_of` for a topic it lacks), so their layout stays in the codec. At thousands of queues a pass is
thousands of runs of one unit: the C makes every key with no Python step per queue.

`cq_keys_py` is the twin: the same keys, the same refusals (tests/test_kernel_cq_keys.py, and the
fuzz target in tests/kernel_fuzz/cq_keys_target.py).
"""

from __future__ import annotations

import struct

import numpy as np

from store.kernel import COMPILED, _native

_UNIT_TAIL = struct.Struct(">ibq")
_MAX_TAIL = struct.Struct(">4si")
_LENGTHS_REFUSED = "cq_keys: every length must be >= 1 and together they must cover the offsets"


def cq_keys_py(*args) -> tuple[list[bytes], list[bytes]]:
    """The twin of the compiled `cq_keys(queues, lengths, offsets, heads, head_of)` (see the module
    docstring)."""
    if len(args) != 5:
        raise TypeError("cq_keys(queues, lengths, offsets, heads, head_of)")
    queues, lengths, offsets, heads, head_of = args
    if type(queues) is not list or type(heads) is not dict or not callable(head_of):
        raise TypeError("cq_keys: queues must be a list, heads a dict and head_of callable")
    with memoryview(lengths) as lengths_view, memoryview(offsets) as offsets_view:
        lengths_bytes, offsets_bytes = lengths_view.nbytes, offsets_view.nbytes
        if lengths_bytes != 8 * len(queues) or offsets_bytes % 8:
            raise ValueError("cq_keys: lengths must be int64, one per queue, and offsets int64")
        run_lengths = np.frombuffer(lengths_view.cast("B"), dtype=np.int64).tolist()
        unit_offsets = np.frombuffer(offsets_view.cast("B"), dtype=np.int64).tolist()
    left = len(unit_offsets)
    for length in run_lengths:
        if length < 1 or length > left:
            raise ValueError(_LENGTHS_REFUSED)
        left -= length
    if left:
        raise ValueError(_LENGTHS_REFUSED)
    unit_keys: list[bytes] = []
    max_keys: list[bytes] = []
    unit = 0
    for queue, length in zip(queues, run_lengths):
        if type(queue) is not tuple or len(queue) != 2 or type(queue[0]) is not str or \
                type(queue[1]) is not int:
            raise TypeError("cq_keys: every queue must be a (str, int) tuple")
        topic, queue_id = queue
        if not -2**31 <= queue_id < 2**31:
            raise OverflowError("cq_keys: a queue id does not fit in int32")
        head = heads.get(topic)
        if head is None:
            head = head_of(topic)
            if type(head) is not bytes:
                raise TypeError("cq_keys: head_of must return bytes")
            heads[topic] = head
        elif type(head) is not bytes:
            raise TypeError("cq_keys: every head must be bytes")
        max_keys.append(head + _MAX_TAIL.pack(b"max\x01", queue_id))
        for queue_offset in unit_offsets[unit:unit + length]:
            unit_keys.append(head + _UNIT_TAIL.pack(queue_id, 1, queue_offset))
        unit += length
    return unit_keys, max_keys


cq_keys = _native.cq_keys if COMPILED else cq_keys_py
