"""Copy file-based consume queues into the RocksDB backend (storeType default -> defaultRocksDB).

RocketMQ 5.x can run both backends side by side (`rocksdbCQDoubleWriteEnable`); this is the offline
equivalent: every unit from each queue's min offset to its max offset is written with the store time
the commit log gives for it (the RocksDB value keeps it, spec §13.2). Pre-fill units are skipped.
"""

from __future__ import annotations

from store.codec.cq_unit import is_prefill_unit
from store.codec.message import DispatchRequest
from store.consumequeue.base import StoreTimeOf

BATCH_UNITS = 256  # RocketMQ commits RocksDB CQ writes in groups of up to 256 (spec §13.5)


def copy_queues(source, target, store_time_of: StoreTimeOf) -> int:
    """Write every unit of `source` (any ConsumeQueueStore) into `target`; returns the unit count."""
    written = 0
    for topic, queue_id in sorted(source.queues()):
        queue_offset = source.get_min_offset(topic, queue_id)
        max_offset = source.get_max_offset(topic, queue_id)
        batch = []
        while queue_offset < max_offset:  # each step advances by at least one unit
            units = source.get_units(topic, queue_id, queue_offset, max_offset - queue_offset)
            if units is None or len(units) == 0:
                queue_offset += 1  # a gone file: nothing to copy at this offset
                continue
            for index, (phy_offset, size, tags_code) in enumerate(zip(
                    units["phy_offset"].tolist(), units["size"].tolist(),
                    units["tags_code"].tolist())):
                if is_prefill_unit(phy_offset, size, tags_code):
                    continue
                batch.append(DispatchRequest(
                    topic, queue_id, phy_offset, size, tags_code, store_time_of(phy_offset, size),
                    queue_offset + index, "", None, 0, 0, {}))
                if len(batch) >= BATCH_UNITS:
                    target.put_units(batch)
                    written += len(batch)
                    batch = []
            queue_offset += len(units)
        if batch:
            target.put_units(batch)
            written += len(batch)
    return written
