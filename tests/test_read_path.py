"""The vectorized pull scan takes exactly what RocketMQ's unit-by-unit loop takes."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec.cq_unit import CQ_UNIT_DTYPE
from store.codec.javahash import java_string_hash
from store.commitlog.read_path import TagFilter, TransferLimits, _plan_scan, _scan_sequentially

TAGS = ["A", "B", "C"]
_RECORD_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")   # TOTALSIZE .. BODY LENGTH, IPv4 hosts
MIN_RECORD = _RECORD_HEAD.size + 1 + 1 + 2          # topic "T", no properties


def _with_records(background: bytes, units, queue_id: int = 0) -> bytes:
    """`background` with, at each unit's offset, a record of its size for T/queue_id at its
    index (a pull serves only the record its unit names: garbage bytes would all be skipped)."""
    log = bytearray(background)
    for index, (phy, size) in enumerate(zip(units["phy_offset"].tolist(), units["size"].tolist())):
        body = bytes(size - MIN_RECORD)
        log[phy:phy + size] = _RECORD_HEAD.pack(
            size, -626843481, 0, queue_id, 0, index, phy, 0, 0, bytes(8), 0, bytes(8), 0, 0,
            len(body)) + body + b"\x01T\x00\x00"
    return bytes(log)


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


# -- the whole pull (fast paths included) against the unit-by-unit loop ---------------------------

class FakeSegment:
    """A MappedFile stand-in: `read`/`view` as MappedFile's (None past the read position)."""

    def __init__(self, base, data, read_position):
        self.file_from_offset = base
        self.buffer = data
        self.read_position = read_position
        self.destroyed = False

    def read(self, position, size):
        if position < 0 or size < 0 or position + size > self.read_position:
            return None
        return self.buffer[position:position + size]


class FakeSegments:
    def __init__(self, segments, segment_size):
        self.files = segments
        self.segment_size = segment_size

    def find_file(self, offset):
        for segment in self.files:
            if segment.file_from_offset <= offset < segment.file_from_offset + self.segment_size:
                return segment
        return None


class FakeCommitLog:
    """Segments of `segment_size` over `data`; those listed in `removed` are gone (expired)."""

    def __init__(self, data, segment_size, removed=()):
        self.data = data
        self.segment_size = segment_size
        segments = []
        for index, base in enumerate(range(0, len(data), segment_size)):
            if index not in removed:
                chunk = data[base:base + segment_size]
                segments.append(FakeSegment(base, chunk, len(chunk)))
        self.mapped_files = FakeSegments(segments, segment_size)

    def max_offset(self):
        return len(self.data)

    def read(self, phy_offset, size):
        segment = self.mapped_files.find_file(phy_offset)
        return None if segment is None else segment.read(phy_offset - segment.file_from_offset,
                                                         size)

    def view(self, phy_offset, size):
        raw = self.read(phy_offset, size)
        return None if raw is None else memoryview(raw)

    def next_file_start(self, phy_offset):
        return phy_offset + self.segment_size - phy_offset % self.segment_size


class FakeFileQueues:
    """One queue, answering like FileConsumeQueueStore (`pull_window`)."""

    def __init__(self, units):
        self.data = units.tobytes()
        self.count = len(units)

    def pull_window(self, topic, queue_id, queue_offset, max_units):
        if not 0 <= queue_offset < self.count:
            return 0, self.count, None
        end = queue_offset + min(max_units, self.count - queue_offset)
        return 0, self.count, self.data[queue_offset * 20:end * 20]


class FakeOtherQueues:
    """One queue, answering like the RocksDB store (no `pull_window`)."""

    def __init__(self, units):
        self.units = units

    def get_min_offset(self, topic, queue_id):
        return 0

    def get_max_offset(self, topic, queue_id):
        return len(self.units)

    def get_units(self, topic, queue_id, queue_offset, max_units):
        return self.units[queue_offset:queue_offset + max_units].copy()


