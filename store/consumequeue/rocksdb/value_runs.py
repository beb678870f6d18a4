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
"""

from __future__ import annotations

import logging
import struct

from rocksdict import WriteBatch

from store.codec import rocksdb_cq as codec
from store.consumequeue.rocksdb.maintenance import EMPTY_QUEUE_OFFSET

log = logging.getLogger("store.consumequeue.rocksdb.queue_store")   # put_units' log, as before

_NEW_QUEUE = (-1, -1, -1)
_VALUE = codec.CQ_VALUE_SIZE
_PHY_SIZE = struct.Struct(">qi")
_LONG = struct.Struct(">q")


def put_value_runs(store, runs: tuple[list, ...], values: bytes, queue_offsets: list[int]) -> None:
    """Write `runs` into `store` (a writable, loaded RocksDBConsumeQueueStore) in one WriteBatch."""
    with store._lock:
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
