"""SYNC_FLUSH group commit and commit-log segment preallocation (store/services/flush.py, allocate.py).

* Puts made while a sync runs are flushed together by the next sync (one sync per group).
* A put is acknowledged only once a sync covering its bytes returned.
* The segment after the one being written is made in the background (AllocateMappedFileService); a
  clean close deletes it, a crash leaves it all zero: the read-only view ends at the log's end,
  check() only notes it, recovery deletes it, and every acknowledged message reads back.
* warmMapedFileEnable writes the preallocated segment's blocks before records land there.
* The commit log's held sync descriptors are closed with the store.

Every test runs on the compiled group commit (store/kernel/c/group_commit.c) and on its Python twin.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests.engine_util import small_config
from store.api import Message
from store.kernel import COMPILED
from store.kernel import group_commit as group_commit_module
from store.services import flush as flush_module
from store.mappedfile import mapped_file as mapped_file_module
from store.message_store import MessageStore

SEGMENT = 65536


@pytest.fixture(autouse=True, params=["compiled", "python"])
def group_commit_engine(request, monkeypatch):
    """The group commit's engine: both sync through `os.fdatasync` as looked up at each sync, so
    that a test can hold or record the syncs by replacing it."""
    if request.param == "compiled":
        if not COMPILED:
            pytest.skip("the kernel is not built")
        engine = group_commit_module._native.GroupCommit
    else:
        engine = group_commit_module.GroupCommitPy
    monkeypatch.setattr(flush_module, "GroupCommit",
                        lambda: engine(sync=lambda fd: os.fdatasync(fd)))
    return request.param


def _segments(config) -> list[str]:
    return sorted(os.listdir(config.commit_log_dir))


def _put_many(store, count: int, body: bytes = b"x" * 900) -> list:
    results = []
    for n in range(count):
        result = store.put_message(Message("T", body, queue_id=n % 4, keys=f"k{n}"))
        assert result.ok, result.status
        results.append(result)
    return results


def _wait_until(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_puts_during_a_sync_join_the_next_one(tmp_path, monkeypatch):
    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    with MessageStore.open(config) as store:
        assert store.put_message(Message("T", b"first")).ok     # the segment exists
        service = store.services.flush_service
        log_dir = os.path.realpath(config.commit_log_dir)
        entered, release = threading.Event(), threading.Event()
        real_fdatasync = os.fdatasync
        synced_ends = []

        def held_fdatasync(fd):
            if os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")).startswith(log_dir):
                entered.set()
                release.wait(30)
                synced_ends.append(store.commit_log.mapped_files.max_offset())
            return real_fdatasync(fd)

        monkeypatch.setattr(os, "fdatasync", held_fdatasync)
        first = threading.Thread(target=store.put_message, args=(Message("T", b"a"),))
        first.start()
        assert entered.wait(30)            # the sync of the first put is running (and held)
        count_before = service.flush_count
        producers = 8
        results = [None] * producers

        def produce(i):
            results[i] = store.put_message(Message("T", b"b" * 100, queue_id=i % 4))

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
        end_before = store.commit_log.max_offset()
        for thread in threads:
            thread.start()
        # All eight appended while the first sync is still held; none is acknowledged.
        _wait_until(lambda: store.commit_log.max_offset() >= end_before + producers * 100)
        assert all(r is None for r in results)
        release.set()
        first.join(30)
        for thread in threads:
            thread.join(30)
        assert all(r is not None and r.ok for r in results)
        # The held sync, then one sync for the eight: they formed one group.
        assert service.flush_count - count_before == 2
        assert store.pointers()["flushed"] >= max(r.wrote_offset + r.wrote_bytes for r in results)


def test_put_returns_only_after_its_sync_returned(tmp_path, monkeypatch):
    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    with MessageStore.open(config) as store:
        log_dir = os.path.realpath(config.commit_log_dir)
        real_fdatasync = os.fdatasync
        durable_end = [0]

        def recording_fdatasync(fd):
            path = os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))
            end = store.commit_log.mapped_files.max_offset()    # what this sync covers at most
            real_fdatasync(fd)
            if path.startswith(log_dir):
                durable_end[0] = max(durable_end[0], end)

        monkeypatch.setattr(os, "fdatasync", recording_fdatasync)
        errors = []

        def produce(i):
            for n in range(30):
                result = store.put_message(Message("T", b"z" * 700, queue_id=i % 4))
                if not result.ok or durable_end[0] < result.wrote_offset + result.wrote_bytes:
                    errors.append((result.status, durable_end[0], result.wrote_offset))

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors[:3]


def test_next_segment_is_preallocated_and_a_clean_close_deletes_it(tmp_path):
    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    with MessageStore.open(config) as store:
        results = _put_many(store, 200)      # ~200 KB: several 64 KiB segments
        used = {os.path.basename(f.path) for f in store.commit_log.mapped_files.files}
        allocator = store.services.allocator
        _wait_until(lambda: len(_segments(config)) == len(used) + 1)
        assert allocator.created >= len(used)
        extra = sorted(set(_segments(config)) - used)
        assert len(extra) == 1 and int(extra[0]) == max(int(name) for name in used) + SEGMENT
        assert open(os.path.join(config.commit_log_dir, extra[0]), "rb").read() == bytes(SEGMENT)
    assert set(_segments(config)) == used
    with MessageStore.open(config) as store:
        for result in results[::37]:
            assert store.look_message_by_offset(result.wrote_offset).body == b"x" * 900
        assert store.commit_log.max_offset() == results[-1].wrote_offset + results[-1].wrote_bytes


def test_crash_leaves_a_zero_segment_that_read_only_check_and_recovery_accept(tmp_path):
    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    store = MessageStore.open(config)
    results = _put_many(store, 150)
    end = results[-1].wrote_offset + results[-1].wrote_bytes
    used = len(store.commit_log.mapped_files.files)
    _wait_until(lambda: len(_segments(config)) == used + 1)
    # Queues and index complete at the crash: what check() may say of a dispatch lag is not
    # what this test is about.
    _wait_until(lambda: store.dispatch_behind_bytes() == 0)
    store.crash()
    preallocated = _segments(config)[-1]
    with MessageStore.open(config, read_only=True) as view:
        assert view.commit_log.max_offset() == end
        findings = view.check()
        assert [f for f in findings if f.severity != "info"] == []
        assert any("all-zero segment" in f.message for f in findings)
    with MessageStore.open(config) as store:
        report = store.recovery_report
        assert report.process_offset == end
        assert [os.path.basename(p) for p in report.deleted_files] == [preallocated]
        assert preallocated not in _segments(config)
        assert [f for f in store.check() if f.severity != "info"] == []
        for n in (0, 1, 2, 3):
            assert store.get_max_offset_in_queue("T", n) == len(results[n::4])
        assert store.put_message(Message("T", b"after")).ok


def test_warm_writes_the_preallocated_segment(tmp_path):
    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH",
                          mapped_file_size_commit_log=1 << 20, warm_maped_file_enable=True,
                          flush_least_pages_when_warm_maped_file=16)
    with MessageStore.open(config) as store:
        _put_many(store, 3)
        path = os.path.join(config.commit_log_dir, f"{1 << 20:020d}")
        _wait_until(lambda: store.services.allocator.created >= 2)
        # Every block of the next segment is on disk (SYNC_FLUSH syncs the zeros); no hole.
        assert os.stat(path).st_blocks * 512 >= 1 << 20
        with open(path, "rb") as handle:
            assert os.lseek(handle.fileno(), 0, os.SEEK_HOLE) == 1 << 20
        # The segment being written was warmed before the first record too; records read back.
        first = store.commit_log.mapped_files.files[0]
        assert os.stat(first.path).st_blocks * 512 >= 1 << 20
        assert store.look_message_by_offset(0).body == b"x" * 900


def test_warm_stops_early_when_told(tmp_path):
    stop = threading.Event()
    stop.set()
    path = os.path.join(tmp_path, f"{0:020d}")
    mapped = mapped_file_module.MappedFile(path, 1 << 20, create=True)
    try:
        mapped.warm(stop=stop)
        with open(path, "rb") as handle:
            assert os.lseek(handle.fileno(), 0, os.SEEK_HOLE) == 0   # nothing written: a hole
    finally:
        mapped.destroy()


def test_held_sync_descriptors_close_with_the_store(tmp_path):
    def open_fds_under(directory):
        names = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(directory):
                names.append(target)
        return names

    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    store = MessageStore.open(config)
    _put_many(store, 100)       # several segments, each synced through its held descriptor
    store.close()
    assert open_fds_under(os.path.realpath(config.commit_log_dir)) == []


def test_a_put_whose_sync_does_not_return_in_time_gets_flush_disk_timeout(tmp_path, monkeypatch):
    from store.api import PutMessageStatus
    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    with MessageStore.open(config) as store:
        assert store.put_message(Message("T", b"first")).ok
        log_dir = os.path.realpath(config.commit_log_dir)
        release = threading.Event()
        real_fdatasync = os.fdatasync

        def stuck_fdatasync(fd):
            if os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")).startswith(log_dir):
                release.wait(30)
            return real_fdatasync(fd)

        monkeypatch.setattr(os, "fdatasync", stuck_fdatasync)
        result = store.put_message(Message("T", b"late"))
        assert result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert store.services.flush_service.group.waiting == 0     # it left the waiting list
        release.set()
        assert store.put_message(Message("T", b"later")).ok


def test_a_put_with_wait_false_returns_at_once_and_is_flushed_soon(tmp_path, monkeypatch):
    """WAIT=false: the put is acknowledged without waiting; the group commit, poked, flushes it
    although no producer waits for it (RocketMQ's service flushes every 10 ms)."""
    config = small_config(tmp_path / "s", flush_disk_type="SYNC_FLUSH")
    with MessageStore.open(config) as store:
        assert store.put_message(Message("T", b"first")).ok
        log_dir = os.path.realpath(config.commit_log_dir)
        release, held = threading.Event(), []
        real_fdatasync = os.fdatasync

        def held_fdatasync(fd):
            if os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")).startswith(log_dir):
                held.append(fd)
                release.wait(30)
            return real_fdatasync(fd)

        monkeypatch.setattr(os, "fdatasync", held_fdatasync)
        result = store.put_message(Message("T", b"no wait", properties={"WAIT": "false"}))
        assert result.ok            # acknowledged while its sync is held (or not begun)
        _wait_until(lambda: held)   # a sync began with nobody waiting
        release.set()
        _wait_until(lambda: store.pointers()["flushed"] >= result.wrote_offset + result.wrote_bytes)
