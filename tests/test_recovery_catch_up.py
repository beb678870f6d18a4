"""Dispatch catching up at open (`StoreServices._catch_up`): in steps bounded by `PageReleaser`, whose
mapped pages it drops behind it, with the same result as one `do_reput` over the whole log."""

from __future__ import annotations

import mmap
import shutil
import threading

import pytest

from store import Message, MessageStore
from store.meta.lockfile import create_abort
from store.recovery import segment_reader
from store.services import lifecycle
from tests.engine_util import FakeClock, small_config


def _crashed_store(root, *, lose_queue: bool):
    """A store of several 64 KiB segments, killed after dispatch (its consume queues and index hold
    everything); `lose_queue` deletes one consume queue as a crash between flushes may."""
    store = MessageStore.open(small_config(root), clock_ms=FakeClock(), start_services=False)
    for n in range(900):
        keys = (f"k{n}", f"o{n % 7}")
        assert store.put_message(Message(f"T{n % 3}", b"b" * (n % 300), n % 4, "tag", keys,
                                         {"UNIQ_KEY": f"{n:032X}"})).ok
    store.dispatch_pending()
    assert len(store.commit_log.mapped_files.files) >= 4
    store.crash()
    create_abort(root, "4.9")         # as the running services leave it: the next open is abnormal
    if lose_queue:
        shutil.rmtree(root / "consumequeue" / "T1")


def _state(root, store):
    files = {str(p.relative_to(root)): p.read_bytes() for part in ("consumequeue", "index")
             for p in (root / part).rglob("*") if p.is_file()}
    report = store.recovery_report
    return files, report.redispatched_records, report.redispatched_bytes, \
        [(s.what, s.detail.replace(str(root), "")) for s in report.steps]


def _open_and_close(root, *, unbounded: bool, monkeypatch):
    with monkeypatch.context() as patch:
        if unbounded:         # what prepare did before: one do_reput over everything
            patch.setattr(lifecycle.StoreServices, "_catch_up", lambda self: self.reput.do_reput())
        store = MessageStore.open(small_config(root), clock_ms=FakeClock(), start_services=False)
        try:
            queues = {(t, q): store.get_max_offset_in_queue(t, q) for t in ("T0", "T1", "T2")
                      for q in range(4)}
            found = [bool(store.query_message(f"T{n % 3}", f"k{n}").messages) for n in range(0, 900, 41)]
            store.close()
        except BaseException:
            store.crash()
            raise
    return (*_state(root, store), queues, found)


@pytest.mark.parametrize("step", [4096, 10_000, 1 << 20])
@pytest.mark.parametrize("lose_queue", [False, True])
def test_catch_up_in_steps_ends_where_one_pass_does(tmp_path, monkeypatch, step, lose_queue):
    _crashed_store(tmp_path / "crashed", lose_queue=lose_queue)
    shutil.copytree(tmp_path / "crashed", tmp_path / "one-pass")
    shutil.copytree(tmp_path / "crashed", tmp_path / "steps")
    want = _open_and_close(tmp_path / "one-pass", unbounded=True, monkeypatch=monkeypatch)
    monkeypatch.setattr(segment_reader, "RELEASE_STEP_BYTES", step)
    calls = []
    real = lifecycle.ReputService.do_reput

    opener = threading.get_ident()

    def counting(self, *args, **kwargs):
        if threading.get_ident() == opener:     # not a reput thread some other test left running
            calls.append(kwargs.get("until"))
        return real(self, *args, **kwargs)
    monkeypatch.setattr(lifecycle.ReputService, "do_reput", counting)
    got = _open_and_close(tmp_path / "steps", unbounded=False, monkeypatch=monkeypatch)
    assert got == want
    assert want[3][0][1].startswith("abnormal shutdown")
    assert want[1] > 0                            # records were dispatched again
    bounded = calls[:calls.index(None)]           # then the last look, and close's drain
    assert len(bounded) >= 4 and bounded == sorted(bounded)


class _FakeMap:
    def __init__(self, calls, name):
        self.calls, self.name = calls, name

    def madvise(self, option, start, length):
        self.calls.append((self.name, option, start, length))


class _FakeSegment:
    def __init__(self, index, size, calls):
        self.file_from_offset = index * size
        self.file_size_bytes = size
        self.file_end_offset = (index + 1) * size
        self.buffer = _FakeMap(calls, index)
        self.destroyed = False


class _FakeLog:
    def __init__(self, segments):
        self.mapped_files = type("Queue", (), {"files": segments})()


def test_releaser_drops_whole_pages_behind_the_walk_once():
    page = mmap.PAGESIZE
    calls = []
    size = 64 * page
    releaser = segment_reader.PageReleaser(_FakeLog([_FakeSegment(i, size, calls) for i in range(3)]),
                                           step_bytes=10 * page)
    assert releaser.next_bound() == 10 * page
    releaser.below(5 * page + 100)                  # the partial page stays mapped
    assert calls == [(0, mmap.MADV_DONTNEED, 0, 5 * page)]
    assert releaser.next_bound() == 15 * page
    releaser.below(size + 3 * page)                 # the rest of segment 0, the start of 1
    assert calls[1:] == [(0, mmap.MADV_DONTNEED, 5 * page, 59 * page),
                         (1, mmap.MADV_DONTNEED, 0, 3 * page)]
    assert releaser.next_bound() == size + 13 * page
    releaser.below(size + 3 * page)                 # nothing new
    assert len(calls) == 3
    releaser.below(10 * size)                       # past the end
    assert calls[3:] == [(1, mmap.MADV_DONTNEED, 3 * page, 61 * page), (2, mmap.MADV_DONTNEED, 0, size)]
    assert releaser.next_bound() is None


def test_releaser_leaves_a_dledger_log_alone():
    class DLedgerLike:
        def walk_for_dispatch(self):
            raise AssertionError("not called")
    releaser = segment_reader.PageReleaser(DLedgerLike())
    assert releaser.next_bound() is None
    releaser.below(1 << 40)
