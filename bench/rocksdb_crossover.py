"""Where does an iterator beat multi_get for reading a range of RocksDB consume-queue units?

Builds a throw-away database with the real §13 layout (store.codec.rocksdb_cq), several queues
interleaved, then times reading N consecutive units of one queue both ways for N = 1 .. 1024 at random
start offsets, on a warm cache. Prints a table; the crossover justifies
`store.consumequeue.rocksdb.queue_store.MULTI_GET_MAX_UNITS`. Not run by the tests:

    python bench/rocksdb_crossover.py [--units-per-queue 200000] [--repeats 300]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocksdict import Options, Rdict, WriteBatch  # noqa: E402

from store.codec import rocksdb_cq as codec  # noqa: E402
from store.consumequeue.rocksdb.queue_store import read_iterator, read_multi_get  # noqa: E402

QUEUES = [("TopicA", 0), ("TopicA", 1), ("TopicB", 0), ("TopicB", 7)]
SIZES = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512, 1024]


def build(path: str, units_per_queue: int) -> Rdict:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    db = Rdict(path, options, column_families={codec.OFFSET_CF: Options(raw_mode=True)})
    handle = db.get_column_family_handle(codec.DEFAULT_CF)
    phy_offset = 0
    for start in range(0, units_per_queue, 256):
        batch = WriteBatch(raw_mode=True)
        for queue_offset in range(start, min(start + 256, units_per_queue)):
            for topic, queue_id in QUEUES:
                batch.put(codec.cq_key(topic, queue_id, queue_offset),
                          codec.cq_value(phy_offset, 200, 0, 1_700_000_000_000 + phy_offset), handle)
                phy_offset += 200
        db.write(batch)
    db.flush()
    return db


def time_reads(reader, db, prefix, starts, count) -> float:
    begin = time.perf_counter()
    for start in starts:
        result = reader(db, prefix, start, count)
        assert len(result) == count
    return (time.perf_counter() - begin) / len(starts) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units-per-queue", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=400)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as directory:
        db = build(os.path.join(directory, "consumequeue"), args.units_per_queue)
        prefix = codec.cq_key_prefix(*QUEUES[1])
        print(f"{'units':>6} {'multi_get us':>13} {'iterator us':>12} {'faster':>9}")
        for count in SIZES:
            starts = [rng.randrange(0, args.units_per_queue - count) for _ in range(args.repeats)]
            time_reads(read_multi_get, db, prefix, starts[:20], count)  # warm both paths
            time_reads(read_iterator, db, prefix, starts[:20], count)
            # Best of 5 rounds: the machine's noise only ever adds time.
            multi = min(time_reads(read_multi_get, db, prefix, starts, count) for _ in range(5))
            iterator = min(time_reads(read_iterator, db, prefix, starts, count) for _ in range(5))
            faster = "multi_get" if multi < iterator else "iterator"
            print(f"{count:>6} {multi:>13.1f} {iterator:>12.1f} {faster:>9}")
        db.close()


if __name__ == "__main__":
    main()
