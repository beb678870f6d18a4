"""The cross-check of a store (`MessageStore.check()`, `rmqstore check`): findings, never exceptions.

| module          | holds                                                                   |
|-----------------|-------------------------------------------------------------------------|
| `run`           | `check_store(store)`: every part, bounded, in order                     |
| `findings`      | `Finding` and the bounded list that collects them                       |
| `commitlog`     | a raw, read-only view of the commit log: segment files, record walk     |
| `segments`      | names, sizes and gaps of the segment set                                |
| `columns`       | per-record columns of one window of the walk (kernel.scan)              |
| `stream_units`  | during the walk: which CQ units match their record (runs per queue)     |
| `stream_index`  | during the walk: which index entries match their record (runs per file) |
| `consumequeue`  | every unit against the commit log                                       |
| `index`         | index headers, slot chains, entries against their records               |
| `index_runs`    | runs of index entries passed in bulk, with the same key memory          |
| `timer`         | [5.x] timer log, wheel and timercheck against each other and the log    |

Reads files as they are on disk. May import: `store.codec`, `store.kernel`, `store.mappedfile`,
`store.meta`, `store.timer`, `store.errors`. Never the facade: `check_store` is handed the opened store.
"""
