"""Concurrency soak: producers, pullers, the store's services, a cleaner and a read-only observer
process all at once, for a bounded time.

Running together for `RMQ_SOAK_SECONDS` (15 s in the quick run):

* 3 producer threads: single puts and 3-message batches into 4 queues of one topic; every body
  carries (producer, seq), a payload and a CRC of both, so a torn or half-written record cannot pass
  as good;
* 4 puller threads, each its own consumer group reading every queue (2 of them long-polling);
* the store's own dispatch (reput), flush and (transient pool) commit services;
* a cleaner thread: it ages (fake mtime, `fileReservedTime=1` h) the segments every puller has
  consumed, and runs `clean_expired_files()`, so segments, CQ files and index files are deleted
  while everyone reads;
* a looker thread: time lookups (4.9 nearest, 5.x lower and upper) and key queries, which must
  answer (an offset inside the queue, or 0) and never raise;
* a read-only observer in another process (`MessageStore.open(read_only=True)` + `refresh()`).

Then producers stop, pullers drain, and the test asserts: every acknowledged message is pulled
exactly once by every puller (none lost, none duplicated, none unacknowledged); each queue reads in
order (consecutive queue offsets, each producer's seq increasing); every body is whole; the observer
saw only whole records, in order, with no unexpected exception; the cleaner deleted files; a key
query finds a message from the end; `check()` after close has no error."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
import zlib

import pytest

from store import GetMessageStatus, Message, MessageStore
from store.errors import StoreError
from tests.engine_util import small_config

SOAK_SECONDS = float(os.environ.get("RMQ_SOAK_SECONDS", "15"))
SOAK_SECONDS_SLOW = float(os.environ.get("RMQ_SOAK_SECONDS_SLOW", "20"))
DRAIN_SECONDS_MAX = 15.0
TOPIC = "Soak"
QUEUES = 4
PRODUCERS = 3
PULLERS = 4
LONG_POLLING_PULLERS = 2
MESSAGES_PER_SECOND = 250                # per producer: paced, so pullers on 2 shared cores keep up
MESSAGES_PER_PRODUCER_MAX = 40_000       # a bound, whatever the duration
_HEAD = struct.Struct(">BIH")             # producer, seq, payload length
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def encode_body(producer: int, seq: int) -> bytes:
    length = 40 + (seq * 37 + producer * 11) % 260
    head = _HEAD.pack(producer, seq, length) + bytes([(seq + producer) % 251]) * length
    return head + struct.pack(">I", zlib.crc32(head))


def decode_body(body: bytes) -> tuple[int, int]:
    """(producer, seq) of a whole body; ValueError for a torn or foreign one."""
    if len(body) < _HEAD.size + 4:
        raise ValueError(f"body of {len(body)} bytes is too short")
    producer, seq, length = _HEAD.unpack_from(body)
    if len(body) != _HEAD.size + length + 4 or \
            struct.unpack_from(">I", body, len(body) - 4)[0] != zlib.crc32(body[:-4]):
        raise ValueError(f"body of producer {producer} seq {seq} is not whole")
    return producer, seq


class QueueReader:
    """Per-queue reading state and the order checks shared by the pullers and the observer."""

    def __init__(self):
        self.next_offset = [0] * QUEUES
        self.last_seq = [[-1] * PRODUCERS for _ in range(QUEUES)]
        self.last_phy = [-1] * QUEUES
        self.seen: list[tuple[int, int]] = []
        self.violations: list[str] = []
        self.pulls = 0
        self.skipped = 0

    def accept(self, queue_id: int, result, *, gaps_allowed: bool = False) -> None:
        self.pulls += 1
        if result.status is GetMessageStatus.FOUND:
            for message in result.messages:
                self._accept_one(queue_id, message)
            self.next_offset[queue_id] = result.next_begin_offset
        elif gaps_allowed and result.status in (GetMessageStatus.OFFSET_TOO_SMALL,
                                                GetMessageStatus.MESSAGE_WAS_REMOVING):
            # The cleaner was faster than this reader: skip ahead, as a RocketMQ consumer would.
            self.skipped += 1
            self.next_offset[queue_id] = max(self.next_offset[queue_id], result.next_begin_offset)
        elif result.status not in (GetMessageStatus.OFFSET_OVERFLOW_ONE,
                                   GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                                   GetMessageStatus.NO_MATCHED_LOGIC_QUEUE):
            self.violations.append(f"queue {queue_id} offset {self.next_offset[queue_id]}: "
                                   f"unexpected {result.status.name}")

    def _accept_one(self, queue_id: int, message) -> None:
        expected = self.next_offset[queue_id]
        if message.queue_offset != expected and len(self.violations) < 20:
            self.violations.append(f"queue {queue_id}: got queue offset {message.queue_offset}, "
                                   f"expected {expected}")
        self.next_offset[queue_id] = message.queue_offset + 1
        try:
            producer, seq = decode_body(message.body)
        except ValueError as error:
            self.violations.append(f"queue {queue_id} offset {message.queue_offset}: {error}")
            return
        if message.queue_id != queue_id or message.topic != TOPIC:
            self.violations.append(f"message of {message.topic}/{message.queue_id} in queue "
                                   f"{queue_id}")
        if seq <= self.last_seq[queue_id][producer] and len(self.violations) < 20:
            self.violations.append(f"queue {queue_id}: producer {producer} seq {seq} after "
                                   f"{self.last_seq[queue_id][producer]}")
        self.last_seq[queue_id][producer] = seq
        self.last_phy[queue_id] = message.commit_log_offset
        self.seen.append((producer, seq))

    def consumed_below_phy(self) -> int:
        """Every message of this reader's queues stored before this offset has been consumed."""
        return min(self.last_phy) + 1 if min(self.last_phy) >= 0 else 0


