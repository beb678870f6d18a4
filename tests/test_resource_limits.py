"""Resource limits: a full disk (simulated), oversized input, and memory while reading big stores.

* Disk: the cleanup service's measurement is injected (`disk_ratio_of`), as RocketMQ's thresholds
  are percentages of a real partition. Below `diskMaxUsedSpaceRatio` (75) nothing expires outside
  the `deleteWhen` hour; above it, expired segments go; above `diskSpaceCleanForciblyRatio` (85) the
  oldest segments go whatever their age; above `diskSpaceWarningLevelRatio` (90) puts are refused
  with SERVICE_NOT_AVAILABLE and write nothing, until usage falls again. Never the last segment,
  never what dispatch has not reached, at most 10 per run.
* Input: an oversized body or batch, a record that cannot fit a segment, a too-long topic or
  properties text, a queue id past the limit: refused with RocketMQ's status, nothing written
  (commit log, consume queues, topics.json), and the store keeps accepting good puts.
* Memory: anonymous RSS growth (RssAnon in /proc/self/status, sampled every 5 ms) stays under 64 MiB
  while pulling every queue (decoded and raw), looking up every record, and querying keys on a store
  of `RMQ_MEMORY_STORE_MB` (24 MB quick, 160 MB slow). File-backed pages of the mapped segments
  (VmRSS minus RssAnon) are page cache the kernel can drop, as for RocketMQ, and are reported, not
  bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime

import pytest

from store import GetMessageStatus, Message, MessageStore, PutMessageStatus
from tests.engine_util import STORE_TYPES, small_config
from tests.fixtures_util import REPO_ROOT
from tests.test_message_store import wait_dispatched

RSS_ANON_GROWTH_MAX_BYTES = 64 << 20
MEMORY_STORE_MB_QUICK = int(os.environ.get("RMQ_MEMORY_STORE_MB", "24"))
MEMORY_STORE_MB_SLOW = int(os.environ.get("RMQ_MEMORY_STORE_MB_SLOW", "160"))


def _not_now_hour() -> str:
    return str((datetime.now().hour + 12) % 24)       # deleteWhen never matches during the test


@pytest.fixture(params=STORE_TYPES)
def filled(request, tmp_path):
    config = small_config(tmp_path / "s", request.param, file_reserved_time=1,
                          delete_when=_not_now_hour())
    store = MessageStore.open(config)
    for i in range(300):
        assert store.put_message(Message("T", b"v" * 900, queue_id=i % 2, keys=[f"k{i}"])).ok
    wait_dispatched(store)
    yield store
    store.close()


def _age(store, count: int) -> None:
    old = time.time() - 2 * 3600
    for mapped in store.commit_log.mapped_files.files[:count]:
        os.utime(mapped.path, (old, old))


def _segment_count(store) -> int:
    return len(store.commit_log.mapped_files.files)


# -- disk usage ------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio,deleted_aged,deleted_fresh,refused", [
    (0.50, False, False, False),     # below diskMaxUsedSpaceRatio, not the deleteWhen hour
    (0.80, True, False, False),      # above 75 %: expired segments go
    (0.87, True, True, False),       # above 85 %: clean immediately, whatever the age
    (0.95, True, True, True),        # above 90 %: and puts are refused
])
def test_disk_ratio_thresholds(filled, ratio, deleted_aged, deleted_fresh, refused):
    store = filled
    service = store.services.cleanup
    segments = _segment_count(store)
    assert segments >= 5
    _age(store, 2)
    service.disk_ratio_of = lambda _path: ratio
    result = service.run_once()
    deleted = result.commit_log_files_deleted
    expected = 0 if not deleted_aged else (2 if not deleted_fresh else min(10, segments - 1))
    assert deleted == expected, result
    assert _segment_count(store) == segments - deleted >= 1
    assert store.disk_full is refused
    before = store.commit_log.max_wrote_offset()
    put = store.put_message(Message("T", b"x"))
    if refused:
        assert put.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and put.error
        assert not store.put_messages([Message("T", b"a"), Message("T", b"b")]).ok
        assert store.commit_log.max_wrote_offset() == before
    else:
        assert put.ok
    # Pulls start at the new minimum: nothing half-deleted is visible.
    wait_dispatched(store)
    for queue_id in (0, 1):
        low = store.get_min_offset_in_queue("T", queue_id)
        got = store.get_message("g", "T", queue_id, low, 8)
        assert got.status is GetMessageStatus.FOUND
        assert got.messages[0].commit_log_offset >= store.commit_log.min_offset()
        if low:
            assert store.get_message("g", "T", queue_id, 0).status is \
                GetMessageStatus.OFFSET_TOO_SMALL
    # Usage falls: puts are accepted again.
    service.disk_ratio_of = lambda _path: 0.10
    service.run_once()
    assert not store.disk_full and store.put_message(Message("T", b"y")).ok


def test_forced_clean_keeps_last_and_undispatched(tmp_path):
    config = small_config(tmp_path / "s", file_reserved_time=1, delete_when=_not_now_hour())
    with MessageStore.open(config, start_services=False) as store:
        for i in range(300):
            assert store.put_message(Message("T", b"v" * 900)).ok
        store.dispatch_pending()
        for i in range(150):                               # written, not dispatched yet
            assert store.put_message(Message("T", b"w" * 900)).ok
        reput = store.services.reput.reput_offset
        store.services.cleanup.disk_ratio_of = lambda _path: 0.99
        store.services.cleanup.run_once()
        assert store.disk_full
        files = store.commit_log.mapped_files.files
        assert files and files[0].file_end_offset > reput - config.mapped_file_size_commit_log
        assert all(f.file_end_offset > store.commit_log.min_offset() for f in files)
        assert store.commit_log.min_offset() <= reput


def test_unmeasurable_disk_cleans_but_does_not_refuse(filled):
    store = filled
    store.services.cleanup.disk_ratio_of = lambda _path: -1.0
    result = store.services.cleanup.run_once()
    assert result.clean_immediately and not store.disk_full
    assert store.put_message(Message("T", b"x")).ok


# -- input limits ----------------------------------------------------------------------------------


def _state(store) -> tuple:
    root = store.config.store_path_root_dir
    cq_dir = os.path.join(root, "consumequeue")
    return (store.commit_log.max_wrote_offset(), sorted(store.queues()),
            sorted(os.listdir(cq_dir)) if os.path.isdir(cq_dir) else [],
            store.topics.get("T2") is not None)


REFUSALS = {
    "body over maxMessageSize": (lambda: Message("T2", b"x" * 4097), "MESSAGE_ILLEGAL"),
    "batch over maxMessageSize": (lambda: [Message("T2", b"x" * 1500) for _ in range(3)],
                                  "MESSAGE_ILLEGAL"),
    "topic of 128 characters": (lambda: Message("T" * 128, b"x"), "MESSAGE_ILLEGAL"),
    "topic of 10000 characters": (lambda: Message("T" * 10000, b"x"), "MESSAGE_ILLEGAL"),
    "properties text over 32767": (lambda: Message("T2", b"x", properties={"p": "v" * 40000}),
                                   ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED")),
    "many properties over 32767": (lambda: Message("T2", b"x", properties={
        f"k{i}": "v" * 30 for i in range(1200)}), ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED")),
    "keys over 32767": (lambda: Message("T2", b"x", keys=["k" * 1000] * 40),
                        ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED")),
    "queue id past the limit": (lambda: Message("T2", b"x", queue_id=65536), "MESSAGE_ILLEGAL"),
    "queue id huge": (lambda: Message("T2", b"x", queue_id=2**40), "MESSAGE_ILLEGAL"),
    "negative queue id": (lambda: Message("T2", b"x", queue_id=-1), "MESSAGE_ILLEGAL"),
}


@pytest.mark.parametrize("store_type", STORE_TYPES)
@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refused_input_writes_nothing(tmp_path, store_type, case):
    config = small_config(tmp_path / "s", store_type, max_message_size=4096)
    make, statuses = REFUSALS[case]
    statuses = (statuses,) if isinstance(statuses, str) else statuses
    with MessageStore.open(config) as store:
        assert store.put_message(Message("T", b"first")).ok
        wait_dispatched(store)
        before = _state(store)
        payload = make()
        result = store.put_messages(payload) if isinstance(payload, list) else \
            store.put_message(payload)
        assert result.status.name in statuses and result.error, result
        wait_dispatched(store)
        assert _state(store) == before
        assert store.put_message(Message("T", b"after")).ok
        wait_dispatched(store)
        got = store.get_message("g", "T", 0, 0)
        assert [m.body for m in got.messages] == [b"first", b"after"]
    assert not os.path.exists(os.path.join(config.store_path_root_dir, "consumequeue", "T2"))


def test_record_larger_than_a_segment_is_refused(tmp_path):
    config = small_config(tmp_path / "s", mapped_file_size_commit_log=4096,
                          max_message_size=1 << 20)
    with MessageStore.open(config) as store:
        result = store.put_message(Message("T", b"x" * 5000))
        assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.commit_log.max_wrote_offset() == 0
        assert store.put_message(Message("T", b"x" * 3000)).ok


def test_highest_queue_id_is_accepted(tmp_path):
    with MessageStore.open(small_config(tmp_path / "s")) as store:
        assert store.put_message(Message("T", b"x", queue_id=65535)).ok
        wait_dispatched(store)
        assert store.get_message("g", "T", 65535, 0).messages[0].body == b"x"


# -- memory ----------------------------------------------------------------------------------------


def _status_bytes(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"{field} not in /proc/self/status")


class PeakSampler:
    """Samples RssAnon and VmRSS every 5 ms in a thread; keeps the peaks."""

    def __init__(self):
        self.base_anon = _status_bytes("RssAnon")
        self.base_rss = _status_bytes("VmRSS")
        self.peak_anon = self.base_anon
        self.peak_rss = self.base_rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.sample()

    def sample(self) -> None:
        self.peak_anon = max(self.peak_anon, _status_bytes("RssAnon"))
        self.peak_rss = max(self.peak_rss, _status_bytes("VmRSS"))

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def _big_config(root):
    return small_config(root, mapped_file_size_commit_log=16 << 20,
                        mapped_file_size_consume_queue=600_000, max_hash_slot_num=50_000,
                        max_index_num=200_000)


def _build_big_store(root, size_mb: int):
    """A store of about `size_mb` MB: 4 KiB bodies in 8 queues, unique keys, 16 MiB segments."""
    config = _big_config(root)
    body = bytes(range(256)) * 16
    count = size_mb * 1_000_000 // (len(body) + 150)
    with MessageStore.open(config, start_services=False) as store:
        for first in range(0, count, 16):
            queue_id = (first // 16) % 8
            batch = [Message("Big", body, queue_id=queue_id, keys=[f"key{n}"])
                     for n in range(first, min(first + 16, count))]
            assert store.put_messages(batch).ok
            if first % 1024 == 0:
                store.dispatch_pending()
        store.dispatch_pending()
    return config, count


def _read_everything(config, count: int) -> dict:
    stats = {"pulled": 0, "raw": 0, "lookups": 0, "queried": 0}
    with MessageStore.open(config, read_only=True) as store:
        for decode in (True, False):
            for queue_id in range(8):
                offset = 0
                for _ in range(count):                     # bounded: one pull per batch
                    got = store.get_message("g", "Big", queue_id, offset, 32, decode=decode)
                    if got.status is not GetMessageStatus.FOUND:
                        break
                    for message in got.messages:
                        if decode:
                            stats["pulled"] += 1
                            assert len(message.body) == 4096
                            stats["lookups"] += store.look_message_by_offset(
                                message.commit_log_offset).queue_offset == message.queue_offset
                        else:
                            stats["raw"] += 1
                    offset = got.next_begin_offset
        for n in range(0, count, max(1, count // 300)):
            stats["queried"] += len(store.query_message("Big", f"key{n}").messages)
    return stats


def measure_reading(root: str, count: int) -> dict:
    """Run in a fresh process (below), so memory freed by earlier work cannot hide growth."""
    with PeakSampler() as sampler:
        stats = _read_everything(_big_config(root), count)
    return dict(stats, anon_growth=sampler.peak_anon - sampler.base_anon,
                rss_growth=sampler.peak_rss - sampler.base_rss)


def _check_memory(tmp_path, size_mb: int) -> None:
    config, count = _build_big_store(tmp_path / "big", size_mb)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.run([sys.executable, "-m", "tests.test_resource_limits", "measure",
                            config.store_path_root_dir, str(count)], cwd=REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=1800)
    assert child.returncode == 0, child.stderr[-3000:]
    stats = json.loads(child.stdout.strip().splitlines()[-1])
    assert stats["pulled"] == stats["raw"] == stats["lookups"] == count, stats
    assert stats["queried"] >= 300 * 0.9, stats
    growth = stats["anon_growth"]
    print(f"memory: {size_mb} MB store, {count} messages, RssAnon +{growth >> 10} KiB, VmRSS "
          f"+{stats['rss_growth'] >> 20} MiB (page cache of mapped segments)")
    assert growth < RSS_ANON_GROWTH_MAX_BYTES, f"RssAnon grew by {growth >> 20} MiB"


def test_memory_bounded_reading_a_store(tmp_path):
    _check_memory(tmp_path, MEMORY_STORE_MB_QUICK)


@pytest.mark.slow
def test_memory_bounded_reading_a_large_store(tmp_path):
    _check_memory(tmp_path, MEMORY_STORE_MB_SLOW)


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "measure":
    print(json.dumps(measure_reading(sys.argv[2], int(sys.argv[3]))))
