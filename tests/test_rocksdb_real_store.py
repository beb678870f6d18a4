"""The engine on a RocksDB consume queue written by the real RocketMQ 5.3.3 (`RocksDBMessageStore`,
tests/data/real-rocksdb/README.md): every queue's min and max offset, every unit (commit-log offset,
size, tags code) and store time equal to what the real store read back (`manifest.json`), pulls that
return each unit's record, a clean check, nothing written by a read-only open, and a hosted open that
appends to the real database and reads both old and new units back."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from store import Message, MessageStore, StoreConfig
from tests.fixtures_util import REPO_ROOT, tree_fingerprint

pytest.importorskip("rocksdict")

REAL = os.path.join(REPO_ROOT, "tests", "data", "real-rocksdb", "rocketmq-5.3.3")


@pytest.fixture
def real_copy(tmp_path):
    root = str(tmp_path / "store")
    shutil.copytree(os.path.join(REAL, "store"), root)
    with open(os.path.join(REAL, "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    config = StoreConfig.from_properties(os.path.join(REAL, "store.properties"), store_path_root_dir=root)
    return root, config, manifest


def _queues(manifest):
    for topic, queues in manifest["topics"].items():
        for queue_id, info in queues.items():
            yield topic, int(queue_id), info


def test_read_only_open_answers_as_the_real_store(real_copy):
    root, config, manifest = real_copy
    before = tree_fingerprint(root)
    checked = 0
    with MessageStore.open(config, read_only=True) as store:
        assert store.inspect.dispatch_state()["max_phy_offset"] == manifest["commitlog_max_offset"]
        for topic, queue_id, info in _queues(manifest):
            assert (store.get_min_offset_in_queue(topic, queue_id),
                    store.get_max_offset_in_queue(topic, queue_id)) == \
                (info["min_offset"], info["max_offset"]), (topic, queue_id)
            units = store.inspect.queue_units(topic, queue_id, 0, len(info["units"]) + 1)
            assert [(int(u["phy_offset"]), int(u["size"]), int(u["tags_code"])) for u in units] == \
                [(phy, size, tags) for _, phy, size, tags, _ in info["units"]], (topic, queue_id)
            for queue_offset, _, _, _, store_time in info["units"]:
                assert store.get_message_store_timestamp(topic, queue_id, queue_offset) == store_time
                checked += 1
    assert checked == sum(len(info["units"]) for _, _, info in _queues(manifest)) == 324
    assert tree_fingerprint(root) == before, "a read-only open wrote into the store"


def test_pulls_return_each_units_record(real_copy):
    _, config, manifest = real_copy
    with MessageStore.open(config, read_only=True) as store:
        for topic, queue_id, info in _queues(manifest):
            got, offset = [], info["min_offset"]
            while offset < info["max_offset"]:
                result = store.get_message("g", topic, queue_id, offset, 32)
                assert result.messages, (topic, queue_id, offset, result.status)
                got += [(m.queue_offset, m.commit_log_offset, m.store_size, m.store_timestamp)
                        for m in result.messages]
                offset = result.next_begin_offset
            assert got == [(q, phy, size, ts) for q, phy, size, _, ts in info["units"]]
            assert all(m.topic == topic for m in result.messages)


def test_check_finds_nothing_wrong(real_copy):
    _, config, _ = real_copy
    with MessageStore.open(config, read_only=True) as store:
        findings = store.check()
    assert [f for f in findings if f.severity in ("error", "warning")] == []


def test_hosted_open_appends_to_the_real_database(real_copy):
    _, config, manifest = real_copy
    info = manifest["topics"]["TopicA"]["1"]
    with MessageStore.open(config) as store:
        result = store.put_message(Message("TopicA", b"after the real store", queue_id=1, tags="TagZ"))
        assert result.ok and result.queue_offset == info["max_offset"]
        store.dispatch_pending()
    with MessageStore.open(config, read_only=True) as store:
        assert store.get_max_offset_in_queue("TopicA", 1) == info["max_offset"] + 1
        units = store.inspect.queue_units("TopicA", 1, 0, info["max_offset"] + 1)
        assert [int(u["phy_offset"]) for u in units[:-1]] == [u[1] for u in info["units"]]
        [last] = store.get_message("g", "TopicA", 1, info["max_offset"], 1).messages
        assert (last.body, last.tags) == (b"after the real store", "TagZ")


def test_a_damaged_table_file_is_named_and_nothing_is_written(real_copy, tmp_path, monkeypatch):
    """A flipped block of the real database's table file: a one-line error naming the store's own
    file and byte (not the read-only shadow copy's), no traceback, nothing written, no shadow left."""
    import glob
    import tempfile

    from store.errors import CorruptDataError
    root, config, _ = real_copy
    [table] = [p for p in glob.glob(os.path.join(root, "consumequeue", "*.sst"))
               if os.path.getsize(p) > 4096]
    with open(table, "r+b") as handle:
        data = bytearray(handle.read())
        for i in range(100, 400):
            data[i] ^= 0x5A
        handle.seek(0)
        handle.write(data)
    before = tree_fingerprint(root)
    # The shadow copy goes to a temp dir of this test's own, so other processes' shadows don't count.
    own_tmp = tmp_path / "own-tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    shadows = set(glob.glob(os.path.join(tempfile.gettempdir(), "rmq-cq-rocksdb-*")))
    assert shadows == set()
    with pytest.raises(CorruptDataError) as raised:
        MessageStore.open(config, read_only=True)
    assert raised.value.path == table and raised.value.position >= 0
    assert "RocksDB refuses the consume-queue database: Corruption" in str(raised.value)
    assert tree_fingerprint(root) == before
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "rmq-cq-rocksdb-*"))) == shadows
