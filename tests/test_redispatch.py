"""Re-dispatch after recovery: records every index already has are dropped before any request."""

from __future__ import annotations

import pytest

from store import Message, MessageStore
from tests.engine_util import FakeClock, small_config


def _files(root):
    return {p.relative_to(root): p.read_bytes() for part in ("consumequeue",)
            for p in (root / part).rglob("*") if p.is_file()}


@pytest.mark.parametrize("store_type", ["default", "defaultRocksDB"])
def test_covered_records_are_skipped_and_nothing_changes(tmp_path, store_type):
    store = MessageStore.open(small_config(tmp_path, store_type), clock_ms=FakeClock(),
                              start_services=False)
    try:
        for n in range(300):
            assert store.put_message(Message(f"T{n % 3}", b"x" * (n % 90), n % 4, "tag",
                                             (f"k{n}",))).ok
        store.dispatch_pending()
        reput = store.services.reput
        store.commit_log.pending_dispatch.clear()
        before = _files(tmp_path) if store_type == "default" else None
        end = reput.reput_offset
        reput.reput_offset = 0                       # as recovery does after a crash
        # Only the last record comes back: an index file's endPhyOffset is the *start* of the last
        # record it indexed, and RocketMQ's buildIndex skips offsets below it, not at it.
        assert reput.do_reput() == 1
        assert reput.skipped_covered == 299 and reput.reput_offset == end
        if before is not None:
            assert _files(tmp_path) == before
        for n in range(0, 300, 37):
            assert store.query_message(f"T{n % 3}", f"k{n}").messages
    finally:
        store.close()


def test_an_unknown_dispatcher_still_sees_every_record(tmp_path):
    store = MessageStore.open(small_config(tmp_path), clock_ms=FakeClock(), start_services=False)
    try:
        for n in range(50):
            assert store.put_message(Message("T", b"y", 0, None, (f"k{n}",))).ok
        store.dispatch_pending()
        seen = []

        class Counting:
            def dispatch(self, requests):
                seen.extend(r.commit_log_offset for r in requests)

        reput = store.services.reput
        reput.dispatchers.append(Counting())
        store.commit_log.pending_dispatch.clear()
        reput.reput_offset = 0
        reput.do_reput()
        assert len(seen) == 50 and reput.skipped_covered == 0
    finally:
        store.close()


def test_records_missing_from_the_index_are_dispatched_again(tmp_path):
    store = MessageStore.open(small_config(tmp_path), clock_ms=FakeClock(), start_services=False)
    try:
        for n in range(40):
            assert store.put_message(Message("T", b"z", 0, None, (f"k{n}",))).ok
        reput = store.services.reput
        # Dispatch only to the consume queues, as if the index had lost its entries in a crash.
        index_dispatchers = [d for d in reput.dispatchers if type(d).__name__ == "IndexDispatcher"]
        reput.dispatchers = [d for d in reput.dispatchers if d not in index_dispatchers]
        store.dispatch_pending()
        assert not store.query_message("T", "k5").messages
        reput.dispatchers += index_dispatchers
        store.commit_log.pending_dispatch.clear()
        reput.reput_offset = 0
        reput.do_reput()
        assert reput.skipped_covered == 0
        assert store.query_message("T", "k5").messages
        assert store.get_max_offset_in_queue("T", 0) == 40
    finally:
        store.close()


def _write(root, *, index_later: bool, accent: str, delay: bool = False):
    topic = "T"
    store = MessageStore.open(small_config(root), clock_ms=FakeClock(), start_services=False)
    try:
        for n in range(700):                    # several index files (small_config: 256 entries)
            uniq = {"UNIQ_KEY": f"{n:032X}"} if n % 3 else None
            if delay and n % 50 == 9:
                uniq = {**(uniq or {}), "DELAY": "2"}      # goes to SCHEDULE_TOPIC_XXXX
            keys = (f"k{n}{accent}", f"o{n % 7}", "")
            assert store.put_message(Message(topic, b"w" * (n % 50), n % 3, None, keys, uniq,
                                             sys_flag=0x0C if n % 97 == 5 else 0)).ok
        reput = store.services.reput
        if index_later:
            index_dispatchers = [d for d in reput.dispatchers
                                 if type(d).__name__ == "IndexDispatcher"]
            reput.dispatchers = [d for d in reput.dispatchers if d not in index_dispatchers]
            store.dispatch_pending()
            reput.dispatchers += index_dispatchers
            store.commit_log.pending_dispatch.clear()
            reput.reput_offset = 0
            reput.do_reput()
            direct = reput.indexed_directly
        else:
            store.dispatch_pending()
            direct = 0
    finally:
        store.close()
    files = {p.name: p.read_bytes() for p in (root / "index").iterdir() if p.is_file()}
    return files, direct


@pytest.mark.parametrize("accent, delay, direct_expected", [
    ("", False, True),
    ("ö", False, False),     # non-ASCII keys take the request path
    ("", True, False),       # so do batches with a DELAY (an unparsable one is not dispatched)
])
def test_index_built_directly_is_byte_identical(tmp_path, accent, delay, direct_expected):
    expected, _ = _write(tmp_path / "requests", index_later=False, accent=accent, delay=delay)
    got, direct = _write(tmp_path / "direct", index_later=True, accent=accent, delay=delay)
    assert len(expected) >= 3 and got == expected
    assert (direct > 0) == direct_expected
