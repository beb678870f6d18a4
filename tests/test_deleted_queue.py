"""One consume-queue directory deleted while the others are intact, on copies of every real fixture.

The expectation is derived here from RocketMQ's own rules (tags rocketmq-all-4.9.7 and
rocketmq-all-5.3.3) applied to the real store's answers in read-dump.json (every queue's units and
`maxPhysicOffset`), not from the engine:

- after a clean shutdown, 4.9.7's `DefaultMessageStore.start` reputs from the largest
  `ConsumeQueue.getMaxPhysicOffset` (a queue's last unit end) of the queues left, at least
  `commitLog.getMinOffset()`: the deleted queue gets back its units whose record starts at or after it;
  5.3.3's `CommitLog.recoverNormally` dispatches only records with `getCommitLogOffset() >
  maxPhyOffsetOfConsumeQueue` and `start` reputs from the log's end (`getConfirmOffset`), and
  `DLedgerCommitLog.dledgerRecoverNormally` dispatches nothing;
- after a crash, `recoverAbnormally` re-dispatches every record from the segment
  `isMappedFileMatchedRecover` picks: the last one whose first record's store time is <=
  `StoreCheckpoint.getMinTimestamp()` (min(physic, logics) - 3 s, at least 0), else the first;
- a queue re-dispatched from its k-th record gets `ConsumeQueue.fillPreBlank` units (phy 0, size
  Integer.MAX_VALUE) from its file's start and minLogicOffset = k; 5.3.3's `correctMinOffset` keeps
  it (the unit at k is backed by the log), 4.9.7's runs linearly over the first file from byte 0 at
  `start`'s `recoverTopicQueueTable` and stops at the first pre-fill unit (0 >= the log's min
  offset 0): min goes back to that file's start, and a pull there meets an unreadable unit
  (`getMessage` MESSAGE_WAS_REMOVING, `rollNextFile(0)` skips units of the first segment).

Which segment a crash re-dispatches from is computed here from the checkpoint and the segments'
first records as `isMappedFileMatchedRecover` does (messageIndexSafe off, the fixtures' setting).
"""

from __future__ import annotations

import os
import shutil

import pytest

from store import MessageStore
from store.api import GetMessageStatus
from store.check.run import check_store
from tests.fixtures_util import (copy_store, dump_message_body, fixture_dirs, fixture_id, load_dump,
                                 store_config)

INT_MAX = 0x7FFFFFFF
FIXTURES = [f for f in fixture_dirs() if os.path.basename(os.path.dirname(f)) in
            ("rocketmq-4.9.7", "rocketmq-5.3.3")]


def _queue_dirs(root: str) -> list[tuple[str, int]]:
    base = os.path.join(root, "consumequeue")
    return sorted((topic, int(q)) for topic in os.listdir(base)
                  for q in os.listdir(os.path.join(base, topic)) if q.lstrip("-").isdigit())


def _victims(fixture: str, root: str) -> dict[str, tuple[str, int]]:
    """The queue holding the log's newest unit, and the first queue by name."""
    dump = load_dump(fixture)
    on_disk = set(_queue_dirs(root))
    queues = [q for q in dump["queues"] if (q["topic"], q["queueId"]) in on_disk and q["cq"]]
    newest = max(queues, key=lambda q: q["cq"][-1]["commitLogOffset"])
    first = min(queues, key=lambda q: (q["topic"], q["queueId"]))
    return {"newest": (newest["topic"], newest["queueId"]),
            "first": (first["topic"], first["queueId"])}


def _abnormal_start(fixture: str, root: str, dump: dict) -> int:
    """`CommitLog.recoverAbnormally`'s first segment (see the module docstring)."""
    with open(os.path.join(root, "checkpoint"), "rb") as handle:
        head = handle.read(16)
    physic, logics = int.from_bytes(head[:8], "big"), int.from_bytes(head[8:16], "big")
    min_timestamp = max(0, min(physic, logics) - 3000)
    segment = int(_properties(fixture)["mappedFileSizeCommitLog"])
    first_of_segment: dict[int, tuple[int, int]] = {}
    for queue in dump["queues"]:
        for message in queue["messages"]:
            start = message["commitLogOffset"] // segment * segment
            known = first_of_segment.get(start)
            if known is None or message["commitLogOffset"] < known[0]:
                first_of_segment[start] = (message["commitLogOffset"], message["storeTimestamp"])
    for start in sorted(first_of_segment, reverse=True):
        phy, store_timestamp = first_of_segment[start]
        if phy == start and 0 < store_timestamp <= min_timestamp:
            return start
    return 0


