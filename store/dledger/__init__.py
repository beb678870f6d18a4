"""A DLedger commit log (RocketMQ with `enableDLegerCommitLog=true`), read like a commit log.

A broker with automatic failover keeps its log in DLedger's files instead of `commitlog/`:
`<storePathRootDir>/dledger-<dLegerSelfId>/` (`DLedgerConfig.getDefaultPath`) with `data/` (entries,
files of `mappedFileSizeCommitLog` bytes named by start offset), `index/` (one 32-byte unit per
entry), `checkpoint` and `currterm`. Each entry wraps one whole RocketMQ record; RocketMQ's physical
offset of that record is the entry's `pos` + 48 (`DLedgerCommitLog`: `wroteOffset = pos +
DLedgerEntry.BODY_OFFSET`), so a record is read at the same file and position as in a commit log
and only walking the log (recovery, dispatch, check) has to step over the entry headers.

| module        | holds                                                                          |
|---------------|--------------------------------------------------------------------------------|
| `entry_codec` | byte layouts: entry header, BLANK, index unit (pure, no I/O)                    |
| `layout`      | where the files are (config or detection), checkpoint and currterm text, index |
| `entries`     | the entry walk with `DLedgerMmapFileStore.recover`'s rules                      |
| `recovery`    | `DLedgerMmapFileStore.recover`, then RocketMQ's part (queues, re-dispatch)    |
| `writer`      | single-member appends (`appendAsLeader`), index units, the checkpoint          |
| `commit_log`  | `DLedgerCommitLog`: a `CommitLog` over the data files, min/max offset, walks   |
| `dump`        | `rmqstore dump records` rows: each entry with the record inside                |

May import: `store.codec`, `store.kernel`, `store.mappedfile`, `store.config`, `store.errors`,
`store.api`, `store.commitlog`. Never the consume queues, index, services or the facade.
"""
