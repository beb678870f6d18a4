"""[5.x] RocksDB consume-queue units written straight from the reput service's scan rows
(`store.services.dispatch_rows`), with no dispatch request per record.

`values` holds the 28-byte unit values of a dispatch pass (phy offset, size, tagsCode, store time:
`store.codec.rocksdb_cq`) grouped by queue, `queue_offsets` their queue offsets; a run is one queue's
units, in log order, given as columns (one list each): (topic, queue id), first unit, unit count,
consecutive offsets, first record's phy end, last record's phy end. The pass is one WriteBatch: every unit, then the `max` entry of every
queue touched, then CHECKPOINT, the same keys and values `put_units` writes for the same records. A
run that follows its queue (consecutive offsets, the next one, past its last end) is written without
a check per unit; any other goes unit by unit through `put_units`' rules (a repeat or an already built
offset is skipped, an offset out of order is logged).

A pass whose runs all follow their queues, one run per queue, each queue either known and not
emptied or new with its first unit at offset 0 (the common case, and the whole of a pass over
thousands of queues, where nearly every run is one unit), is checked with numpy over the runs'
columns (`_pass_columns`, which also checks that the runs lie one after another over the units),
and its keys made in one call (`store.kernel.cq_keys`), its values and WriteBatch puts through
`map`, with no Python loop per run. Any other pass goes run by run as above. Both give the same
batch, in the same order.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from itertools import chain, repeat

import numpy as np
from rocksdict import WriteBatch

from store.codec import rocksdb_cq as codec
from store.consumequeue.rocksdb.maintenance import EMPTY_QUEUE_OFFSET
from store.kernel.cq_keys import cq_keys

log = logging.getLogger("store.consumequeue.rocksdb.queue_store")   # put_units' log, as before

_NEW_QUEUE = (-1, -1, -1)
_ABSENT = (-2, -1, -1)     # not in store._max (the fast pass's marker; EMPTY_QUEUE_OFFSET is -1)
_VALUE = codec.CQ_VALUE_SIZE
_PHY_SIZE = struct.Struct(">qi")
_LONG = struct.Struct(">q")


def put_value_runs(store, runs: tuple[list, ...], values: bytes, queue_offsets: list[int]) -> None:
    """Write `runs` into `store` (a writable, loaded RocksDBConsumeQueueStore) in one WriteBatch.
    The columns of `runs` and `queue_offsets` may be lists or int64 arrays."""
    with store._lock:
        if not _put_following_pass(store, runs, values, queue_offsets):
            runs = tuple(column if type(column) is list else column.tolist() for column in runs)
            if type(queue_offsets) is not list:
                queue_offsets = queue_offsets.tolist()
            _put_runs(store, runs, values, queue_offsets)


def _put_runs(store, runs: tuple[list, ...], values: bytes, queue_offsets: list[int]) -> None:
    """Run by run, each checked against its queue's state (under the store's lock)."""
    batch = WriteBatch(raw_mode=True)
    put = batch.put
    units_cf = store._units_cf
    known = store._max
    prefixes = store._unit_prefixes
    pack = _LONG.pack
    unpack_long = _LONG.unpack_from
    touched: dict[tuple[str, int], tuple[int, int, int]] = {}
    batch_end = -1
    for queue, start, length, consecutive, first_end, last_end in zip(*runs):
        state = known.get(queue)
        first = state is None or state[0] == EMPTY_QUEUE_OFFSET
        if state is None:
            state = _NEW_QUEUE
        prefix = prefixes.get(queue)
        if prefix is None:
            prefixes[queue], store._max_keys[queue] = prefix, _ = codec.queue_keys(*queue)
        first_offset = queue_offsets[start]
        position = _VALUE * start
        if consecutive and first_end > state[2] and first_offset > state[0] and \
                (state[0] < 0 or first_offset == state[0] + 1):
            if first:
                store._note_first_unit(batch, queue, first_offset,
                                       unpack_long(values, position)[0])
            if length == 1:
                put(prefix + pack(first_offset), values[position:position + _VALUE], units_cf)
            else:
                for queue_offset in queue_offsets[start:start + length]:
                    put(prefix + pack(queue_offset), values[position:position + _VALUE],
                        units_cf)
                    position += _VALUE
                position -= _VALUE
            touched[queue] = (first_offset + length - 1, unpack_long(values, position)[0],
                              last_end)
            if last_end > batch_end:
                batch_end = last_end
            continue
        for queue_offset in queue_offsets[start:start + length]:   # put_units' checks
            phy_offset, size = _PHY_SIZE.unpack_from(values, position)
            value = values[position:position + _VALUE]
            position += _VALUE
            end = phy_offset + size
            if end <= state[2] or queue_offset <= state[0]:
                continue    # duplicate dispatch / already built
            if queue_offset != state[0] + 1 and state[0] >= 0:
                log.warning("logic queue order maybe wrong: %s-%d next %d, got %d",
                            queue[0], queue[1], state[0] + 1, queue_offset)
            if first:
                store._note_first_unit(batch, queue, queue_offset, phy_offset)
                first = False
            put(prefix + pack(queue_offset), value, units_cf)
            touched[queue] = state = (queue_offset, phy_offset, end)
            batch_end = max(batch_end, end)
    if touched:
        store._write_units(batch, touched, batch_end)


def _pass_columns(store, runs, values: bytes, queue_offsets):
    """The columns `_put_following_pass` writes from, or None when the pass is not one it can:
    (queues, numbers of the new queues' runs, their first units' phy offsets, per run its length,
    the units' queue offsets, per run: last queue offset, last unit's phy offset, last end)."""
    queues = runs[0] if type(runs[0]) is list else list(runs[0])
    count = len(queues)
    offsets = np.ascontiguousarray(queue_offsets, dtype=np.int64)
    starts = np.asarray(runs[1], dtype=np.int64)
    lengths = np.ascontiguousarray(runs[2], dtype=np.int64)
    ends = np.cumsum(lengths)
    if (lengths < 1).any() or starts[0] != 0 or (starts[1:] != ends[:-1]).any() or \
            ends[-1] != len(offsets) or len(values) != _VALUE * len(offsets):
        return None         # runs not one after another over all the units, as dispatch makes them
    states = np.fromiter(chain.from_iterable(map(store._max.get, queues, repeat(_ABSENT))),
                         dtype=np.int64, count=3 * count).reshape(count, 3)
    firsts, last_offsets = offsets[starts], offsets[starts + lengths - 1]
    known_offset, known_end = states[:, 0], states[:, 2]
    follows = (np.asarray(runs[3]) != 0) & (np.asarray(runs[4], dtype=np.int64) > known_end) & \
        (firsts > known_offset) & ((known_offset < 0) | (firsts == known_offset + 1)) & \
        (known_offset != EMPTY_QUEUE_OFFSET)
    if not follows.all() or (lengths != last_offsets - firsts + 1).any():
        return None
    new = np.flatnonzero(known_offset == _ABSENT[0])
    if firsts[new].any():
        return None         # a new queue starting past 0 gets its `min` entry in the batch
    new_numbers = new.tolist()
    min_table = store._min
    if (min_table and not min_table.keys().isdisjoint([queues[number] for number in new_numbers])) \
            or len(set(queues)) != count:
        return None         # an old `min` entry; one queue twice in a pass (it follows itself)
    units = np.frombuffer(values, dtype=np.uint8).reshape(-1, _VALUE)
    last_phys = units[starts + lengths - 1, :8].copy().view(">i8").ravel()
    new_phys = units[starts[new], :8].copy().view(">i8").ravel().tolist()
    return (queues, new_numbers, new_phys, lengths, offsets, last_offsets, last_phys,
            np.asarray(runs[5], dtype=np.int64))


def _put_following_pass(store, runs, values: bytes, queue_offsets) -> bool:
    """Write a pass whose every run follows its queue (see the module docstring); False, having
    written and changed nothing, for any other pass."""
    if not len(runs[0]):
        return False
    columns = _pass_columns(store, runs, values, queue_offsets)
    if columns is None:
        return False
    queues, new_numbers, new_phys, lengths, offsets, last_offsets, last_phys, last_ends = columns
    # _note_first_unit's case of a new queue from offset 0: its `min` entry waits for a full flush
    store._min_unwritten.update(zip([queues[number] for number in new_numbers], new_phys))
    batch = WriteBatch(raw_mode=True)
    put = batch.put
    offsets_cf = store._offsets_cf     # units go to the default column family: no handle to pass
    # Runs hold their units in order, run after run: every key made in one call (cq_keys, with no
    # Python step per queue: at thousands of queues nearly every run is one unit), and every key
    # and value put without a Python loop.
    unit_keys, max_keys = cq_keys(queues, lengths, offsets, store._topic_heads, codec.topic_head)
    values = np.frombuffer(values, dtype=f"V{_VALUE}")
    deque(map(put, unit_keys, values.tolist()), maxlen=0)    # default family
    max_values = np.column_stack((last_phys, last_offsets)).astype(">i8").view("V16").ravel()
    deque(map(put, max_keys, max_values.tolist(), repeat(offsets_cf)),
          maxlen=0)                     # _write_units: each queue's `max`
    checkpoint = max(store.checkpoint_phy_end, int(last_ends.max()))
    put(codec.checkpoint_key(), codec.checkpoint_value(checkpoint), offsets_cf)
    store.db.write(batch)
    store._max.update(zip(queues, zip(last_offsets.tolist(), last_phys.tolist(),
                                      last_ends.tolist())))
    store.checkpoint_phy_end = checkpoint
    return True
