"""[5.x] RocksDB consume queues (`storeType=defaultRocksDB`, spec §13): one database for every queue.

| module         | holds                                                                 |
|----------------|-----------------------------------------------------------------------|
| `queue_store`  | `RocksDBConsumeQueueStore`: units, max/min offsets, time search, reads |
| `maintenance`  | min offsets, truncation and expiry                                    |
| `db`           | opening the database with rocksdict (writable, or a read-only shadow) |

May import: `store.consumequeue.base`, `store.consumequeue.time_search`, `store.codec`, `store.errors`.
"""
