"""segment_reader.split_boundaries (the planner's walk to each split target with kernel.walk_headers)
against the whole walk it replaced (walk_records' positions, searchsorted), on the fixtures, damaged and
cut copies of them, and split sizes from one byte to more than the segment."""

from __future__ import annotations

import random

import numpy as np
import pytest

from store import kernel
from store.pipeline import segment_reader
from store.pipeline.commitlog_scan import walk_records
from store.pipeline.layout import list_commit_log
from store.pipeline.segment_reader import map_file, split_boundaries
from tests.pipeline_util import fixture_dirs

native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")


def _whole_walk(buf, split_bytes: int) -> list[int]:
    """The former plan: every position of the walk, the first at or after each target."""
    walk = walk_records(buf)
    targets = np.arange(split_bytes, len(buf), split_bytes)
    if not walk.positions.shape[0]:
        return []
    index = np.searchsorted(walk.positions, targets, side="left")
    index = index[index < walk.positions.shape[0]]
    return sorted(set(int(walk.positions[i]) for i in index) - {0})


def _buffers(seed: int):
    rng = random.Random(seed)
    for fixture in fixture_dirs():
        for segment in list_commit_log(str(fixture / "store")):
            if segment.dledger or not segment.size_bytes:
                continue
            data = bytearray(map_file(segment.path)[: 256 << 10])
            for _ in range(seed * 2):                       # damaged headers and bodies
                data[rng.randrange(len(data))] = rng.choice([0x00, 0xFF, 0xDA, 0xCB, 0x7F])
            if seed % 2:
                del data[rng.randrange(len(data)):]         # cut
            yield np.frombuffer(bytes(data), np.uint8)


@native
@pytest.mark.parametrize("seed", range(4))
def test_split_boundaries_are_the_whole_walks(seed, monkeypatch):
    rng = random.Random(seed)
    checked = 0
    for buf in _buffers(seed):
        for split_bytes in (1, 91, 4096, rng.randrange(1, len(buf) + 2), len(buf), len(buf) + 1):
            if len(buf) // split_bytes > 20000:
                continue
            expected = _whole_walk(buf, split_bytes)
            assert split_boundaries(buf, split_bytes) == expected, (seed, split_bytes)
            with monkeypatch.context() as patch:            # the twin's way (no compiled kernel)
                patch.setattr(segment_reader.kernel, "COMPILED", False)
                assert split_boundaries(buf, split_bytes) == expected
            checked += bool(expected)
    assert checked


@native
def test_a_large_record_spanning_targets_is_one_boundary():
    from store.pipeline.synthetic import SyntheticMessage, encode
    records = [encode(SyntheticMessage(topic="T", body=bytes(size)), 0) for size in (10, 9000, 10, 10)]
    buf = np.frombuffer(b"".join(records) + bytes(8), np.uint8)
    starts = np.cumsum([0] + [len(r) for r in records])[:-1].tolist()
    assert split_boundaries(buf, 1000) == [starts[2]] == _whole_walk(buf, 1000)   # 9 targets in one record
    assert split_boundaries(buf, 100) == starts[1:] == _whole_walk(buf, 100)
