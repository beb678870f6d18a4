"""The inspection API: read-only views of the store's internals, for the dashboard, the CLI and the tour.

Two doors, one per situation an operator is in:

| module  | holds                                                                                  |
|---------|----------------------------------------------------------------------------------------|
| `live`  | `StoreInspector`, reached as `MessageStore.inspect` on an opened store: segments with    |
|         | their pointers, records from a physical offset, raw record bytes, consume-queue units,  |
|         | index headers, entries and chain walks, recovery and dispatch state                     |
| `admin_views` | `AdminViewsMixin` of `StoreInspector`: topics, topic status, consumer progress     |
|         | (lag clamped with its reason), broker status; `cleanup_view`: why cleanup would or  |
|         | would not delete now (the cleanup service's own decisions)                           |
| `scheduled` | `ScheduledViewsMixin` of `StoreInspector`: delay levels (pending, delivered offset,   |
|         | next due time) from the running schedule service or `config/delayOffset.json`      |
| `timer` | `TimerInspectMixin` of `StoreInspector` [5.x]: timer wheel, slot chains, timercheck,     |
|         | scheduled messages and their state (`timer_query` builds the rows)                      |
| `record_hex` | [5.x] a record's bytes as hex with its `__CRC32#` field marked and its property |
|         | CRC judged (`StoreInspector.record_hex`, `raw.record_hex_views`; apache/rocketmq#9852)   |
| `dledger_view` | `DLedgerViewsMixin` of `StoreInspector`: on a DLedger log, the 48-byte entry header |
|         | around a record (index, term, pos, size, magic, CRCs) and the log's state             |
| `batch_view` | `BatchViewsMixin` of `StoreInspector` [5.x]: batch consume queues (min/max in messages), |
|         | a page of 46-byte units with every field and the record each points to judged, the |
|         | check's findings on one queue; `AllQueues` puts batch queues into the admin views   |
| `batch_raw` | [5.x] a batch queue's units as its files hold them (`rmqstore dump batch-consume-queue`) |
| `restart_plan` | `restart_plan()`: what a broker restart would do to a store left with `abort`     |
|         | (4.9.7 `recoverAbnormally`): start segment, bytes and records cut, segments deleted,    |
|         | queues cut or rebuilt, index files dropped; computed read-only                          |
| `raw`   | functions over a store *directory* that need no open store (`rmqstore dump`): records,   |
|         | consume-queue units and index entries as the files hold them, even when the engine      |
|         | refuses to open the store                                                               |

Every result is a plain value (dataclass, dict row, numpy array in native byte order, or bytes) that the caller may keep;
nothing here writes, and every walk is bounded. The UI (`app/`, `pages/`) and the CLI's dump commands
use this package instead of the commit log, consume queues, index service or mapped files.

May import: the structures (`store.commitlog`, `store.consumequeue`, `store.index`, `store.mappedfile`,
`store.meta` for delayOffset.json, `store.timer` for the 5.x timer files, `store.dledger` for a
DLedger log),
`store.check` (its raw commit-log view), `store.recovery` (the restart plan reuses its rules),
`store.codec`, `store.kernel`, `store.errors`. Never the
services, and never `store.message_store` (which builds a `StoreInspector` from its parts).
"""
