"""[5.x] Batch consume queues (`BatchConsumeQueue`, tag rocketmq-all-5.3.3): 46-byte units, one per
commit-log record of a batch topic, in `<root>/batchconsumequeue/<topic>/<queueId>/`
(`StorePathConfigHelper.getStorePathBatchConsumeQueue`).

| module        | holds                                                                      |
|---------------|----------------------------------------------------------------------------|
| `batch_queue` | one queue: load, recover, put, lookup by queue offset, min/max, truncation |
| `topic_type`  | whether a topic is a batch topic (`QueueTypeUtils.isBatchCq`)              |

May import: `store.codec`, `store.mappedfile`, `store.errors`.
"""
