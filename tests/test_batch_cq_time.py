"""Time lookups on a [5.x] batch queue: `BatchConsumeQueue.getOffsetInQueueByTime` (rocketmq-all-5.3.3)
and the lookups that go through `BatchConsumeQueue.get` (store time of a message offset, earliest
message time, commit-log offset of a message offset).

The store: ten records of batch topic B (files of 4 units: 4 + 4 + 2) with store times T0 + the
`TIMES` below (units 5 and 6 share a time). The expectations were traced by hand through 5.3.3's
file choice (last file, else `searchTimeFromCache`'s floor) and its `binarySearchRight`, including
its quirks: a time between two files answers the earlier file's last unit, and UPPER for a time
between two units answers -1 (then the queue's min) or the next unit depending on the probes.
"""

from __future__ import annotations

import pytest

from store import Message, MessageStore
from store.consumequeue.batch.by_time import binary_search_right
from store.meta.topic_config import TopicConfig
from tests.engine_util import FakeClock, small_config

T0 = 1_700_000_000_000
COUNTS = [3, 1, 5, 2, 4, 1, 2, 3, 1, 2]
TIMES = [0, 10, 20, 30, 40, 50, 50, 70, 80, 90]
BASES = [sum(COUNTS[:i]) for i in range(len(COUNTS))]
TOTAL = sum(COUNTS)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    clock = FakeClock(T0)
    config = small_config(tmp_path_factory.mktemp("bt") / "s", store_format="5.x",
                          mapper_file_size_batch_consume_queue=4 * 46)
    store = MessageStore.open(config, start_services=False, clock_ms=clock)
    store._parts.topics.put_topic(TopicConfig("B", attributes={"queue.type": "BatchCQ"}))
    for i, (count, offset_ms) in enumerate(zip(COUNTS, TIMES)):
        clock.now = T0 + offset_ms
        result = store.put_message(Message("B", b"r%d" % i, sys_flag=0x80,
                                           properties={"INNER_NUM": str(count)}))
        assert result.ok and result.store_timestamp == T0 + offset_ms
    store.services.reput.do_reput()
    assert len(store._batch_queue("B", 0).mapped_files.files) == 3
    yield store
    store.close()


@pytest.mark.parametrize("offset_ms, lower, upper", [
    (-5, BASES[0], BASES[0]),       # before the first: the first file, its first unit (the min)
    (0, BASES[0], BASES[0]),
    (20, BASES[2], BASES[2]),       # exact hits in the first file
    (15, BASES[2], 0),              # UPPER between units 1 and 2: -1, clamped to the min
    (25, BASES[3], BASES[3]),       # UPPER between units 2 and 3: the probes end on unit 3
    (30, BASES[3], BASES[3]),       # the first file's last time: its last unit
    (35, BASES[3], BASES[3]),       # between files: floor = the first file, time >= its last
    (40, BASES[4], BASES[4]),
    (50, BASES[5], BASES[6]),       # equal times: LOWER the lowest, UPPER the highest
    (55, BASES[7], BASES[7]),
    (80, BASES[8], BASES[8]),       # the last file (its first time <= the time)
    (85, BASES[9], BASES[9]),
    (90, BASES[9], BASES[9]),
    (10_000, BASES[9], BASES[9]),   # after the last: the last unit's base, not the max
])
def test_offset_by_time(store, offset_ms, lower, upper):
    assert store.get_offset_in_queue_by_time("B", 0, T0 + offset_ms) == lower     # 5.x: LOWER
    assert store.get_offset_in_queue_by_time("B", 0, T0 + offset_ms, "lower") == lower
    assert store.get_offset_in_queue_by_time("B", 0, T0 + offset_ms, "upper") == upper


def test_boundary_nearest_is_not_a_batch_boundary(store):
    with pytest.raises(ValueError, match="batch consume queue"):
        store.get_offset_in_queue_by_time("B", 0, T0, "nearest")


def test_a_batch_topic_without_queue_answers_zero(store):
    assert store.get_offset_in_queue_by_time("B", 5, T0) == 0


@pytest.mark.parametrize("index", range(len(COUNTS)))
def test_store_time_and_commit_log_offset_of_every_message_offset(store, index):
    for queue_offset in range(BASES[index], BASES[index] + COUNTS[index]):
        assert store.get_message_store_timestamp("B", 0, queue_offset) == T0 + TIMES[index]
        phy = store.get_commit_log_offset_in_queue("B", 0, queue_offset)
        assert store.look_message_by_offset(phy).body == b"r%d" % index


def test_past_the_end_and_earliest(store):
    assert store.get_message_store_timestamp("B", 0, TOTAL) == -1
    assert store.get_commit_log_offset_in_queue("B", 0, TOTAL) == 0
    assert store.get_earliest_message_time("B", 0) == T0
    assert store.get_earliest_message_time("B", 7) == -1


def _units(times):
    """A buffer of 46-byte units carrying only store times (offset 20)."""
    buffer = bytearray(46 * len(times))
    for i, value in enumerate(times):
        buffer[46 * i + 20:46 * i + 28] = value.to_bytes(8, "big", signed=True)
    return bytes(buffer)


@pytest.mark.parametrize("times, target, boundary, expected", [
    ([0, 10, 20, 30], 15, "upper", -1),
    ([0, 10, 20, 30], 25, "upper", 3),
    ([0, 10, 20, 30], 15, "lower", 2),
    ([5], 5, "lower", 0),
    ([5], 6, "lower", -1),
    ([5, 5, 5, 5, 5], 5, "lower", 0),
    ([5, 5, 5, 5, 5], 5, "upper", 3),   # mid == left returns at once: not the last equal
    ([9, 1, 9, 1], 5, "lower", 2),      # not monotonic: whatever the probes meet
])
def test_binary_search_right(times, target, boundary, expected):
    index = binary_search_right(_units(times), 0, 46 * (len(times) - 1), target, boundary)
    assert index == (-1 if expected == -1 else 46 * expected)
