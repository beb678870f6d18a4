"""Store lock (spec §6.3) and abort file (spec §6.2, fixtures README for 5.x)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from store.errors import StoreLockedError
from store.meta.lockfile import (StoreLock, abort_exists, create_abort, delete_abort, probe_lock,
                                 read_abort_pid)
from tests.fixtures_util import fixture_dirs, fixture_id, load_dump

HOLDER = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(os.path.join(sys.argv[1], "lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    print("locked", flush=True)
    sys.stdin.read()
""")


@pytest.fixture
def holder(tmp_path):
    """A separate process holding the store lock of tmp_path until the test ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=10)


def test_acquire_writes_lock_and_release_keeps_file(tmp_path):
    lock = StoreLock(tmp_path)
    lock.acquire()
    assert lock.held and (tmp_path / "lock").read_bytes() == b"lock"
    assert probe_lock(tmp_path) == os.getpid()
    lock.release()
    lock.release()
    assert not lock.held and (tmp_path / "lock").exists()
    assert probe_lock(tmp_path) is None


def test_existing_lock_file_content_is_overwritten_at_byte_0(tmp_path):
    (tmp_path / "lock").write_bytes(b"xxxxxx")
    with StoreLock(tmp_path):
        assert (tmp_path / "lock").read_bytes() == b"lockxx"


def test_second_acquire_in_same_process_is_refused(tmp_path):
    with StoreLock(tmp_path):
        with pytest.raises(StoreLockedError):
            StoreLock(tmp_path).acquire()
        assert probe_lock(tmp_path) == os.getpid()   # probing did not drop our lock
    StoreLock(tmp_path).acquire().release()


def test_lock_held_by_another_process(tmp_path, holder):
    with pytest.raises(StoreLockedError):
        StoreLock(tmp_path).acquire()
    assert probe_lock(tmp_path) == holder.pid
    holder.stdin.close()
    holder.wait(timeout=10)
    assert probe_lock(tmp_path) is None
    with StoreLock(tmp_path):
        pass


def test_our_lock_blocks_another_process(tmp_path):
    with StoreLock(tmp_path):
        probe = subprocess.run(
            [sys.executable, "-c",
             "import fcntl,os,sys\nfd=os.open(sys.argv[1],os.O_RDWR)\n"
             "try:\n fcntl.lockf(fd, fcntl.LOCK_EX|fcntl.LOCK_NB, 1, 0)\nexcept OSError:\n sys.exit(3)",
             str(tmp_path / "lock")], timeout=10)
        assert probe.returncode == 3


def test_probe_missing_lock_file(tmp_path):
    assert probe_lock(tmp_path) is None
    assert not (tmp_path / "lock").exists()


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=fixture_id)
def test_fixture_lock_and_abort_read_only(fixture):
    root = os.path.join(fixture, "store")
    assert abort_exists(root) == load_dump(fixture)["before"]["abortFileExists"]
    assert probe_lock(root) is None
    pid = read_abort_pid(root)
    if abort_exists(root) and "5.3" in load_dump(fixture)["rocketmqVersion"]:
        assert pid is not None and pid > 0
    else:
        assert pid is None


def test_abort_4_9(tmp_path):
    assert not abort_exists(tmp_path)
    create_abort(tmp_path, "4.9")
    create_abort(tmp_path, "4.9")
    assert (tmp_path / "abort").read_bytes() == b""
    assert read_abort_pid(tmp_path) is None
    delete_abort(tmp_path, "4.9")
    delete_abort(tmp_path, "4.9")
    assert os.listdir(tmp_path) == []


def test_abort_5x_writes_pid_and_keeps_bak(tmp_path):
    create_abort(tmp_path, "5.x")
    assert (tmp_path / "abort").read_text() == str(os.getpid())
    assert (tmp_path / "abort.bak").read_bytes() == b""      # as in the 5.3.3 fixtures
    assert read_abort_pid(tmp_path) == os.getpid()
    delete_abort(tmp_path, "5.x")
    assert not abort_exists(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["abort.bak"]


def test_abort_5x_after_crash_backs_up_old_pid(tmp_path):
    (tmp_path / "abort").write_text("2183")
    create_abort(tmp_path, "5.x")
    assert (tmp_path / "abort.bak").read_text() == "2183"
    assert read_abort_pid(tmp_path) == os.getpid()


def test_abort_bad_style(tmp_path):
    with pytest.raises(ValueError):
        create_abort(tmp_path, "auto")