def _properties(fixture: str) -> dict:
    values = {}
    with open(os.path.join(fixture, "store.properties"), encoding="utf-8") as handle:
        for line in handle:
            if "=" in line and not line.startswith("#"):
                key, value = line.strip().split("=", 1)
                values[key] = value
    return values


def _expected(fixture: str, root: str, victim: tuple[str, int]) -> dict:
    dump = load_dump(fixture)
    version = os.path.basename(os.path.dirname(fixture))
    crashed = os.path.exists(os.path.join(root, "abort"))
    dledger = not os.path.isdir(os.path.join(root, "commitlog"))
    [queue] = [q for q in dump["queues"] if (q["topic"], q["queueId"]) == victim]
    others = [q["maxPhysicOffset"] for q in dump["queues"]
              if (q["topic"], q["queueId"]) != victim and q["cq"]]
    max_phy = max(others, default=-1)
    log_min = dump["commitLog"]["minPhyOffset"]
    if crashed:
        start = _abnormal_start(fixture, root, dump)
        kept = [u for u in queue["cq"] if u["commitLogOffset"] >= start]
    elif version == "rocketmq-4.9.7":
        kept = [u for u in queue["cq"] if u["commitLogOffset"] >= max(max_phy, log_min)]
    elif dledger:
        kept = []
    else:
        kept = [u for u in queue["cq"] if u["commitLogOffset"] > max_phy]
    if not kept:
        return {"min": 0, "max": 0, "kept": [], "prefill": 0, "queue": queue}
    first = kept[0]["queueOffset"]
    per_file = int(_properties(fixture).get("mappedFileSizeConsumeQueue", 6_000_000)) // 20
    file_start = first // per_file * per_file
    low = first
    if version == "rocketmq-4.9.7" and first != file_start and log_min == 0:
        low = file_start               # correctMinOffset stops at the first pre-fill unit
    return {"min": low, "max": kept[-1]["queueOffset"] + 1, "kept": kept,
            "prefill": first - file_start, "queue": queue}


