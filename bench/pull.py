"""Scenario 3, Pull: sequential `get_message(max_msg_nums=32)` through every queue of a store, with and
without a tag filter (half the messages carry TagA, half TagB), in the three result forms: decoded
MessageRecords (`decode=True`), raw record bytes (`decode=False`) and zero-copy memoryviews over the
mapped commit log (`decode="view"`, what RocketMQ's pull hands to its network layer: ByteBuffer
slices of the mapped file, no decoding; the like-for-like case for the goal).

Reference: `head -c USED` (`cat` of the written part) of the same commit-log files to /dev/null (warm
page cache), expressed as messages/s (bytes/s divided by the mean record size): the cost of just
reading the bytes once.

    python -m bench.pull [--size smoke|full] [--reps N]
"""

from __future__ import annotations

import glob
import os
import statistics
import time

from bench import common

QUEUES = 8
BODY_BYTES = 1024
GOAL = 1_200_000
FORMS = (("zero-copy (decode='view')", "view"), ("raw (decode=False)", False), ("decoded", True))
FILTERS = (("all", None), ("TagA filter", "TagA"))


def build_store(root: str, count: int, body_bytes: int = BODY_BYTES, queues: int = QUEUES):
    """A store of `count` messages in `queues` queues, put in batches of 32; returns it open."""
    from store.message_store import MessageStore
    store = MessageStore.open(common.store_config(root))
    batch = 32
    for first in range(0, count, batch * queues):
        for queue_id in range(queues):
            start = first + queue_id * batch
            n = min(batch, count - start)
            if n <= 0:
                break
            msgs = common.make_messages(n, body_bytes, queue_of=lambda _n, q=queue_id: q,
                                        start=start, tags=("TagA", "TagB"))
            result = store.put_messages(msgs)
            assert result.ok, result.error
    common.wait_dispatched(store)
    return store


def pull_all(store, topic: str = "BenchTopic", tag_expression: str | None = None,
             decode: bool | str = True) -> tuple[int, float]:
    """Pull every queue from 0 to its end; returns (messages, seconds)."""
    messages = 0
    started = time.perf_counter()
    for queue_id in range(QUEUES):
        offset = 0
        for _ in range(10_000_000):   # bounded: at least one unit per call
            result = store.get_message("bench", topic, queue_id, offset, 32,
                                       tag_expression=tag_expression, decode=decode)
            messages += len(result.messages)
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
    return messages, time.perf_counter() - started


def run(args, report: common.Report) -> None:
    count = 2048 if args.size == "smoke" else 64_000
    reps = common.reps_for(args, full=5)   # medians of 5: this shared machine swings a lot
    with common.scratch_dir(args, "pull") as root:
        store = build_store(root, count)
        try:
            used_bytes = store.commit_log.max_offset()
            segment_bytes = store.config.mapped_file_size_commit_log
            mean_record = used_bytes / count
            expected = {None: count, "TagA": count // 2}

            def case(tag, decode):
                def fn():
                    n, seconds = pull_all(store, tag_expression=tag, decode=decode)
                    assert n == expected[tag], (n, expected[tag])
                    return n / seconds
                return fn

            def cat_reference():
                # only the written bytes: a segment is preallocated, its tail is zeros
                seconds = 0.0
                for path in sorted(glob.glob(os.path.join(root, "commitlog", "*"))):
                    used = min(segment_bytes, used_bytes - int(os.path.basename(path)))
                    if used > 0:
                        seconds += common.shell_seconds(["head", "-c", str(used), path])
                return count / seconds

            cases = {f"{label}, {form}": case(tag, decode)
                     for form, decode in FORMS for label, tag in FILTERS}
            results = common.interleaved(reps, {**cases, "reference": cat_reference})
        finally:
            store.close()
    for name in cases:
        row = report.add(name, "pull rate (matching msgs)", "msg/s", results[name],
                         results["reference"], reference_name="cat commitlog")
        median = statistics.median(results[name])
        report.goal(row, f">= {GOAL:,}", median >= GOAL)
    report.notes.append(f"{count} messages of {BODY_BYTES} B in {QUEUES} queues (mean record "
                        f"{mean_record:.0f} B); warm page cache; a filtered pull scans both tags and "
                        "returns TagA only, its rate counts returned messages.")
    report.notes.append("zero-copy: memoryviews over the mapped commit log (RocketMQ's pull returns "
                        "ByteBuffer slices of the mapped file, not decoded messages: the like-for-like "
                        "case for the goal); raw: a bytes copy per record; decoded: MessageRecords.")


main = common.scenario_main("pull", __doc__.splitlines()[0], run)

if __name__ == "__main__":
    main()
