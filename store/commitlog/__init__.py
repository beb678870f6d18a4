"""The commit log: every message of every topic, appended in one sequence of segment files.

| module        | holds                                                                           |
|---------------|---------------------------------------------------------------------------------|
| `commit_log`  | `CommitLog` (RocketMQ's `CommitLog`): append, read a record, scan, pointers     |
| `put_path`    | a `Message` -> an encoded record, with RocketMQ's checks (topic, sizes, delay)   |
| `read_path`   | `get_message`: the pull path and its status table                               |
| `read_plan`   | which consume-queue units one pull takes (transfer limits, tag filter windows)  |
| `record_match`| the pull's last line: is a record the one its consume-queue unit names?         |
| `earliest`    | [5.x] the store-wide earliest message time as 5.3.3 computes it (its IPv6 bug)  |

May import: `store.codec`, `store.kernel`, `store.mappedfile`, `store.errors`, `store.api` (the value types).
Never the consume queues, the index, the services or the facade: what a part needs is passed in.
"""
