"""Opening a store directory: the load sequence, and the recovery of the commit log (spec §11).

| module                | holds                                                                 |
|-----------------------|-----------------------------------------------------------------------|
| `loader`              | which format wrote a directory; assembling and recovering its parts (`open_parts`) |
| `commitlog_recovery`  | the normal and abnormal walks, where the log ends, what to cut, `RecoveryReport` |

May import: the structures (`store.commitlog`, `store.consumequeue`, `store.index`, `store.meta`),
`store.codec`, `store.kernel`, `store.config`, `store.errors`. Never the services or the facade.
"""