def _produce(store, producer: int, stop: threading.Event, acked: set, errors: list) -> None:
    seq = 0
    started = time.monotonic()
    while not stop.is_set() and seq < MESSAGES_PER_PRODUCER_MAX:
        ahead_s = seq / MESSAGES_PER_SECOND - (time.monotonic() - started)
        if ahead_s > 0:
            stop.wait(ahead_s)
        queue_id = seq % QUEUES
        if seq % 5 == 4:
            batch = [Message(TOPIC, encode_body(producer, seq + i), queue_id=queue_id,
                             keys=[f"p{producer}-{seq + i}"]) for i in range(3)]
            result = store.put_messages(batch)
            done = [seq + i for i in range(3)]
        else:
            result = store.put_message(Message(TOPIC, encode_body(producer, seq), queue_id=queue_id,
                                               keys=[f"p{producer}-{seq}"], tags=f"t{seq % 3}"))
            done = [seq]
        if result.ok:
            acked.update((producer, s) for s in done)
        else:
            errors.append(f"producer {producer} seq {seq}: {result.status.name} {result.error}")
            return
        seq += len(done)


def _pull(store, reader: QueueReader, long_poll_ms: int, producers_done: threading.Event,
          deadline_box: list, group: str) -> None:
    while time.monotonic() < deadline_box[0]:
        caught_up = True
        for queue_id in range(QUEUES):
            try:
                result = store.get_message(group, TOPIC, queue_id, reader.next_offset[queue_id], 32,
                                           long_poll_ms=long_poll_ms)
            except StoreError as error:
                reader.violations.append(f"pull raised {error!r}")
                return
            reader.accept(queue_id, result)
            if result.status is GetMessageStatus.FOUND:
                caught_up = False
        if producers_done.is_set() and caught_up and all(
                reader.next_offset[q] >= store.get_max_offset_in_queue(TOPIC, q)
                for q in range(QUEUES)):
            return
        if caught_up and not long_poll_ms:
            time.sleep(0.002)


def _clean(store, readers: list[QueueReader], stop: threading.Event, counts: dict,
           errors: list) -> None:
    old = time.time() - 2 * 3600                      # older than fileReservedTime=1 h
    while not stop.wait(0.2):
        safe_phy = min(reader.consumed_below_phy() for reader in readers)
        for mapped in list(store.commit_log.mapped_files.files)[:-1]:
            if mapped.file_end_offset > safe_phy:
                break
            try:
                os.utime(mapped.path, (old, old))
            except FileNotFoundError:
                pass
        try:
            result = store.clean_expired_files()
        except StoreError as error:
            errors.append(f"cleaner: {error!r}")
            return
        counts["commitlog"] += result.commit_log_files_deleted
        counts["consumequeue"] += result.consume_queue_files_deleted
        counts["index"] += result.index_files_deleted


