"""Golden tests: our engine opens every real RocketMQ fixture and gives the real store's answers.

`read-dump.json` holds what RocketMQ itself answered after its own recovery of the same directory.
Each fixture is opened twice: hosted (on a copy, with recovery) and read-only (in place, proving that
nothing on disk changes).
"""

from __future__ import annotations

import os

import pytest

from store import GetMessageStatus, MessageStore
from tests.fixtures_util import (copy_store, dump_message_body, fixture_dirs, fixture_id, load_dump,
                                 single_cq_file, store_config, tree_fingerprint)

FIXTURES = fixture_dirs()
FOREVER = 2**63 - 1


@pytest.fixture(params=FIXTURES, ids=[fixture_id(f) for f in FIXTURES], scope="module")
def opened(request, tmp_path_factory):
    fixture = request.param
    root = copy_store(fixture, str(tmp_path_factory.mktemp("golden")))
    store = MessageStore.open(store_config(fixture, root))
    yield fixture, load_dump(fixture), store, root
    store.close()


def _pull_all(store, topic, queue_id, start):
    messages = []
    offset = start
    for _ in range(100_000):
        result = store.get_message("golden", topic, queue_id, offset, 32)
        if result.status is not GetMessageStatus.FOUND:
            break
        messages.extend(result.messages)
        offset = result.next_begin_offset
    return messages


def assert_message_equal(got, want):
    assert got.topic == want["topic"]
    assert got.queue_id == want["queueId"]
    assert got.queue_offset == want["queueOffset"]
    assert got.commit_log_offset == want["commitLogOffset"]
    assert got.store_size == want["storeSize"]
    assert got.body_crc == want["bodyCRC"]
    assert got.flag == want["flag"]
    assert got.sys_flag == want["sysFlag"]
    assert got.born_timestamp == want["bornTimestamp"]
    assert got.born_host == want["bornHost"]
    assert got.store_timestamp == want["storeTimestamp"]
    assert got.store_host == want["storeHost"]
    assert got.reconsume_times == want["reconsumeTimes"]
    assert got.prepared_transaction_offset == want["preparedTransactionOffset"]
    assert got.msg_id == want["msgId"]
    assert got.uniq_key == want.get("uniqKey")
    assert got.tags == want.get("tags")
    assert got.keys == want.get("keys")
    assert got.properties == want["properties"]
    assert got.properties_raw == want["propertiesString"].encode("utf-8")
    assert got.body == dump_message_body(want)


def test_commit_log_offsets(opened):
    _fixture, dump, store, _root = opened
    pointers = store.pointers()
    assert pointers["min_phy_offset"] == dump["commitLog"]["minPhyOffset"]
    assert pointers["max_phy_offset"] == dump["commitLog"]["maxPhyOffset"]
    assert store.confirm_offset() == dump["commitLog"]["confirmOffset"]
    assert store.get_earliest_message_time() == dump["commitLog"]["earliestMessageTime"]
    assert store.dispatch_behind_bytes() == dump["commitLog"]["dispatchBehindBytes"]
    assert store.total_messages() == dump["totalMessages"]


def test_checkpoint_after_recovery(opened):
    _fixture, dump, store, _root = opened
    want = dump["checkpointAfterRecovery"]
    checkpoint = store.checkpoint
    assert checkpoint.physic_msg_timestamp == want["physicMsgTimestamp"]
    assert checkpoint.logics_msg_timestamp == want["logicsMsgTimestamp"]
    assert checkpoint.index_msg_timestamp == want["indexMsgTimestamp"]
    assert checkpoint.min_timestamp == want["minTimestamp"]
    assert checkpoint.min_timestamp_index == want["minTimestampIndex"]
    if "confirmPhyOffset" in want:
        assert checkpoint.confirm_phy_offset == want["confirmPhyOffset"]


def test_queues_units_and_messages(opened):
    _fixture, dump, store, _root = opened
    assert sorted(store.queues()) == sorted((q["topic"], q["queueId"]) for q in dump["queues"])
    for queue in dump["queues"]:
        topic, queue_id = queue["topic"], queue["queueId"]
        assert store.get_min_offset_in_queue(topic, queue_id) == queue["minOffset"], topic
        assert store.get_max_offset_in_queue(topic, queue_id) == queue["maxOffset"], topic
        assert store.consume_queues.get_max_phy_end(topic, queue_id) == queue["maxPhysicOffset"]
        assert store.get_earliest_message_time(topic, queue_id) == queue["earliestMessageTime"]
        for unit in queue["cq"]:
            got = store.consume_queues.get_unit(topic, queue_id, unit["queueOffset"])
            assert got is not None, unit
            assert (got.phy_offset, got.size, got.tags_code) == (
                unit["commitLogOffset"], unit["size"], unit["tagsCode"])
        pulled = _pull_all(store, topic, queue_id, queue["minOffset"])
        assert len(pulled) == len(queue["messages"])
        for got, want in zip(pulled, queue["messages"]):
            assert_message_equal(got, want)
            raw = store.commit_log.read_record(got.commit_log_offset)
            import base64
            assert raw == base64.b64decode(want["rawBase64"])