@given(data=st.data(),
       sizes=st.lists(st.integers(MIN_RECORD, 700), min_size=1, max_size=150),
       tags=st.lists(st.sampled_from(TAGS), min_size=150, max_size=150),
       max_msg_nums=st.integers(1, 70),
       expression=st.sampled_from(["*", "A", "A || C", "Z"]),
       max_total=st.one_of(st.none(), st.integers(0, 20_000)),
       segment_size=st.sampled_from([1 << 20, 9000, 2500]),
       decode=st.sampled_from([False, "view"]),
       backend=st.sampled_from([FakeFileQueues, FakeOtherQueues]))
def test_get_message_matches_the_sequential_loop(data, sizes, tags, max_msg_nums, expression,
                                                 max_total, segment_size, decode, backend):
    from store.commitlog.read_path import get_message

    phys = np.cumsum([0] + sizes[:-1])
    if data.draw(st.booleans(), label="shuffled"):   # units out of commit log order
        order = data.draw(st.permutations(range(len(sizes))), label="order")
        phys = phys[order]
        sizes = [sizes[i] for i in order]
    units = np.zeros(len(sizes), dtype=CQ_UNIT_DTYPE)
    units["phy_offset"] = phys
    units["size"] = sizes
    units["tags_code"] = [java_string_hash(t) for t in tags[:len(sizes)]]
    total = int(phys.max()) + sizes[int(np.argmax(phys))]
    log_bytes = _with_records((np.arange(total + data.draw(st.integers(0, 50), label="tail")) % 251)
                              .astype(np.uint8).tobytes(), units)
    segments = -(-len(log_bytes) // segment_size)
    removed = data.draw(st.sets(st.integers(0, segments - 1), max_size=1), label="removed")
    log = FakeCommitLog(log_bytes, segment_size, removed)
    in_memory_bytes = data.draw(st.sampled_from([0, 10**12, len(log_bytes) // 2]), label="mem")
    limits = TransferLimits(max_transfer_bytes_in_memory=data.draw(st.sampled_from([4096, 40_000])),
                            max_transfer_count_in_memory=data.draw(st.sampled_from([32, 5])),
                            max_transfer_bytes_in_disk=1500, max_transfer_count_in_disk=8,
                            access_message_in_memory_max_ratio=100,
                            physical_memory_bytes=in_memory_bytes)
    queue_offset = data.draw(st.integers(0, len(sizes) - 1), label="queue_offset")
    tag_filter = TagFilter.parse(expression)
    got = get_message(log, backend(units), "T", 0, queue_offset, max_msg_nums,
                      tag_filter=tag_filter, limits=limits, known_queue=True,
                      units_per_cq_file=1000, max_total_msg_size=max_total, decode=decode)

    # The reference: RocketMQ's loop over its window of units (maxFilterMessageCount bytes; an
    # unfiltered pull too: the loop goes on past unreadable units, 4.9.7 getMessage).
    window = max(16000, max_msg_nums * 20) // 20
    expected = _scan_sequentially(log, units[queue_offset:queue_offset + window], queue_offset,
                                  max_msg_nums, tag_filter, limits, max_total, 0, len(sizes),
                                  False, len(log_bytes), in_memory_bytes)
    assert got.status == expected.status
    assert got.next_begin_offset == expected.next_begin_offset
    assert (got.min_offset, got.max_offset) == (0, len(sizes))
    assert [bytes(m) for m in got.messages] == expected.messages
    if decode == "view":
        assert all(isinstance(m, memoryview) for m in got.messages)


def test_get_message_statuses_around_the_window():
    from store.api import GetMessageStatus
    from store.commitlog.read_path import get_message

    units = np.zeros(3, dtype=CQ_UNIT_DTYPE)
    units["phy_offset"] = [0, 100, 200]
    units["size"] = 100
    log_bytes = _with_records(bytes(300), units, queue_id=1)
    log = FakeCommitLog(log_bytes, 1 << 20)
    limits = TransferLimits(physical_memory_bytes=1 << 30)
    asked = []

    def known(topic, queue_id):
        asked.append((topic, queue_id))
        return False

    def pull(queues, offset, known_queue=known):
        return get_message(log, queues, "T", 1, offset, 32, tag_filter=TagFilter.parse(None),
                           limits=limits, known_queue=known_queue, units_per_cq_file=100,
                           decode=False)

    for queues in (FakeFileQueues(units), FakeOtherQueues(units)):
        # A queue with units is known without asking.
        assert pull(queues, 0).status is GetMessageStatus.FOUND
        assert pull(queues, 3).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        badly = pull(queues, 9)
        assert (badly.status, badly.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 3)
        assert [bytes(m) for m in pull(queues, 1).messages] == [log_bytes[100:200],
                                                               log_bytes[200:300]]
    assert asked == [] or all(a == ("T", 1) for a in asked)
    empty = FakeFileQueues(units[:0])
    assert pull(empty, 0).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert pull(empty, 0, known_queue=lambda t, q: True).status is \
        GetMessageStatus.NO_MESSAGE_IN_QUEUE
    assert pull(empty, 0, known_queue=True).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE


def test_tag_filter_parse_is_cached_and_unchanged():
    first = TagFilter.parse("A || C")
    assert TagFilter.parse("A || C") is first
    assert first.hash_codes == frozenset({java_string_hash("A"), java_string_hash("C")})
    assert TagFilter.parse(None).hash_codes is None and TagFilter.parse(" * ").hash_codes is None


def _units_of(sizes, tags):
    units = np.zeros(len(sizes), dtype=CQ_UNIT_DTYPE)
    units["phy_offset"] = np.cumsum([0] + list(sizes[:-1]))
    units["size"] = sizes
    units["tags_code"] = [java_string_hash(t) for t in tags]
    return units


@pytest.mark.parametrize("late", [100, 115, 116, 117, 127, 128, 129, 400])
@pytest.mark.parametrize("memory_line", [None, 116, 117, 128, 129, 130, 500])
def test_a_filtered_pull_reads_past_its_probe_only_when_needed(late, memory_line):
    """A filtered pull first reads 4 x 32 + 1 units: matches and the in-memory line at or near its
    end must give what the whole window gives."""
    from store.commitlog.read_path import get_message

    tags = ["B"] * 600
    for index in list(range(0, 38, 2)) + list(range(late, late + 13)):   # 19 early, 13 late
        tags[index] = "A"
    units = _units_of([100] * 600, tags)
    log_bytes = _with_records((np.arange(60_000) % 251).astype(np.uint8).tobytes(), units)
    log = FakeCommitLog(log_bytes, 1 << 20)
    # Units at or past `memory_line` are in memory (up to 32 taken), those before on disk (20).
    in_memory = 10**12 if memory_line is None else len(log_bytes) - memory_line * 100
    limits = TransferLimits(max_transfer_bytes_in_disk=10**6, max_transfer_count_in_disk=20,
                            max_transfer_count_in_memory=32,
                            access_message_in_memory_max_ratio=100,
                            physical_memory_bytes=in_memory)
    for backend in (FakeFileQueues, FakeOtherQueues):
        got = get_message(log, backend(units), "T", 0, 0, 32, tag_filter=TagFilter.parse("A"),
                          limits=limits, known_queue=True, units_per_cq_file=1000, decode=False)
        expected = _scan_sequentially(log, units[:800], 0, 32, TagFilter.parse("A"), limits,
                                      None, 0, 600, False, len(log_bytes), in_memory)
        assert (got.status, got.next_begin_offset) == (expected.status,
                                                       expected.next_begin_offset)
        assert [bytes(m) for m in got.messages] == expected.messages
