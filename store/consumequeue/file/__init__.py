"""File consume queues (`storeType=default`): `<root>/consumequeue/<topic>/<queueId>/<20-digit offset>`.

| module          | holds                                                                     |
|-----------------|---------------------------------------------------------------------------|
| `queue_store`   | `FileConsumeQueueStore`: every queue of the store (RocketMQ's `ConsumeQueueStore`) |
| `consume_queue` | `FileConsumeQueue`: one queue (RocketMQ's `ConsumeQueue`)                   |
| `queue_recovery`| where one queue ends: recovery, `truncateDirtyLogicFiles`, following a writer |
| `mapping`       | mapping a queue's segments only while the queue is in use                   |
| `time_search`   | `getOffsetInQueueByTime` over one queue's mapped segments                   |

May import: `store.consumequeue.base`, `store.consumequeue.time_search`, `store.codec`, `store.mappedfile`,
`store.errors`.
"""