def _set_cq_mtimes(root, queue, dump_queue, pick):
    """Give each CQ file of a 4.9 queue an mtime the writer could have produced: between the store
    time of the file's first unit (`pick="low"`) and that of its last unit plus a second of dispatch
    lag (`pick="high"`). A git checkout (and our copy) lost the real ones."""
    times = {m["queueOffset"]: m["storeTimestamp"] for m in dump_queue["messages"]}
    units_per_file = None
    directory = os.path.join(root, "consumequeue", queue[0], str(queue[1]))
    names = sorted(os.listdir(directory))
    for name in names:
        size = os.path.getsize(os.path.join(directory, name))
        units_per_file = units_per_file or size // 20
        first = int(name) // 20
        inside = [times[o] for o in range(first, first + units_per_file) if o in times]
        if not inside:
            continue
        stamp_ms = min(inside) if pick == "low" else max(inside) + 1000
        os.utime(os.path.join(directory, name), ns=(stamp_ms * 1_000_000, stamp_ms * 1_000_000))


def test_time_lookups(opened):
    """Every time lookup whose answer does not depend on the CQ files' lost mtimes (4.9.7 picks the
    file by mtime, spec §10.3): it is asked with the earliest and with the latest mtimes the writer
    could have left, and checked when both give the same answer, which must be the real store's."""
    _fixture, dump, store, root = opened
    checked = skipped = 0
    for queue in dump["queues"]:
        topic, queue_id = queue["topic"], queue["queueId"]
        if not queue["offsetInQueueByTime"]:
            continue
        depends_on_mtime = store.style != "5.x" and not single_cq_file(root, topic, queue_id)
        answers = {}
        for pick in (("low", "high") if depends_on_mtime else ("any",)):
            if pick != "any":
                _set_cq_mtimes(root, (topic, queue_id), queue, pick)
            answers[pick] = [store.get_offset_in_queue_by_time(topic, queue_id, probe["timestamp"])
                             for probe in queue["offsetInQueueByTime"]]
        for i, probe in enumerate(queue["offsetInQueueByTime"]):
            got = {answer[i] for answer in answers.values()}
            if len(got) > 1:
                skipped += 1       # the lost mtimes decide this one
                continue
            assert got == {probe["offset"]}, (topic, queue_id, probe)
            checked += 1
    probes = sum(len(q["offsetInQueueByTime"]) for q in dump["queues"])
    print(f"{_fixture}: {checked} time lookups checked, {skipped} depend on the lost mtimes")
    assert checked > 0 or probes == 0, "no time lookup checked"
    assert checked >= skipped, f"only {checked} of {probes} time lookups were independent of mtimes"


def true_hits_of(dump, query) -> list[int]:
    """The real store's hits for a key query with hash collisions filtered out (as our engine does)."""
    return sorted(hit["commitLogOffset"] for hit in query["hits"]
                  if query["key"] in (hit.get("keys") or "").split(" ")
                  or hit.get("uniqKey") == query["key"]
                  or _has_uniq(dump, hit["commitLogOffset"], query["key"]))


def test_key_queries(opened):
    _fixture, dump, store, _root = opened
    assert dump["queries"], "the fixture has no key queries to check"
    for query in dump["queries"]:
        result = store.query_message(query["topic"], query["key"], query["maxNum"], 0, FOREVER)
        true_hits = true_hits_of(dump, query)
        assert true_hits, f"the real store found nothing for {query['key']!r}"
        assert sorted(m.commit_log_offset for m in result.messages) == true_hits, query["key"]
        assert result.index_last_update_timestamp == query["indexLastUpdateTimestamp"]
        assert result.index_last_update_phy_offset == query["indexLastUpdatePhyoffset"]


_UNIQ = {}


def _has_uniq(dump, phy_offset, key):
    table = _UNIQ.get(id(dump))
    if table is None:
        table = {m["commitLogOffset"]: m.get("uniqKey") for q in dump["queues"]
                 for m in q["messages"]}
        _UNIQ[id(dump)] = table
    return table.get(phy_offset) == key


def test_consumer_offsets(opened):
    _fixture, dump, store, _root = opened
    table = store.consumer_offsets.table()
    want = {name: {int(q): off for q, off in queues.items()}
            for name, queues in dump["consumerOffsets"].items()}
    assert table == want


@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_read_only_open_changes_nothing_and_answers_the_same(fixture, tmp_path):
    # Read-only works in place: on a copy whose mtimes we control, to compare byte and mtime.
    root = copy_store(fixture, str(tmp_path))
    before = tree_fingerprint(root)
    dump = load_dump(fixture)
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == dump["commitLog"]["maxPhyOffset"]
        for queue in dump["queues"]:
            pulled = _pull_all(store, queue["topic"], queue["queueId"], queue["minOffset"])
            assert [m.commit_log_offset for m in pulled] == \
                [m["commitLogOffset"] for m in queue["messages"]]
        for query in dump["queries"][:50]:
            store.query_message(query["topic"], query["key"], 64, 0, FOREVER)
        store.check()
        store.refresh()
    assert tree_fingerprint(root) == before
    assert not os.path.exists(os.path.join(root, "abort")) or os.path.exists(
        os.path.join(fixture, "store", "abort"))