def _look(store, stop: threading.Event, counts: dict, errors: list) -> None:
    """Time lookups and key queries while segments are written and deleted. A segment the cleaner
    unmapped between a lookup's check and its read raised ValueError before 256d6c1."""
    step = 0
    while not stop.is_set():
        queue_id = step % QUEUES
        boundary = ("nearest", "lower", "upper")[step % 3]
        step += 1
        try:
            now = int(time.time() * 1000)
            offset = store.get_offset_in_queue_by_time(TOPIC, queue_id, now - step % 2000, boundary)
            if not 0 <= offset <= store.get_max_offset_in_queue(TOPIC, queue_id):
                errors.append(f"looker: {boundary} lookup answered {offset}")
                return
            store.query_message(TOPIC, f"p{step % PRODUCERS}-{step}")
        except StoreError:
            continue                   # a file deleted under us: allowed, as for the pullers
        except Exception as error:  # noqa: BLE001 - the rule under test: nothing else escapes
            errors.append(f"looker: {error!r}")
            return
        counts["lookups"] += 1


def _wait_dispatched(store, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pointers = store.pointers()
        if pointers["committed"] == pointers["wrote"] and store.dispatch_behind_bytes() == 0:
            return
        time.sleep(0.005)
    raise AssertionError(f"not dispatched in time: {store.pointers()}")


def _start_observer(config_root: str, stop_path: str, seconds: float,
                    store_type: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "tests.test_concurrency", "observe", config_root,
                             stop_path, str(seconds), store_type], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def observe(root: str, stop_path: str, seconds: float, store_type: str) -> dict:
    """The observer process: follow the live store read-only until told to stop (or time is up)."""
    deadline = time.monotonic() + seconds
    for _ in range(200):                       # the writer creates the store; wait for it
        if os.path.isdir(os.path.join(root, "commitlog")):
            break
        time.sleep(0.05)
    reader = QueueReader()
    unexpected: list[str] = []
    refreshes = store_errors = 0
    store = MessageStore.open(small_config(root, store_type), read_only=True)
    try:
        while time.monotonic() < deadline:
            stopping = os.path.exists(stop_path)
            try:
                store.refresh()
                refreshes += 1
                for queue_id in range(QUEUES):
                    result = store.get_message("observer", TOPIC, queue_id,
                                               reader.next_offset[queue_id], 32)
                    reader.accept(queue_id, result, gaps_allowed=True)
            except StoreError:
                store_errors += 1             # a file deleted under us: allowed, retried
            except Exception as error:  # noqa: BLE001 - the rule under test: nothing else escapes
                unexpected.append(repr(error))
                if len(unexpected) > 5:
                    break
            if stopping:
                break
            time.sleep(0.01)
    finally:
        store.close()
    return {"seen": len(reader.seen), "distinct": len(set(reader.seen)), "pulls": reader.pulls,
            "refreshes": refreshes, "store_errors": store_errors, "skips": reader.skipped,
            "violations": reader.violations[:20], "unexpected": unexpected}


def run_soak(tmp_path, *, store_type: str, flush_disk_type: str, transient_pool: bool,
             soak_seconds: float) -> dict:
    root = str(tmp_path / "soak")
    config = small_config(root, store_type, flush_disk_type=flush_disk_type,
                          transient_store_pool_enable=transient_pool, file_reserved_time=1,
                          flush_interval_commit_log=50, commit_interval_commit_log=20,
                          flush_interval_consume_queue=100, **(
                              # RocksDB consume queues are written without the WAL (as 5.3.3):
                              # another process sees a unit once a full flush put it in an SST
                              {"flush_consume_queue_thorough_interval": 500}
                              if store_type == "defaultRocksDB" else {}))
    store = MessageStore.open(config)
    stop_path = str(tmp_path / "observer.stop")
    observer = _start_observer(root, stop_path, soak_seconds + DRAIN_SECONDS_MAX + 10, store_type)
    stop, producers_done, cleaner_stop = threading.Event(), threading.Event(), threading.Event()
    acked: list[set] = [set() for _ in range(PRODUCERS)]
    errors: list[str] = []
    readers = [QueueReader() for _ in range(PULLERS)]
    deadline_box = [time.monotonic() + soak_seconds + DRAIN_SECONDS_MAX]
    cleaned = {"commitlog": 0, "consumequeue": 0, "index": 0}
    producers = [threading.Thread(target=_produce, args=(store, p, stop, acked[p], errors))
                 for p in range(PRODUCERS)]
    pullers = [threading.Thread(target=_pull, args=(
        store, readers[i], 200 if i < LONG_POLLING_PULLERS else 0, producers_done, deadline_box,
        f"group{i}")) for i in range(PULLERS)]
    cleaner = threading.Thread(target=_clean, args=(store, readers, cleaner_stop, cleaned, errors))
    looked = {"lookups": 0}
    looker = threading.Thread(target=_look, args=(store, cleaner_stop, looked, errors))
    started = time.monotonic()
    for thread in producers + pullers + [cleaner, looker]:
        thread.start()
    try:
        stop.wait(soak_seconds)
        stop.set()
        for thread in producers:
            thread.join()
        _wait_dispatched(store)       # acked is not yet pullable: the pool commits, then reput
        producers_done.set()
        for thread in pullers:
            thread.join(timeout=DRAIN_SECONDS_MAX + 5)
        cleaner_stop.set()
        cleaner.join()
        looker.join()
        last = max(acked[0]) if acked[0] else None
        query_hits = len(store.query_message(TOPIC, f"p0-{last[1]}").messages) if last else 0
    finally:
        stop.set()
        cleaner_stop.set()
        deadline_box[0] = 0
        open(stop_path, "w").close()
        store.close()
    try:
        out, err = observer.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        observer.kill()
        out, err = observer.communicate()
    findings = MessageStore.open(config, read_only=True)
    try:
        serious = [str(f) for f in findings.check() if f.severity == "error"]
    finally:
        findings.close()
    return {"acked": acked, "readers": readers, "errors": errors, "cleaned": cleaned,
            "observer": json.loads(out.strip().splitlines()[-1]) if out.strip() else {"err": err},
            "observer_rc": observer.returncode, "query_hits": query_hits,
            "check_errors": serious, "seconds": time.monotonic() - started, "looked": looked,
            "alive": [t.name for t in pullers if t.is_alive()]}


def assert_soak(outcome: dict) -> None:
    acked = set().union(*outcome["acked"])
    assert not outcome["errors"], outcome["errors"][:10]
    assert not outcome["alive"], f"pullers did not drain: {outcome['alive']}"
    assert len(acked) > 1000, f"only {len(acked)} messages acknowledged"
    for index, reader in enumerate(outcome["readers"]):
        assert not reader.violations, (index, reader.violations[:10])
        seen = set(reader.seen)
        assert len(seen) == len(reader.seen), f"puller {index} saw duplicates"
        assert seen == acked, (f"puller {index}: {len(acked - seen)} acknowledged messages lost, "
                               f"{len(seen - acked)} unacknowledged seen")
    observer = outcome["observer"]
    assert outcome["observer_rc"] == 0, observer
    assert not observer["unexpected"] and not observer["violations"], observer
    assert observer["seen"] == observer["distinct"] and observer["seen"] > 0, observer
    assert outcome["cleaned"]["commitlog"] > 0, outcome["cleaned"]
    assert outcome["query_hits"] == 1
    assert outcome["looked"]["lookups"] > 100, outcome["looked"]
    assert not outcome["check_errors"], outcome["check_errors"][:10]


def test_soak_quick(tmp_path):
    outcome = run_soak(tmp_path, store_type="default", flush_disk_type="ASYNC_FLUSH",
                       transient_pool=True, soak_seconds=SOAK_SECONDS)
    assert_soak(outcome)
    print(f"soak: {sum(len(a) for a in outcome['acked'])} messages, "
          f"{sum(r.pulls for r in outcome['readers'])} pulls, cleaned {outcome['cleaned']}, "
          f"observer {outcome['observer']}, {outcome['seconds']:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("store_type", ["default", "defaultRocksDB"])
@pytest.mark.parametrize("flush_disk_type,transient_pool", [
    ("ASYNC_FLUSH", False), ("ASYNC_FLUSH", True), ("SYNC_FLUSH", False)])
def test_soak_long(tmp_path, store_type, flush_disk_type, transient_pool):
    outcome = run_soak(tmp_path, store_type=store_type, flush_disk_type=flush_disk_type,
                       transient_pool=transient_pool, soak_seconds=SOAK_SECONDS_SLOW)
    assert_soak(outcome)


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "observe":
    print(json.dumps(observe(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])))
