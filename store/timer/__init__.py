"""The RocketMQ 5.x timer store's on-disk structures (`org.apache.rocketmq.store.timer`).

Every 5.x broker keeps, beside the commit log, a timer log (`timerlog/`), a timing wheel
(`timerwheel`) and a checkpoint (`config/timercheck`). This package decodes and reads them (the
cross-check `store.check.timer` and the inspection API `store.inspect.timer` build on that without
writing anything), opens them for writing (`timer_writer`, used by `store.services.timer`), and holds
the broker's put-time rewrite of timer messages (`hook`).

| module            | holds                                                                        |
|-------------------|------------------------------------------------------------------------------|
| `codec`           | byte layouts: timer-log unit and BLANK, wheel slot, timercheck (pure, no I/O) |
| `timer_log`       | the timer log as a read-only mapped file queue: units, BLANKs, where it ends  |
| `timer_wheel`     | the wheel file: its state (present, missing, wrong size) and non-empty slots  |
| `timer_recovery`  | RocketMQ's `TimerMessageStore.recover()` replayed in memory                   |
| `timer_store`     | `TimerFiles`: the three files opened together, and a cheap presence probe     |
| `timer_writer`    | the wheel, the timer log and timercheck opened for writing                    |
| `hook`            | `HookUtils.transformTimerMessage` (put) and `convertMessage`'s properties     |

May import: `store.codec`, `store.mappedfile`, `store.config`, `store.api`, `store.errors`,
`store.kernel`. Never the services or the facade (the commit log and consume queues reach recovery as
callables).
"""
