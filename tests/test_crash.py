"""Process crash: a producer process is SIGKILLed at random moments; recovery must keep the promises.

Matrix: ASYNC_FLUSH without and with the transient store pool, SYNC_FLUSH; file and RocksDB consume
queues; single and batch puts. One store per matrix cell lives through many kill/recover cycles, so
recovery also runs on top of earlier recoveries, and some kills land while the child itself is still
recovering the previous crash.

What is asserted after every kill (reopen = abnormal recovery, in this process):

* Exact bytes: every message read back has the body, keys and queue its (run, seq) prescribe; none is
  duplicated; every queue reads contiguously from offset 0 and each record's QUEUEOFFSET is its
  position in the queue (no record is half visible: it is readable whole or not at all).
* No hole: per producer run, the recovered messages are exactly seq 0..n-1 (a prefix of what it put).
* Acknowledged = durable against a process crash: without the transient pool (ASYNC or SYNC) every
  acknowledged message is recovered (a SIGKILL loses no page-cache data). With the pool (ASYNC only),
  RocketMQ's trade-off applies: acknowledged messages still in the write buffer (not yet committed to
  the mapped file) may be lost, but only as the newest tail of the log: the prefix rule above.
* Earlier runs are never touched by later recoveries: their recovered counts never change.
* Consume queues and index agree with the commit log (every pulled unit leads to its exact record;
  `store.check()`, run after every third kill and the last one for time, has no error or warning; a key
  lookup of the last recovered message of each run returns exactly that message). The index is
  complete only with messageIndexSafe=true on file consume queues (spec §11: with the default, or
  RocksDB's offset-based start, index files may miss entries after a crash; asserted only there).
* The store accepts a new put after recovery.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib

import pytest

from store import GetMessageStatus, Message, MessageStore
from tests import crash_producer as producer
from tests.engine_util import small_config

PRODUCER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_producer.py")
FLUSH_MODES = [("ASYNC_FLUSH", False), ("ASYNC_FLUSH", True), ("SYNC_FLUSH", False)]
STORE_TYPES = ("default", "defaultRocksDB")
BATCHES = (1, 4)
KILLS_PER_CELL_SLOW = int(os.environ.get("RMQ_CRASH_KILLS_PER_CELL", "17"))  # 12 cells x 17 = 204
KILLS_PER_CELL_FAST = 2


class Zygote:
    """The fork server of crash_producer.py: one process per test, one fork per kill."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, PRODUCER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)

    def spawn(self, command: dict) -> int:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline().split()
        assert line[0] == "pid", line
        return int(line[1])

    def reap(self, pid: int) -> int:
        self.process.stdin.write(f"reap {pid}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline().split()
        assert line[:2] == ["reaped", str(pid)], line
        return int(line[2])

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def read_acks(path: str) -> tuple[bool, dict[int, set[int]]]:
    opened, acked = False, {}
    if not os.path.exists(path):
        return opened, acked
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                continue  # torn final line cannot happen with one write(), but be strict
            parts = line.split()
            if parts[0] == "open":
                opened = True
            elif parts[0] == "a":
                acked.setdefault(int(parts[1]), set()).update(int(s) for s in parts[2:])
            else:
                raise AssertionError(f"producer reported: {line.strip()}")
    return opened, acked


def read_all_queues(store) -> dict[int, list[int]]:
    """run -> recovered seqs, checking order, contiguity and exact bytes of every message."""
    recovered: dict[int, list[int]] = {}
    seen = set()
    for queue_id in range(producer.QUEUES):
        max_offset = store.get_max_offset_in_queue(producer.TOPIC, queue_id)
        assert store.get_min_offset_in_queue(producer.TOPIC, queue_id) == 0
        offset = 0
        for _ in range(max_offset + 1):
            if offset >= max_offset:
                break
            got = store.get_message("verify", producer.TOPIC, queue_id, offset, 64)
            assert got.status is GetMessageStatus.FOUND, (queue_id, offset, got.status)
            for message in got.messages:
                assert message.queue_offset == offset, (queue_id, offset, message.queue_offset)
                run, seq = producer.parse_body(message.body)
                assert message.body == producer.message_body(run, seq)
                assert message.keys == producer.message_key(run, seq)
                assert message.queue_id == queue_id
                assert (run, seq) not in seen, f"duplicate message run {run} seq {seq}"
                seen.add((run, seq))
                recovered.setdefault(run, []).append(seq)
                offset += 1
            assert got.next_begin_offset == offset
        assert offset == max_offset
    return recovered


def verify_after_kill(config, runs_done: dict[int, int], run: int, batch: int, ack_path: str,
                      lossless: bool, index_complete: bool, full_check: bool) -> dict:
    opened, acked = read_acks(ack_path)
    with MessageStore.open(config) as store:
        mode = store.recovery_report.mode
        recovered = read_all_queues(store)
        for old_run, count in runs_done.items():
            assert len(recovered.get(old_run, [])) == count, \
                f"run {old_run}: {count} messages before, {len(recovered.get(old_run, []))} now"
        seqs = sorted(recovered.get(run, []))
        assert seqs == list(range(len(seqs))), f"run {run}: hole in {seqs[:5]}..{seqs[-5:]}"
        assert len(seqs) % batch == 0, f"run {run}: a batch is partly visible ({len(seqs)})"
        acked_seqs = acked.get(run, set())
        if lossless:
            missing = acked_seqs - set(seqs)
            assert not missing, f"run {run}: acknowledged but lost: {sorted(missing)[:10]}"
        for some_run, some_seqs in recovered.items():
            last = max(some_seqs)
            hits = store.query_message(producer.TOPIC, producer.message_key(some_run, last))
            if index_complete:
                assert hits.messages, f"index lost the key of run {some_run} seq {last} ({hits})"
            assert all(m.body == producer.message_body(some_run, last) for m in hits.messages)
        if full_check:
            findings = [f for f in store.check() if f.severity in ("error", "warning")]
            assert not findings, [str(f) for f in findings[:5]]
        after = store.put_message(Message("CrashAfter", b"after-%d" % run))
        assert after.ok
    return {"mode": mode, "recovered": len(seqs), "acked": len(acked_seqs), "opened": opened}


def run_cell(tmp_path, flush_disk_type, pool, store_type, batch, kills, seed):
    rng = random.Random(seed)
    root = tmp_path / "store"
    overrides = dict(flush_disk_type=flush_disk_type, transient_store_pool_enable=pool,
                     store_type=store_type, commit_interval_commit_log=rng.choice((10, 50, 200)),
                     flush_interval_commit_log=rng.choice((20, 200, 500)),
                     message_index_safe=store_type == "default" and batch == 1)
    # Spec §11: only messageIndexSafe (file consume queues) makes recovery re-dispatch far enough
    # back to rebuild every index entry; otherwise index files may miss entries after a crash.
    index_complete = overrides["message_index_safe"]
    config = small_config(root, **overrides)
    lossless = not (pool and flush_disk_type == "ASYNC_FLUSH")
    zygote = Zygote()
    runs_done: dict[int, int] = {}
    stats = {"kills": 0, "abnormal": 0, "killed_before_open": 0, "acked": 0, "recovered": 0}
    try:
        for run in range(kills):
            ack_path = str(tmp_path / f"ack-{run}")
            pid = zygote.spawn({"root": str(root), "overrides": overrides, "run": run,
                                "batch": batch, "ack": ack_path})
            if rng.random() < 0.15:
                time.sleep(rng.uniform(0.0, 0.4))   # may land inside open/recovery
            else:
                deadline = time.monotonic() + 20
                while not read_acks(ack_path)[0] and time.monotonic() < deadline:
                    time.sleep(0.005)
                time.sleep(rng.uniform(0.005, 0.25))
            os.kill(pid, signal.SIGKILL)
            status = zygote.reap(pid)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            stats["kills"] += 1
            result = verify_after_kill(config, runs_done, run, batch, ack_path, lossless,
                                       index_complete, full_check=run % 3 == 2 or run == kills - 1)
            runs_done[run] = result["recovered"]
            stats["abnormal"] += result["mode"] == "abnormal"
            stats["killed_before_open"] += not result["opened"]
            stats["acked"] += result["acked"]
            stats["recovered"] += result["recovered"]
    finally:
        zygote.close()
    assert stats["recovered"] > 0
    print(f"crash cell {flush_disk_type} pool={pool} {store_type} batch={batch}: {stats}")
    return stats


CELLS = [(flush, pool, store_type, batch) for flush, pool in FLUSH_MODES
         for store_type in STORE_TYPES for batch in BATCHES]


def _cell_id(cell):
    flush, pool, store_type, batch = cell
    return f"{flush}-{'pool' if pool else 'nopool'}-{store_type}-batch{batch}"


@pytest.mark.parametrize("cell", CELLS, ids=_cell_id)
def test_kill_and_recover_quick(tmp_path, cell):
    run_cell(tmp_path, *cell, kills=KILLS_PER_CELL_FAST, seed=zlib.crc32(_cell_id(cell).encode()))


@pytest.mark.slow
@pytest.mark.parametrize("cell", CELLS, ids=_cell_id)
def test_kill_and_recover_many(tmp_path, cell):
    """17 kills per cell, 204 in all (RMQ_CRASH_KILLS_PER_CELL changes it)."""
    seed = int(os.environ.get("RMQ_CRASH_SEED", "7")) * 1000 + CELLS.index(cell)
    stats = run_cell(tmp_path, *cell, kills=KILLS_PER_CELL_SLOW, seed=seed)
    assert stats["kills"] == KILLS_PER_CELL_SLOW


class _KilledMidCopy(Exception):
    """The simulated SIGKILL of `_TearingMap`."""


class _TearingMap:
    """A segment's map in a process killed after copying `budget_bytes` more bytes into it: each
    slice assignment copies while the budget lasts (a copy the kill lands in leaves a prefix of
    it), then the process "dies". Reads and the rest go to the real map."""

    def __init__(self, real, budget_bytes: int):
        self.real = real
        self.budget_bytes = budget_bytes

    def __setitem__(self, key, data):
        assert isinstance(key, slice) and key.step is None
        size = min(len(data), self.budget_bytes)
        self.real[key.start:key.start + size] = data[:size]
        self.budget_bytes -= size
        if size < len(data) or self.budget_bytes == 0:
            raise _KilledMidCopy

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("earlier_batches", [0, 1])
@pytest.mark.parametrize("kill_after", [1, 8, 9, 100, 0.5, -9, -8, -1, None])
def test_commit_killed_mid_copy_shows_a_batch_whole_or_not_at_all(tmp_path, earlier_batches,
                                                                   kill_after):
    """Transient store pool: a commit copies the write buffer's new records into the segment's map.
    A kill in the middle of that copy must not leave part of a batch readable after recovery
    (records are whole and their CRCs good, so only the copy's order can keep them out)."""
    config = small_config(tmp_path / "s", transient_store_pool_enable=True)
    topic = "TornCommit"
    batch = [Message(topic, b"m%d-" % i + bytes(range(i, i + 200)), queue_id=1) for i in range(4)]
    store = MessageStore.open(config, start_services=False)    # commits only when told below
    try:
        for _ in range(earlier_batches):
            assert store.put_messages(batch).ok
        commit_log = store.commit_log
        commit_log.mapped_files.commit(0)
        assert store.put_messages(batch).ok
        mapped = commit_log.mapped_files.last_file()
        new_bytes = mapped.wrote_position - mapped.committed_position
        budget = new_bytes if kill_after is None else int(new_bytes * kill_after) \
            if isinstance(kill_after, float) else kill_after % new_bytes
        real_map, mapped._map = mapped._map, _TearingMap(mapped._map, budget)
        try:
            with pytest.raises(_KilledMidCopy):
                mapped.commit(0)
        finally:
            mapped._map = real_map
    finally:
        store.crash()
    with MessageStore.open(config) as reopened:
        visible = reopened.get_max_offset_in_queue(topic, 1)
        expected = 4 * (earlier_batches + (kill_after is None))
        assert visible == expected, f"{visible} of the batch's records visible, expected {expected}"
        got = reopened.get_message("g", topic, 1, 0, 32)
        assert [m.body for m in got.messages] == [m.body for m in batch] * (expected // 4)