def _prefill_pull(kept: list, offset: int, per_file: int, segment_size: int, maximum: int):
    """4.9.7's getMessage of one message at `offset` below the first real unit: pre-fill units
    are unreadable (MESSAGE_WAS_REMOVING, then skip to rollNextFile(0) = the second segment)."""
    window_end = min((offset // per_file + 1) * per_file, maximum)
    for unit in kept:
        if unit["queueOffset"] >= window_end:
            break
        if unit["commitLogOffset"] >= segment_size:
            return GetMessageStatus.FOUND, unit["queueOffset"] + 1, unit
    return GetMessageStatus.MESSAGE_WAS_REMOVING, window_end, None


@pytest.mark.parametrize("which", ["newest", "first"])
@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_deleted_queue_comes_back_as_rocketmq_restores_it(tmp_path, fixture, which):
    root = copy_store(fixture, tmp_path)
    victim = _victims(fixture, root)[which]
    topic, queue_id = victim
    shutil.rmtree(os.path.join(root, "consumequeue", topic, str(queue_id)))
    expected = _expected(fixture, root, victim)
    dump = load_dump(fixture)
    properties = _properties(fixture)
    per_file = int(properties["mappedFileSizeConsumeQueue"]) // 20
    segment_size = int(properties["mappedFileSizeCommitLog"])
    by_offset = {m["queueOffset"]: m for m in expected["queue"]["messages"]}
    with MessageStore.open(store_config(fixture, root)) as store:
        assert store.get_min_offset_in_queue(topic, queue_id) == expected["min"]
        assert store.get_max_offset_in_queue(topic, queue_id) == expected["max"]
        for queue in dump["queues"]:                  # the other queues are untouched
            if (queue["topic"], queue["queueId"]) != victim:
                key = (queue["topic"], queue["queueId"])
                assert (store.get_min_offset_in_queue(*key),
                        store.get_max_offset_in_queue(*key)) == \
                    (queue["minOffset"], queue["maxOffset"]), key
        for unit in expected["kept"]:
            got = store.get_message("g", topic, queue_id, unit["queueOffset"], 1)
            assert got.status == GetMessageStatus.FOUND, (unit, got.status)
            [message] = got.messages
            assert message.commit_log_offset == unit["commitLogOffset"]
            assert message.body == dump_message_body(by_offset[unit["queueOffset"]])
        for offset in range(expected["min"], expected["max"] - len(expected["kept"])):
            status, next_offset, unit = _prefill_pull(expected["kept"], offset, per_file,
                                                      segment_size, expected["max"])
            got = store.get_message("g", topic, queue_id, offset, 1)
            assert (got.status, got.next_begin_offset) == (status, next_offset), offset
            assert [m.commit_log_offset for m in got.messages] == \
                ([unit["commitLogOffset"]] if unit else [])
        if expected["min"] > 0:
            got = store.get_message("g", topic, queue_id, expected["min"] - 1, 1)
            assert got.status == GetMessageStatus.OFFSET_TOO_SMALL
        if not expected["kept"]:
            got = store.get_message("g", topic, queue_id, 0, 1)
            assert got.messages == [] and got.max_offset == 0
        lost = [u for u in expected["queue"]["cq"] if u not in expected["kept"]]
        report = store.recovery_report
        assert report.rebuilt_queues == []
        findings = check_store(store)
    named = [f for f in findings if f.component == "consumequeue" and
             f"{topic}/{queue_id}" in f.message and "missing" in f.message]
    if lost:
        first_kept = expected["kept"][0]["queueOffset"] if expected["kept"] else None
        [finding] = named
        assert f"units {lost[0]['queueOffset']}..{lost[-1]['queueOffset']} of {topic}/{queue_id} " \
               f"are missing although the commit log still holds them" in finding.message
        assert finding.repair == f"rmqstore recover --rebuild-cq {topic}/{queue_id} --store {root}"
        assert finding.path == os.path.join(root, "consumequeue", topic, str(queue_id))
        assert finding.on_restart and finding.severity in ("error", "warning")
        assert first_kept is None or lost[-1]["queueOffset"] == first_kept - 1
    else:
        assert named == []


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_rebuild_cq_restores_every_unit(tmp_path, fixture):
    """`MessageStore.open(..., rebuild_queues=...)` (what `rmqstore recover --rebuild-cq` runs):
    the queue comes back with every unit the real store had."""
    root = copy_store(fixture, tmp_path)
    victim = _victims(fixture, root)["newest"]
    queue_dir = os.path.join(root, "consumequeue", victim[0], str(victim[1]))
    shutil.rmtree(queue_dir)
    [queue] = [q for q in load_dump(fixture)["queues"] if (q["topic"], q["queueId"]) == victim]
    with MessageStore.open(store_config(fixture, root), rebuild_queues=[victim]) as store:
        assert store.recovery_report.rebuilt_queues == [victim]
        assert store.get_min_offset_in_queue(*victim) == queue["minOffset"]
        assert store.get_max_offset_in_queue(*victim) == queue["maxOffset"]
        units = [store.consume_queues.get_unit(*victim, o) for o in range(queue["maxOffset"])]
        assert [(u.phy_offset, u.size, u.tags_code) for u in units] == \
            [(u["commitLogOffset"], u["size"], u["tagsCode"]) for u in queue["cq"]]
        findings = check_store(store)
    assert not [f for f in findings if "missing although" in f.message]


def test_cli_check_then_recover_rebuild_cq(capsys, tmp_path):
    """`rmqstore check` names the missing units and the command; `recover --rebuild-cq` (the
    command it names) brings them back, and check is clean of them afterwards."""
    import json

    from store.cli import main
    fixture = [f for f in FIXTURES if fixture_id(f) == "rocketmq-4.9.7/rolled-64k"][0]
    root = copy_store(fixture, tmp_path)
    config = os.path.join(fixture, "store.properties")
    victim = _victims(fixture, root)["newest"]
    label = f"{victim[0]}/{victim[1]}"
    shutil.rmtree(os.path.join(root, "consumequeue", victim[0], str(victim[1])))
    with MessageStore.open(store_config(fixture, root)):
        pass                                       # the restart RocketMQ would do
    assert main(["check", "--store", root, "--config", config, "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    [finding] = [f for f in findings if "missing although" in f["message"]]
    assert finding["severity"] == "error" and label in finding["message"]
    command = finding["repair"].split()
    assert command[:4] == ["rmqstore", "recover", "--rebuild-cq", label]
    assert main(command[1:]) == 0
    out = capsys.readouterr().out
    assert f"consume queue {label} asked to rebuild (--rebuild-cq)" in out
    [queue] = [q for q in load_dump(fixture)["queues"] if (q["topic"], q["queueId"]) == victim]
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        assert store.get_min_offset_in_queue(*victim) == queue["minOffset"]
        assert store.get_max_offset_in_queue(*victim) == queue["maxOffset"]
    assert main(["check", "--store", root, "--config", config, "--json"]) == 0
    assert main(["recover", "--rebuild-cq", "no-slash", "--store", root, "--config", config]) != 0



def test_rebuild_cq_refuses_a_rocksdb_store(tmp_path):
    from store.errors import StoreError
    from store.tools.repair import repair_store
    from tests.engine_util import small_config
    config = small_config(tmp_path / "s", "defaultRocksDB")
    with pytest.raises(StoreError, match="--rebuild-cq rebuilds file consume queues"):
        repair_store(config, rebuild_queues=[("T", 0)])
