"""Scenario: delay-level delivery (ScheduleMessageService, 4.9 format) with many pending messages.

N messages are put with delay levels 1..18 (round robin) on a 4.9 store opened with a settable clock
and no background services; dispatch files them under SCHEDULE_TOPIC_XXXX. The clock then jumps past
the longest delay and `deliver_delayed()` passes run until nothing is left: each due message is read
back, rewritten to its real topic and appended (messageTimeup + putMessage). Measured:

* delivery: messages/s of the delivery passes alone, then with the dispatch of what they wrote;
* idle pass: the cost of one pass over the 18 levels when nothing is due (the running service makes
  one every 100 ms), in microseconds;
* reference: the plain put rate of the same messages without a delay, in the same run (a delivery is
  a read, a decode and a put, so the ratio says what the read and rewrite cost on top of a put).

    python -m bench.schedule_bench [--size smoke|full]
"""

from __future__ import annotations

import time

from bench import common

BODY_BYTES = 256
LEVELS = 18
LONGEST_DELAY_MS = 7_200_000


class _Clock:
    """Milliseconds that move only when set (delivery is decided by the store's clock)."""

    def __init__(self):
        self.now_ms = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now_ms


def _messages(count: int, delayed: bool):
    from store.api import Message
    template = common.make_messages(count, BODY_BYTES, topic="DelayBench", queues=8)
    return [Message(m.topic, m.body, queue_id=m.queue_id, tags=m.tags, keys=m.keys,
                    properties={**(m.properties or {}),
                                **({"DELAY": str(n % LEVELS + 1)} if delayed else {})})
            for n, m in enumerate(template)]


def one_round(args, count: int) -> dict:
    from store.message_store import MessageStore
    out = {}
    with common.scratch_dir(args, "schedule") as root:
        clock = _Clock()
        store = MessageStore.open(common.store_config(root, store_format="4.9"), clock_ms=clock,
                                  start_services=False)
        try:
            messages = _messages(count, delayed=True)
            started = time.perf_counter()
            for message in messages:
                assert store.put_message(message).ok
            store.dispatch_pending()
            out["put_delayed"] = count / (time.perf_counter() - started)
            assert sum(v.pending for v in store.inspect.delay_levels()) == count
            idle = []
            for _ in range(50):
                before = time.perf_counter()
                assert store.deliver_delayed() == 0
                idle.append((time.perf_counter() - before) * 1e6)
            out["idle_pass_us"] = common.percentile(idle, 50)
            clock.now_ms += LONGEST_DELAY_MS
            delivered, passes = 0, 0
            started = time.perf_counter()
            for _ in range(count + 1):          # bounded: each pass delivers or ends the loop
                done = store.deliver_delayed()
                passes += 1
                delivered += done
                if done == 0:
                    break
            deliver_s = time.perf_counter() - started
            store.dispatch_pending()
            total_s = time.perf_counter() - started
            assert delivered == count, (delivered, count)
            assert sum(v.pending for v in store.inspect.delay_levels()) == 0
            out["deliver"] = count / deliver_s
            out["deliver_dispatched"] = count / total_s
            out["passes"] = passes
        finally:
            store.close()
    with common.scratch_dir(args, "schedule-plain") as root:
        store = MessageStore.open(common.store_config(root, store_format="4.9"),
                                  start_services=False)
        try:
            messages = _messages(count, delayed=False)
            started = time.perf_counter()
            for message in messages:
                assert store.put_message(message).ok
            out["put_plain"] = count / (time.perf_counter() - started)
        finally:
            store.close()
    return out


def run(args, report: common.Report) -> None:
    count = 2_000 if args.size == "smoke" else 200_000
    rounds = [one_round(args, count) for _ in range(common.reps_for(args))]
    case = f"{count:,} pending, levels 1-{LEVELS}, {BODY_BYTES} B bodies"
    report.add(case, "delivery passes", "msgs/s", [r["deliver"] for r in rounds],
               [r["put_plain"] for r in rounds], reference_name="plain put, same messages")
    report.add(case, "delivery + dispatch of the delivered", "msgs/s",
               [r["deliver_dispatched"] for r in rounds])
    report.add(case, "put of the delayed messages (+ dispatch)", "msgs/s",
               [r["put_delayed"] for r in rounds])
    report.add("18 levels, nothing due", "one idle pass (p50 of 50)", "us",
               [r["idle_pass_us"] for r in rounds], higher_is_better=False)
    report.notes.append(f"passes needed: {rounds[0]['passes']} (a level's pass stops after "
                        f"10,000 units; the running service makes one pass every 100 ms)")


main = common.scenario_main("schedule_bench", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
