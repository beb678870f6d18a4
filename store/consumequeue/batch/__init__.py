"""[5.x] Batch consume queues (`BatchConsumeQueue`, tag rocketmq-all-5.3.3): 46-byte units, one per
commit-log record of a batch topic, in `<root>/batchconsumequeue/<topic>/<queueId>/`
(`StorePathConfigHelper.getStorePathBatchConsumeQueue`).

| module        | holds                                                                      |
|---------------|----------------------------------------------------------------------------|
| `batch_queue` | one queue: load, recover, put, lookup by queue offset, min/max, truncation |
| `queue_store` | every batch queue of a store (loaded, recovered and cut by store.recovery)  |
| `topic_type`  | whether a topic is a batch topic (`QueueTypeUtils.isBatchCq`)              |
| `put`         | a put to a batch topic: QUEUEOFFSET, INNER_BASE, the offset moved by INNER_NUM |
| `dispatch`    | a batch topic's records get batch units (and no ordinary unit)             |
| `pull`        | `getMessage` on a batch queue (5.3.3's loop, whole records per unit)       |

Hosted for 5.x stores with file consume queues; topics are batch topics by their topics.json
attribute `queue.type=BatchCQ`. Not yet: long polling on a batch queue, time lookups, cleanup of
expired batch-queue files, the RocksDB backend.

May import: `store.api`, `store.codec`, `store.mappedfile`, `store.errors`.
"""
