"""span_groups (store/kernel/c/groups.c) against its twin, the numpy packing and np.unique of
store.kernel.scan_groups._packed_groups: the same groups, numbered the same, the same first rows."""

from __future__ import annotations

import random

import numpy as np
import pytest

from store import kernel
from store.kernel import scan_groups
from store.kernel.scan_groups import _packed_groups, span_groups

pytestmark = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built here")

TAG_EDGES = [0, 1, -1, 7, 2**31 - 1, -2**31, 2**62, 2**63 - 1, -2**63]


def _case(rng: random.Random, rows: int, with_tags: bool):
    # Few distinct byte values and short spans, so that prefixes, NUL padding and equal spans with
    # different lengths or tags all happen often.
    buf = bytes(rng.choice(b"\x00\x00ab\xff") for _ in range(rng.randrange(1, 300)))
    positions, lengths = [], []
    for _ in range(rows):
        position = rng.randrange(len(buf) + 1)
        positions.append(position)
        lengths.append(rng.randrange(min(6, len(buf) - position) + 1))
    tags = np.array([rng.choice(TAG_EDGES) for _ in range(rows)], dtype=np.int64) \
        if with_tags else None
    return buf, np.array(positions, dtype=np.int64), np.array(lengths, dtype=np.int64), tags


@pytest.mark.parametrize("seed", range(40))
def test_the_c_numbers_groups_as_np_unique_does(seed):
    rng = random.Random(seed)
    buf, positions, lengths, tags = _case(rng, rng.randrange(1, 400), with_tags=seed % 2 == 0)
    first, inverse = span_groups(buf, positions, lengths, tags)
    twin_first, twin_inverse = _packed_groups(buf, positions, lengths, tags)
    assert first.tolist() == twin_first.tolist()
    assert inverse.tolist() == twin_inverse.tolist()


def test_nul_padding_length_and_tag_tell_groups_apart():
    buf = b"ab\x00ab\x00\x00abc"
    positions = np.array([0, 0, 3, 0, 7, 7, 7], dtype=np.int64)
    lengths = np.array([2, 3, 2, 3, 2, 2, 3], dtype=np.int64)
    tags = np.array([0, 0, 0, 0, 0, -1, 5], dtype=np.int64)
    first, inverse = span_groups(buf, positions, lengths, tags)
    # Packed, the bytes come first, then the length, then the tag (>i8: -1 after 0): "ab" (rows 0, 2,
    # 4), "ab" tagged -1 (5), "ab\0" (1, 3: longer), "abc" (6).
    assert first.tolist() == [0, 5, 1, 6]
    assert inverse.tolist() == [0, 2, 0, 2, 0, 1, 3]


def test_a_span_outside_the_buffer_goes_the_numpy_way():
    buf = b"abcdef"
    positions = np.array([0, 4, 1], dtype=np.int64)
    lengths = np.array([2, 5, 2], dtype=np.int64)          # the second runs past the end
    assert scan_groups._span_groups_c(buf, positions, lengths, b"", np.empty(3, np.int64),
                                      np.empty(3, np.int64)) == -3
    got = span_groups(buf, positions, lengths)
    want = _packed_groups(buf, positions, lengths)
    assert [a.tolist() for a in got] == [a.tolist() for a in want]


def test_arrays_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="aligned int64 arrays of one length"):
        scan_groups._span_groups_c(b"ab", np.zeros(2, np.int64), np.zeros(3, np.int64), b"",
                                   np.empty(2, np.int64), np.empty(2, np.int64))


def test_queue_groups_of_a_real_scan_match_the_twin(tmp_path):
    from bench import common
    from store.message_store import MessageStore
    store = MessageStore.open(common.store_config(str(tmp_path)))
    try:
        for message in common.make_messages(600, 64, queue_of=lambda n: n % 7):
            assert store.put_message(message).ok
        mapped = store.commit_log.mapped_files.files[0]
        buf = mapped.buffer
        out = np.zeros((1024, kernel.SCAN_FIELDS), dtype=np.int64)
        count = kernel.scan(buf, 0, mapped.wrote_position, 0, out)[0]
        rows = out[:count]
        keys, inverse = scan_groups.queue_groups(buf, rows)
        twin_first, twin_inverse = _packed_groups(
            buf, rows[:, kernel.COL["topic_pos"]], rows[:, kernel.COL["topic_len"]],
            rows[:, kernel.COL["queue_id"]])
        assert count == 600 and len(keys) == len(twin_first)
        assert inverse.tolist() == twin_inverse.tolist()
        assert sorted(queue for _, queue in keys) == list(range(7))
    finally:
        store.close()
