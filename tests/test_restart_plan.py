"""store.inspect.restart_plan() on the real RocketMQ crash fixtures: what it says a restart does is
what the real broker did when it reopened them (read-dump.json: files before and after, the commit
log's max offset, each queue's max offset); on a torn tail and a cut record; and it writes nothing."""

from __future__ import annotations

import os

import pytest

from store.message_store import MessageStore
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, store_config, tree_fingerprint

CRASH = [f for f in fixture_dirs() if os.path.basename(f).startswith("crash")]
CLEAN = [f for f in fixture_dirs() if not os.path.basename(f).startswith("crash")]


def _plan(fixture: str, root: str):
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        return store.inspect.restart_plan()


@pytest.mark.parametrize("fixture", CRASH, ids=fixture_id)
def test_plan_is_what_the_real_broker_did(fixture, tmp_path):
    root = copy_store(fixture, tmp_path)
    before = tree_fingerprint(root)
    plan = _plan(fixture, root)
    assert tree_fingerprint(root) == before
    dump = load_dump(fixture)
    files_before = {f["path"] for f in dump["before"]["files"]}
    files_after = {f["path"] for f in dump["afterShutdown"]["files"]}
    removed = files_before - files_after
    assert plan.abort_present
    assert plan.process_offset == dump["commitLog"]["maxPhyOffset"]
    assert plan.write_end_offset > plan.process_offset       # 131,072 against 121,xxx: explained
    assert {f"commitlog/{f['file']}" for f in plan.files_deleted} == \
        {p for p in removed if p.startswith("commitlog/")}
    assert all(f["holds_data"] is False for f in plan.files_deleted)   # the preallocated segment
    assert {f"index/{f['file']}" for f in plan.index_files_dropped} == \
        {p for p in removed if p.startswith("index/")}
    cp = dump["before"]["checkpoint"]
    assert plan.min_timestamp_ms == max(0, min(cp["physicMsgTimestamp"], cp["logicsMsgTimestamp"]) - 3000)
    assert plan.start_phy_offset == 0 and plan.records_replayed == dump["totalMessages"]
    after = {(q["topic"], q["queueId"]): q["maxOffset"] for q in dump["queues"]}
    assert {(q.topic, q.queue_id): q.max_offset_after for q in plan.queues} == after
    assert plan.units_truncated == 0 and plan.truncated_bytes == 0


@pytest.mark.parametrize("fixture", CLEAN, ids=fixture_id)
def test_a_clean_store_has_nothing_to_plan(fixture, tmp_path):
    plan = _plan(fixture, copy_store(fixture, tmp_path))
    assert not plan.abort_present and plan.start_file is None and not plan.queues


def _crash_copy(tmp_path):
    fixture = [f for f in CRASH if fixture_id(f) == "rocketmq-4.9.7/crash-64k"][0]
    return fixture, copy_store(fixture, tmp_path)


def test_torn_tail_bytes_are_counted(tmp_path):
    fixture, root = _crash_copy(tmp_path)
    end = load_dump(fixture)["commitLog"]["maxPhyOffset"]
    segment = os.path.join(root, "commitlog", "00000000000000065536")
    with open(segment, "r+b") as handle:
        handle.seek(end - 65536 + 10)
        handle.write(b"\x01" * 90)          # a torn write: garbage after the last record
    plan = _plan(fixture, root)
    assert plan.process_offset == end and plan.truncated_bytes == 100


def test_a_broken_last_record_is_cut_with_its_unit(tmp_path):
    fixture, root = _crash_copy(tmp_path)
    dump = load_dump(fixture)
    last = max((unit["commitLogOffset"], q["topic"], q["queueId"], unit["size"])
               for q in dump["queues"] for unit in q["cq"])
    phy, topic, queue_id, size = last
    segment = os.path.join(root, "commitlog", f"{phy // 65536 * 65536:020d}")
    with open(segment, "r+b") as handle:
        handle.seek(phy % 65536 + 4)
        handle.write(b"\x00\x00\x00\x00")   # its magic code
    plan = _plan(fixture, root)
    assert plan.process_offset == phy and plan.records_replayed == dump["totalMessages"] - 1
    assert plan.truncated_bytes == size
    [changed] = plan.changed_queues
    assert (changed.topic, changed.queue_id, changed.units_truncated, changed.units_appended) == \
        (topic, queue_id, 1, 0)
    assert changed.max_offset_after == changed.max_offset_before - 1
