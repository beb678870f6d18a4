"""The store's small metadata files: checkpoint, lock and abort, `config/*.json`.

| module          | holds                                                                    |
|-----------------|--------------------------------------------------------------------------|
| `checkpoint`    | `CheckpointFile`: the `checkpoint` file as a mutable object               |
| `lockfile`      | the `lock` file (`StoreLock`, `probe_lock`) and the `abort` file          |
| `config_files`  | `config/*.json` in the broker's fastjson dialect, atomic replacement, consumer offsets |
| `topic_config`  | `config/topics.json`: `TopicConfigManager`                                |
| `delay_offset`  | `config/delayOffset.json`: `DelayOffsetTable` (delivered delay levels)    |
| `timer_metrics` | `config/timermetrics` (5.x): `TimerMetricsFile`, timers waiting per topic |

May import: `store.codec`, `store.mappedfile` (for `fsync_directory`), `store.errors`.
"""
