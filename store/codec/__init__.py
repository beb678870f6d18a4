"""Codecs: the store's byte formats as pure functions, bytes <-> frozen dataclasses or numpy arrays.

No I/O and no state: every on-disk layout is decoded and encoded here once, with its table of fields
(field, offset, size, meaning) in the module's docstring, and used by everything above.

| module              | format (spec section, RocketMQ class)                                      |
|---------------------|------------------------------------------------------------------------------|
| `message`           | one commit-log record: encode, patch, decode (§2, `CommitLog`, `MessageDecoder`) |
| `record_check`      | is a valid record here, and its dispatch request (§2.7, `CommitLog.checkMessageAndReturnSize`) |
| `properties`        | the PROPERTIES field, in Java `HashMap` order (§2.3)                        |
| `msgid`             | host fields and the offset message id (§3.1, `MessageDecoder.createMessageId`) |
| `uniq_key`          | the client's `UNIQ_KEY` (§3.2, `MessageClientIDSetter`)                     |
| `topic`             | topic name rules (§2.6, `TopicValidator`)                                   |
| `javahash`          | Java's `String.hashCode` behind tagsCode and the index slots               |
| `cq_unit`           | the 20-byte consume-queue unit (§4, `ConsumeQueue`)                         |
| `rocksdb_cq`        | [5.x] RocksDB consume-queue keys and values (§13, `RocksDBConsumeQueueTable`) |
| `index_codec`       | index header, slots and entries (§5, `IndexFile`, `IndexHeader`)            |
| `checkpoint_codec`  | the `checkpoint` file (§6.1, `StoreCheckpoint`)                             |
| `fastjson`          | the JSON dialect of `config/*.json` (§7, fastjson 1.x PrettyFormat)        |
| `java_properties`   | `java.util.Properties` text (`broker.conf`)                                 |

May import: `store.codec`, `store.kernel` (the compiled form of the codecs' hot loops, which imports
nothing of the store) and `store.errors`. Nothing else of the store.
"""
