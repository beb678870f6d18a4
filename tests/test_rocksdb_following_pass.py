"""`put_value_runs`' column-wise pass (`_put_following_pass`, taken when every run follows its queue)
against its run-by-run path (`_put_runs`) on the same passes: the same WriteBatch operations in the
same order, the same in-memory state, the same database; and the passes it must leave to the other."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rocksdict import WriteBatch

from store.codec import rocksdb_cq as codec
from store.consumequeue.base import STORE_TYPE_ROCKSDB
from store.consumequeue.rocksdb import value_runs
from tests.test_consume_queue import open_store, request
from tests.test_rocksdb_value_runs import _as_runs, _contents, _passes


class _RecordingBatch:
    def __init__(self, raw_mode: bool):
        assert raw_mode
        self.ops = []

    def put(self, key, value, family=None):     # None: the default column family
        self.ops.append((key, value, family))


class _RecordingDb:
    """The store's Rdict, recording each written batch's operations (column family by name)."""

    def __init__(self, store):
        self.db, self.store, self.batches = store.db, store, []

    def write(self, batch):
        names = {id(self.store._units_cf): "default", id(self.store._offsets_cf): "offset",
                 id(None): "default"}
        self.batches.append([(k, v, names[id(f)]) for k, v, f in batch.ops])
        real = WriteBatch(raw_mode=True)
        for key, value, family in batch.ops:
            if family is None:
                real.put(key, value)
            else:
                real.put(key, value, family)
        self.db.write(real)

    def __getattr__(self, name):
        return getattr(self.db, name)


def _following_passes(seed: int):
    """Passes over many queues as dispatch makes them at scale: one run per queue, most of one unit,
    new queues from offset 0; now and then a pass that is not one (a repeat, a queue past 0)."""
    rng = random.Random(seed)
    next_offset, phy, passes = {}, 0, []
    queues = [(f"T{n % 37}", n // 37) for n in range(rng.randrange(50, 300))]
    for _ in range(rng.randrange(4, 14)):
        batch = []
        for _ in range(rng.randrange(1, 400)):
            queue = rng.choice(queues)
            offset = next_offset.get(queue, 0)
            if rng.random() < 0.01:
                offset += 3                        # a gap: the pass is not a following one
            size = rng.randrange(50, 300)
            batch.append(request(queue[0], queue[1], offset, phy, size, tags=rng.randrange(-9, 9),
                                 store_time=1_700_000_000_000 + phy))
            next_offset[queue] = offset + 1
            phy += size
        passes.append(batch)
        if rng.random() < 0.15:
            passes.append(batch)                   # dispatched again: every unit a repeat
    return passes


def _write(root, passes, *, fast: bool, arrays: bool, monkeypatch):
    taken = []
    with monkeypatch.context() as patch:
        patch.setattr(value_runs, "WriteBatch", _RecordingBatch)
        following = value_runs._put_following_pass

        def spy(*args):
            taken.append(following(*args) if fast else False)
            return taken[-1]
        patch.setattr(value_runs, "_put_following_pass", spy)
        cq = open_store(root, STORE_TYPE_ROCKSDB)
        recorder = cq.db = _RecordingDb(cq)
        batches = []
        for number, batch in enumerate(passes):
            if number == len(passes) // 2:      # reopened: queues known from disk, keys not made
                cq.db = recorder.db
                cq.close()
                cq = open_store(root, STORE_TYPE_ROCKSDB)
                batches += recorder.batches
                recorder = cq.db = _RecordingDb(cq)
            runs, values, offsets = _as_runs(batch)
            if arrays:
                runs = (runs[0], *(np.array(column, dtype=np.int64) for column in runs[1:]))
                offsets = np.array(offsets, dtype=np.int64)
            cq.put_value_runs(runs, values, offsets)
        # (The key caches are left out: the run-by-run path fills _unit_prefixes and _max_keys,
        # the following pass makes its keys in one call from _topic_heads; the batches compare
        # every key.)
        state = (list(cq._max.items()), cq.checkpoint_phy_end, list(cq._min_unwritten.items()),
                 dict(cq._min))
        assert all(type(x) is int for _, entry in state[0] for x in entry)
        cq.db = recorder.db
        cq.close()
    return batches + recorder.batches, state, taken


@pytest.mark.parametrize("arrays", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_the_following_pass_writes_what_the_run_by_run_path_writes(tmp_path, monkeypatch, seed,
                                                                    arrays):
    passes = _following_passes(seed) + _passes(seed)
    fast = _write(tmp_path / "fast", passes, fast=True, arrays=arrays, monkeypatch=monkeypatch)
    slow = _write(tmp_path / "slow", passes, fast=False, arrays=arrays, monkeypatch=monkeypatch)
    assert fast[0] == slow[0]           # every batch, operation by operation
    assert fast[1] == slow[1]
    assert any(fast[2]) and not all(fast[2])
    assert _contents(tmp_path / "fast" / "consumequeue") == \
        _contents(tmp_path / "slow" / "consumequeue")


def _one_pass(cq, queues_and_offsets, phy=1000):
    batch = [request(topic, queue_id, offset, phy + 100 * n, 100, tags=1, store_time=5)
             for n, ((topic, queue_id), offset) in enumerate(queues_and_offsets)]
    return value_runs._put_following_pass(cq, *_as_runs(batch))


@pytest.mark.parametrize("case,expected", [
    ("follows", True), ("new past 0", False), ("gap", False), ("repeat", False),
    ("emptied", False), ("old min entry", False), ("same queue twice", False),
    ("runs out of order", False)])
def test_which_passes_the_following_pass_takes(tmp_path, case, expected):
    cq = open_store(tmp_path / "cq", STORE_TYPE_ROCKSDB)
    try:
        assert _one_pass(cq, [(("A", 0), 0), (("B", 0), 0)], phy=0)
        pass_of = {
            "follows": [(("A", 0), 1), (("C", 1), 0)],
            "new past 0": [(("A", 0), 1), (("C", 1), 4)],
            "gap": [(("A", 0), 2)],
            "repeat": [(("A", 0), 1)],
            "emptied": [(("B", 0), 1)],
            "old min entry": [(("D", 0), 0)],
            "same queue twice": [(("A", 0), 1)], "runs out of order": []}[case]
        if case == "repeat":
            assert _one_pass(cq, [(("A", 0), 1)])
        if case == "emptied":
            cq._max[("B", 0)] = (-1, -1, 100)
        if case == "old min entry":
            cq._min[("D", 0)] = (0, 0)
        before = (dict(cq._max), cq.checkpoint_phy_end, dict(cq._min_unwritten))
        if case == "same queue twice":
            runs, values, offsets = _as_runs([request("A", 0, 1, 1000, 100, tags=1, store_time=5)])
            runs = tuple(column * 2 for column in runs)
            runs[1][1] = 0
            taken = value_runs._put_following_pass(cq, runs, values, offsets)
        elif case == "runs out of order":    # each run names its units, but not in their order
            runs, values, offsets = _as_runs([request("A", 0, 1, 1000, 100, tags=1, store_time=5),
                                              request("C", 1, 0, 1100, 100, tags=1, store_time=5)])
            runs = tuple(column[::-1] for column in runs)
            taken = value_runs._put_following_pass(cq, runs, values, offsets)
            assert not taken
            assert (dict(cq._max), cq.checkpoint_phy_end, dict(cq._min_unwritten)) == before
            value_runs.put_value_runs(cq, runs, values, offsets)    # the run-by-run path writes it
            assert cq.get_max_offset("A", 0) == 2 and cq.get_max_offset("C", 1) == 1
        else:
            taken = _one_pass(cq, pass_of)
        assert taken is expected
        if not taken and case != "runs out of order":       # nothing written, nothing changed
            assert (dict(cq._max), cq.checkpoint_phy_end, dict(cq._min_unwritten)) == before
        else:
            assert cq.get_max_offset("A", 0) == 2 and ("C", 1) in cq._min_unwritten
            assert cq._offsets.get(codec.checkpoint_key()) == codec.checkpoint_value(1200)
    finally:
        cq.close()
