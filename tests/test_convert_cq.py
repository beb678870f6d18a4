"""`rmqstore convert-cq`: files <-> RocksDB, verified, answers unchanged, nothing lost on failure."""

from __future__ import annotations

import os

import pytest

from store import MessageStore
from store.cli import main
from store.errors import ConfigError
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, store_config

FIXTURES = fixture_dirs()


@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_fixture_converted_to_rocksdb_and_back_answers_the_same(fixture, tmp_path):
    root = copy_store(fixture, str(tmp_path))
    dump = load_dump(fixture)
    properties = os.path.join(fixture, "store.properties")
    assert main(["convert-cq", "--store", root, "--config", properties, "--to", "rocksdb"]) == 0
    assert os.path.exists(os.path.join(root, "consumequeue", "CURRENT"))
    rocks = store_config(fixture, root, store_type="defaultRocksDB")
    with MessageStore.open(rocks, read_only=True) as store:
        for queue in dump["queues"]:
            topic, queue_id = queue["topic"], queue["queueId"]
            assert store.get_min_offset_in_queue(topic, queue_id) == queue["minOffset"]
            assert store.get_max_offset_in_queue(topic, queue_id) == queue["maxOffset"]
            for unit in queue["cq"]:
                got = store.consume_queues.get_unit(topic, queue_id, unit["queueOffset"])
                assert (got.phy_offset, got.size, got.tags_code) == (
                    unit["commitLogOffset"], unit["size"], unit["tagsCode"])
            if store.style == "5.x":
                for probe in queue["offsetInQueueByTime"]:
                    assert store.get_offset_in_queue_by_time(
                        topic, queue_id, probe["timestamp"]) == probe["offset"]
    # Opening with the wrong storeType is refused, not silently re-dispatched.
    with pytest.raises(ConfigError):
        MessageStore.open(store_config(fixture, root), read_only=True)
    os.rename(os.path.join(root, "consumequeue.default.bak"), str(tmp_path / "old-files"))
    assert main(["convert-cq", "--store", root, "--config", properties, "--to", "file"]) == 0
    for queue in dump["queues"]:
        rel = os.path.join(queue["topic"], str(queue["queueId"]))
        for name in os.listdir(os.path.join(fixture, "store", "consumequeue", rel)):
            with open(os.path.join(root, "consumequeue", rel, name), "rb") as ours, \
                    open(os.path.join(fixture, "store", "consumequeue", rel, name), "rb") as real:
                assert ours.read() == real.read(), f"{rel}/{name} changed by the round trip"


def test_converting_to_the_current_layout_is_refused_and_changes_nothing(tmp_path):
    fixture = FIXTURES[0]
    root = copy_store(fixture, str(tmp_path))
    before = sorted(os.listdir(root))
    code = main(["convert-cq", "--store", root, "--config",
                 os.path.join(fixture, "store.properties"), "--to", "file"])
    assert code == 2
    assert sorted(os.listdir(root)) == before
