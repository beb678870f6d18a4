"""The pull's short steps give the answers of the steps they replace: the queue store's
`pull_window` skips the LRU touch only for the queue already at the LRU's end
(`FileConsumeQueue.pull_window_untouched`), and `MappedFileQueue.end_and_file` is
(`max_offset()`, `find_file()`, its `read_position` and `buffer`)."""

from __future__ import annotations

import os

import pytest

from store import Message, MessageStore
from store.consumequeue.base import STORE_TYPE_FILE
from store.consumequeue.file.consume_queue import FileConsumeQueue
from tests.engine_util import small_config
from tests.test_consume_queue import _random_stream, open_store, request


def _pull_both_ways(cq_store, key, offset, max_units):
    """The store's pull_window, then the queue's full one (which touches the LRU whenever it maps
    or reads): same answer, and the touch the shortcut skipped changes nothing."""
    first = cq_store.pull_window(*key, offset, max_units)
    order = list(cq_store._mapped)
    queue = cq_store._queues.get(key)    # the full path, touch included
    second = None if queue is None else queue.pull_window(offset, max_units)
    assert first == second, (key, offset, max_units)
    assert list(cq_store._mapped) == order, (key, offset)   # the skipped touch changed nothing
    return first


@pytest.mark.parametrize("seed", range(6))
def test_pull_window_shortcut_keeps_answers_and_lru(tmp_path, seed, monkeypatch):
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.max_mapped_queues = 1 + seed % 3       # queues are unmapped and mapped again
    taken = []
    real = FileConsumeQueue.pull_window_untouched

    def counting(self, *args):
        taken.append(args)
        return real(self, *args)
    monkeypatch.setattr(FileConsumeQueue, "pull_window_untouched", counting)
    try:
        for kind, value in _random_stream(seed):
            if kind == "put":
                cq_store.put_units(value)
            elif kind == "truncate":
                cq_store.truncate_dirty(value)
            else:
                cq_store.delete_expired(value)
            for key in sorted(cq_store.queues()) + [("nope", 0)]:
                end = cq_store.get_max_offset(*key)
                for offset in (-1, 0, 1, end // 2, end - 1, end, end + 1):
                    for max_units in (1, 3, 33):
                        _pull_both_ways(cq_store, key, offset, max_units)
                        _pull_both_ways(cq_store, key, offset, max_units)   # now the MRU
    finally:
        cq_store.close()
    assert len(taken) > 100


def test_pull_window_of_a_hibernated_most_recent_queue(tmp_path):
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.max_mapped_queues = 1
    cq_store.put_units([request("A", 0, n, n * 100) for n in range(5)])
    assert cq_store.pull_window("A", 0, 1, 2)[2] is not None      # A is the MRU
    cq_store.put_units([request("B", 0, n, 10_000 + n * 100) for n in range(3)])  # unmaps A
    assert not cq_store.queue("A", 0).is_mapped
    window = _pull_both_ways(cq_store, ("A", 0), 1, 2)
    assert window[:2] == (0, 5) and len(window[2]) == 40
    assert cq_store.queue("A", 0).is_mapped and list(cq_store._mapped) == [("A", 0)]
    cq_store.close()


@pytest.mark.parametrize("pool", [False, True])
def test_end_and_file_is_max_offset_and_find_file(tmp_path, pool):
    """With the transient store pool, the last segment's readable end is its committed position."""
    config = small_config(tmp_path / "store", transient_store_pool_enable=pool)
    with MessageStore.open(config, start_services=False) as store:
        for seq in range(150):   # ~3 commit-log segments of 64 KiB
            assert store.put_message(Message("T", os.urandom(1000), queue_id=seq % 2)).ok
            if seq == 140:   # the last records stay in the write buffer (pool), uncommitted
                store.commit_log.mapped_files.commit(0)
                store.dispatch_pending()
        if pool:
            last = store.commit_log.mapped_files.files[-1]
            assert last.write_buffer is not None and last.read_position < last.wrote_position
        queues = [store.commit_log.mapped_files,
                  store.consume_queues.queue("T", 0).mapped_files]
        for files in queues:
            end = files.max_offset()
            size = files.file_size_bytes
            assert len(files.files) >= 2 or files is queues[1]
            for offset in sorted({-1, 0, 1, size - 1, size, size + 7, end - 1, end, end + 1,
                                  2 * size, 10 * size}):
                found = files.find_file(offset)
                expected = (end, None, 0, None) if found is None else \
                    (end, found, found.read_position, found.buffer)
                assert files.end_and_file(offset) == expected, offset
