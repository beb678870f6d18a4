"""The RocksDB consume queue writes without the WAL (as RocketMQ 5.3.3's batchPut): a process that dies
before a flush loses the memtables, and the next open re-dispatches from the surviving CHECKPOINT.

A child process puts, waits for dispatch, optionally flushes the store thoroughly half-way, and exits
with `os._exit` (no close, `abort` left): a real process crash for RocksDB."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from store import MessageStore
from store.api import Message
from store.consumequeue.base import ConsumeQueueSettings
from store.consumequeue.rocksdb.queue_store import RocksDBConsumeQueueStore
from tests.engine_util import small_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUEUES = [(f"NoWal{t}", q) for t in range(3) for q in range(4)]
COUNT = 600


def _message(number: int) -> Message:
    topic, queue_id = QUEUES[number % len(QUEUES)]
    return Message(topic, f"body-{number}".encode() * (1 + number % 7), queue_id=queue_id,
                   tags=f"tag{number % 5}", keys=f"key{number}")


CHILD = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {repo!r})
    from store import MessageStore
    from tests.engine_util import small_config
    from tests.test_rocksdb_no_wal import COUNT, _message
    store = MessageStore.open(small_config({root!r}, "defaultRocksDB"))
    for number in range(COUNT):
        assert store.put_message(_message(number)).ok
        if number == {flush_at}:
            while store.dispatch_behind_bytes() > 0:
                time.sleep(0.001)
            store.services.flush_thorough()
    while store.dispatch_behind_bytes() > 0:
        time.sleep(0.001)
    os._exit(0)
""")


def _checkpoint_on_disk(root) -> int:
    """The CHECKPOINT a reader of the database finds (read-only snapshot: what reached the SSTs)."""
    queues = RocksDBConsumeQueueStore(ConsumeQueueSettings(
        root_dir=str(root), file_size_bytes=2000, store_type="defaultRocksDB", read_only=True,
        style="5.x"))
    queues.load()
    try:
        return queues.recover()
    finally:
        queues.close()


@pytest.mark.parametrize("flush_at", [-1, COUNT // 2])
def test_a_crash_before_the_flush_loses_units_and_recovery_dispatches_them_again(tmp_path,
                                                                              flush_at):
    root = tmp_path / "store"
    script = CHILD.format(repo=REPO, root=str(root), flush_at=flush_at)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, timeout=120)
    assert (root / "abort").exists()
    checkpoint = _checkpoint_on_disk(root)
    store = MessageStore.open(small_config(root, "defaultRocksDB"))
    try:
        log_end = store.commit_log.max_offset()
        # Without a WAL the units past the last flush are gone from disk (the memtable died with
        # the process); with one they would all be there.
        if flush_at < 0:
            assert checkpoint == -1
        else:
            assert 0 < checkpoint < log_end
        assert store.recovery_report.mode == "abnormal"
        while store.dispatch_behind_bytes() > 0:
            store.dispatch_pending()
        for index, (topic, queue_id) in enumerate(QUEUES):
            expected = [_message(n).body for n in range(index, COUNT, len(QUEUES))]
            assert store.get_max_offset_in_queue(topic, queue_id) == len(expected)
            bodies, offset = [], 0
            for _ in range(len(expected)):      # a pull may stop short of the end (its byte cap)
                result = store.get_message("g", topic, queue_id, offset, 32)
                bodies += [m.body for m in result.messages]
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
            assert bodies == expected
    finally:
        store.close()
    assert _checkpoint_on_disk(root) == log_end    # the clean close flushed every column family
