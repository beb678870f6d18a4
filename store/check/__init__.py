"""The cross-check of a store (`MessageStore.check()`, `rmqstore check`): findings, never exceptions.

| module          | holds                                                                   |
|-----------------|-------------------------------------------------------------------------|
| `run`           | `check_store(store)`: every part, bounded, in order                     |
| `findings`      | `Finding` and the bounded list that collects them                       |
| `commitlog`     | a raw, read-only view of the commit log: segment files, record walk     |
| `consumequeue`  | every unit against the commit log                                       |
| `index`         | index headers, slot chains, entries against their records               |
| `timer`         | [5.x] timer log, wheel and timercheck against each other and the log    |

Reads files as they are on disk. May import: `store.codec`, `store.kernel`, `store.mappedfile`,
`store.meta`, `store.timer`, `store.errors`. Never the facade: `check_store` is handed the opened store.
"""
