"""The vectorized pull scan takes exactly what RocketMQ's unit-by-unit loop takes."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from store.codec.cq_unit import CQ_UNIT_DTYPE
from store.codec.javahash import java_string_hash
from store.read_path import TagFilter, TransferLimits, _plan_scan, _scan_sequentially

TAGS = ["A", "B", "C"]


class FakeLog:
    def read(self, phy_offset, size):
        return b"x" * size

    view = read

    def next_file_start(self, phy_offset):
        return phy_offset + 1


@given(sizes=st.lists(st.integers(1, 70_000), min_size=1, max_size=120),
       tags=st.lists(st.sampled_from(TAGS), min_size=120, max_size=120),
       max_msg_nums=st.integers(1, 64),
       expression=st.sampled_from(["*", "A", "A || C", "Z"]),
       max_total=st.one_of(st.none(), st.integers(100, 300_000)),
       memory_bytes=st.sampled_from([0, 10**12]))
def test_vectorized_scan_matches_the_sequential_loop(sizes, tags, max_msg_nums, expression,
                                                     max_total, memory_bytes):
    units = np.zeros(len(sizes), dtype=CQ_UNIT_DTYPE)
    units["phy_offset"] = np.cumsum([0] + sizes[:-1])
    units["size"] = sizes
    units["tags_code"] = [java_string_hash(t) for t in tags[:len(sizes)]]
    tag_filter = TagFilter.parse(expression)
    limits = TransferLimits(physical_memory_bytes=memory_bytes)
    commit_log_max = int(units["phy_offset"][-1]) + sizes[-1]
    in_memory_bytes = memory_bytes * 40 // 100
    taken, scanned = _plan_scan(units, max_msg_nums, tag_filter, limits, max_total,
                                commit_log_max, in_memory_bytes)
    expected = _scan_sequentially(FakeLog(), units, 0, max_msg_nums, tag_filter, limits,
                                  max_total, 0, len(sizes), False, commit_log_max, in_memory_bytes)
    assert scanned == expected.next_begin_offset
    assert [int(units["size"][i]) for i in taken] == [len(r) for r in expected.messages]
