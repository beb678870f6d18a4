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
| `by_time`     | `getOffsetInQueueByTime` (unit store times, LOWER / UPPER, the file cache)  |

Hosted for 5.x stores with file consume queues; topics are batch topics by their topics.json
attribute `queue.type=BatchCQ`. Long polling serves batch queues like the others
(`store.services.long_polling.pull_with_hold`); cleanup deletes expired batch-queue files and
corrects their min (`BatchConsumeQueue.delete_expired` / `correct_min_offset`, from
`store.services.cleanup` and at open). On a RocksDB store a batch topic has ordinary RocksDB units
(`RocksDBConsumeQueueStore.findOrCreateConsumeQueue` always makes a `RocksDBConsumeQueue`); only its
put differs (`put`: offsets move by INNER_NUM, no INNER_BASE). Not done: `searchBcqByCacheEnable=false`
(the file walk of `searchTimeFromFiles` / `searchOffsetFromFiles`; the default cache is followed),
`estimateMessageCount`.

May import: `store.api`, `store.codec`, `store.mappedfile`, `store.errors`.
"""
