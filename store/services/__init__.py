"""The store's background services: dispatch (reput), flush and commit, long polling, cleanup.

| module          | holds                                                                     |
|-----------------|---------------------------------------------------------------------------|
| `dispatch`      | `ReputService` and the dispatchers: commit log -> consume queues and index |
| `redispatch`    | after a crash: which records the indexes already hold; indexing directly  |
| `flush`         | flush and commit services, group commit, the transient store pool         |
| `long_polling`  | `PullRequestHoldService`: pulls held until a message arrives               |
| `cleanup`       | expiry of old commit-log segments, consume-queue and index files          |
| `schedule`      | `ScheduleMessageService` (4.9): delay levels delivered to their real topic |
| `timer`         | `TimerService` (5.x): timer messages enqueued, delivered on time, flushed   |
| `lifecycle`     | `StoreServices`: starting and stopping them in RocketMQ's order          |
| `service_thread`| `ServiceThread`: a service's own loop thread, stopped by an event         |

May import: the structures (`store.commitlog`, `store.consumequeue`, `store.index`, `store.meta`),
`store.recovery`, `store.codec`, `store.kernel`, `store.api`, `store.errors`. Never the facade
(`store.message_store`, `store.inspect`).
"""
