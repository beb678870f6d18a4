"""Consume queues: per (topic, queue id), the 20-byte units that point into the commit log.

| module                   | holds                                                                 |
|--------------------------|-----------------------------------------------------------------------|
| `base`                   | the `ConsumeQueueStore` interface both backends implement, settings   |
| `factory`                | which backend a directory holds, and opening it                       |
| `time_search`            | the binary searches behind `getOffsetInQueueByTime`, for both backends |
| `copy`                   | copying every queue from one backend into another                     |
| `file/`                  | `storeType=default`: one directory of segment files per queue          |
| `rocksdb/`               | `storeType=defaultRocksDB` [5.x]: one RocksDB database for every queue |
| `batch/`                 | [5.x] `BatchConsumeQueue`: 46-byte units in `batchconsumequeue/`         |
| `lmq`                    | [5.x] LMQ multi-dispatch: INNER_MULTI_DISPATCH offsets and extra units  |

May import: `store.codec`, `store.kernel`, `store.mappedfile`, `store.errors`. The backends import `base`
and `time_search`, never `factory` (which imports them).
"""
