"""Config JSON files (spec §7): .bak protocol, consumer offsets, topics."""

from __future__ import annotations

import glob
import os

import pytest

from store.codec import fastjson
from store.errors import ConfigError, CorruptDataError, InvalidTopicError, ReadOnlyStoreError
from store.meta.config_files import (ConsumerOffsetManager, DataVersion, JsonConfigFile, java_hash_order)
from store.meta.topic_config import TopicConfig, TopicConfigManager
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, tree_fingerprint

FIXTURES = fixture_dirs()
CLOCK = lambda: 1700000000000  # noqa: E731


def style_of(fixture: str) -> str:
    return "4.9" if "4.9" in load_dump(fixture)["rocketmqVersion"] else "5.x"


def expected_offsets(fixture: str) -> dict:
    return {key: {int(q): o for q, o in queues.items()}
            for key, queues in load_dump(fixture)["consumerOffsets"].items()}


# ------------------------------------------------------------------------------------ JsonConfigFile

def test_load_missing_is_empty_and_writes_nothing(tmp_path):
    f = JsonConfigFile(tmp_path / "config" / "x.json", read_only=False)
    assert f.load() is None and f.source == "empty"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("main", [None, "", "{not json", '{"a":'])
def test_load_falls_back_to_bak(tmp_path, main):
    path = tmp_path / "x.json"
    if main is not None:
        path.write_text(main)
    (tmp_path / "x.json.bak").write_text('{\n\t"a":1\n}')
    before = tree_fingerprint(str(tmp_path))
    f = JsonConfigFile(path, read_only=False)
    assert f.load() == {"a": 1} and f.source == "bak" and f.warnings
    assert tree_fingerprint(str(tmp_path)) == before


def test_decode_rejection_falls_back_to_bak(tmp_path):
    (tmp_path / "x.json").write_text("[1]")
    (tmp_path / "x.json.bak").write_text("{}")

    def decode(obj):
        if not isinstance(obj, dict):
            raise CorruptDataError(None, 0, "not an object")
        return obj
    f = JsonConfigFile(tmp_path / "x.json", read_only=True)
    assert f.load(decode) == {} and f.source == "bak"


def test_corrupt_main_without_bak_starts_empty(tmp_path):
    (tmp_path / "x.json").write_text("{broken")
    f = JsonConfigFile(tmp_path / "x.json", read_only=True)
    assert f.load() is None and f.source == "empty" and "does not load" in f.warnings[0]


def test_corrupt_bak_raises_naming_bak(tmp_path):
    (tmp_path / "x.json").write_text("{broken")
    (tmp_path / "x.json.bak").write_text("{also broken")
    before = tree_fingerprint(str(tmp_path))
    with pytest.raises(CorruptDataError) as info:
        JsonConfigFile(tmp_path / "x.json", read_only=False).load()
    assert info.value.path.endswith("x.json.bak")
    assert tree_fingerprint(str(tmp_path)) == before


def test_non_utf8_main_falls_back(tmp_path):
    (tmp_path / "x.json").write_bytes(b'{"a":"\xff"}')
    f = JsonConfigFile(tmp_path / "x.json", read_only=True)
    assert f.load() is None and f.source == "empty"


def test_persist_keeps_previous_in_bak_and_leaves_no_tmp(tmp_path):
    f = JsonConfigFile(tmp_path / "config" / "x.json", read_only=False)
    f.persist("one")
    assert (tmp_path / "config" / "x.json").read_text() == "one"
    assert not (tmp_path / "config" / "x.json.bak").exists()
    f.persist("two")
    f.persist("three")
    assert (tmp_path / "config" / "x.json").read_text() == "three"
    assert (tmp_path / "config" / "x.json.bak").read_text() == "two"
    assert sorted(os.listdir(tmp_path / "config")) == ["x.json", "x.json.bak"]


def test_persist_read_only_raises(tmp_path):
    with pytest.raises(ReadOnlyStoreError):
        JsonConfigFile(tmp_path / "x.json", read_only=True).persist("{}")
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------------ consumer offsets

@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_golden_consumer_offsets_load(fixture):
    root = os.path.join(fixture, "store")
    before = tree_fingerprint(root)
    manager = ConsumerOffsetManager(os.path.join(root, "config"), read_only=True, style=style_of(fixture))
    assert manager.load() == expected_offsets(fixture)
    for key, queues in expected_offsets(fixture).items():
        topic, group = key.split("@", 1)
        for queue_id, offset in queues.items():
            assert manager.query_offset(group, topic, queue_id) == offset
    with pytest.raises(ReadOnlyStoreError):
        manager.commit_offset("g", "t", 0, 1)
    with pytest.raises(ReadOnlyStoreError):
        manager.persist()
    assert tree_fingerprint(root) == before


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_golden_consumer_offsets_persist_reproduces_text(fixture, tmp_path):
    text = load_dump(fixture)["before"].get("configFiles", {}).get("consumerOffset.json")
    if text is None:
        pytest.skip("no consumerOffset.json in this fixture")
    root = copy_store(fixture, str(tmp_path))
    config_dir = os.path.join(root, "config")
    manager = ConsumerOffsetManager(config_dir, read_only=False, style=style_of(fixture), clock_ms=CLOCK)
    manager.load()
    assert manager.encode() == text
    manager.persist()
    with open(os.path.join(config_dir, "consumerOffset.json"), encoding="utf-8") as f:
        assert f.read() == text
    with open(os.path.join(config_dir, "consumerOffset.json.bak"), encoding="utf-8") as f:
        assert f.read() == text
    auto = ConsumerOffsetManager(config_dir, read_only=True, style="auto")
    auto.load()
    assert auto.effective_style == style_of(fixture) and auto.encode() == text


def test_commit_query_persist_reload(tmp_path):
    manager = ConsumerOffsetManager(tmp_path / "config", read_only=False, clock_ms=CLOCK)
    assert manager.load() == {}
    assert manager.query_offset("G", "T", 0) == -1
    manager.commit_offset("G", "T", 1, 7)
    manager.commit_offset("G", "T", 0, 5)
    manager.commit_offset("G", "T", 1, 9)
    manager.commit_offset("H", "%RETRY%H", 0, 0)
    assert manager.query_offset("G", "T", 1) == 9 and manager.query_offset("G", "U", 1) == -1
    manager.persist()
    text = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert text == '{\n\t"offsetTable":{\n\t\t"T@G":{1:9,0:5\n\t\t},\n\t\t"%RETRY%H@H":{0:0\n\t\t}\n\t}\n}'
    again = ConsumerOffsetManager(tmp_path / "config", read_only=True)
    assert again.load() == {"T@G": {1: 9, 0: 5}, "%RETRY%H@H": {0: 0}}
    table = again.table()
    table["T@G"][1] = 0
    assert again.query_offset("G", "T", 1) == 9        # table() is a copy


def test_5x_fresh_manager_writes_data_version_and_group_topic_map(tmp_path):
    manager = ConsumerOffsetManager(tmp_path, read_only=False, style="5.x", clock_ms=CLOCK)
    manager.load()
    manager.commit_offset("CG_1", "TopicA", 0, 100)
    manager.commit_offset("CG_1", "TopicB", 1, 7)
    manager.commit_offset("CG_2", "TopicC", 0, 0)
    manager.commit_offset("CG_3@broadcast", "TopicD", 0, 1)   # broadcast keys are left out
    value = fastjson.loads(manager.encode())
    assert list(value) == ["dataVersion", "groupTopicMap", "offsetTable"]
    assert value["dataVersion"] == {"counter": 0, "stateVersion": 0, "timestamp": 1700000000000}
    # Java HashMap/HashSet order, as the 5.3.3 fixture shows it.
    assert value["groupTopicMap"] == {"CG_2": ["TopicC"], "CG_1": ["TopicB", "TopicA"]}
    assert list(value["groupTopicMap"]) == ["CG_2", "CG_1"]


def test_java_hash_order():
    assert java_hash_order(["CG_1", "CG_2", "CG_%RETRY"]) == ["CG_2", "CG_1", "CG_%RETRY"]
    assert java_hash_order(["TopicA", "TopicB"]) == ["TopicB", "TopicA"]
    assert java_hash_order([]) == []


def test_quoted_queue_ids_are_accepted(tmp_path):
    (tmp_path / "consumerOffset.json").write_text('{"offsetTable": {"T@G": {"0": 3, "2": 4}}}')
    manager = ConsumerOffsetManager(tmp_path, read_only=True)
    assert manager.load() == {"T@G": {0: 3, 2: 4}}


@pytest.mark.parametrize("text", ['{"offsetTable":[]}', '{"offsetTable":{"T@G":{0:"x"}}}',
                                  '{"offsetTable":{"T@G":{"q":1}}}', "[]",
                                  '{"dataVersion":1,"offsetTable":{}}'])
def test_bad_shapes_fall_back_to_bak(tmp_path, text):
    (tmp_path / "consumerOffset.json").write_text(text)
    (tmp_path / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@G":{0:1}}}')
    manager = ConsumerOffsetManager(tmp_path, read_only=True)
    assert manager.load() == {"T@G": {0: 1}} and manager.file.source == "bak"


def test_bad_style():
    with pytest.raises(ConfigError):
        ConsumerOffsetManager("/nonexistent", read_only=True, style="6")


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_read_only_managers_never_write(fixture, tmp_path):
    root = copy_store(fixture, str(tmp_path))
    before = tree_fingerprint(root)
    config_dir = os.path.join(root, "config")
    for style in ("4.9", "5.x", "auto"):
        ConsumerOffsetManager(config_dir, read_only=True, style=style).load()
        TopicConfigManager(config_dir, read_only=True, style=style).load()
    assert tree_fingerprint(root) == before


# ------------------------------------------------------------------------------------------ topics

SPEC_7_2 = ('{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"timestamp":1700000000000\n\t},\n'
            '\t"topicConfigTable":{\n\t\t"TopicTest":{\n\t\t\t"order":false,\n\t\t\t"perm":6,\n'
            '\t\t\t"readQueueNums":4,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"TopicTest",\n'
            '\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}\n\t}\n}')


def test_topics_spec_example_round_trips(tmp_path):
    (tmp_path / "topics.json").write_text(SPEC_7_2)
    manager = TopicConfigManager(tmp_path, read_only=True, style="auto")
    topics = manager.load()
    assert topics["TopicTest"] == TopicConfig("TopicTest", 4, 4)
    assert manager.data_version == DataVersion(counter=3, timestamp=1700000000000)
    assert manager.effective_style == "4.9" and manager.encode() == SPEC_7_2


def test_topics_create_persist_reload(tmp_path):
    times = iter(range(1700000000000, 1700000001000))
    manager = TopicConfigManager(tmp_path, read_only=False, style="5.x", clock_ms=lambda: next(times))
    manager.load()
    created = manager.create_topic("TopicA", 4, 4)
    assert manager.create_topic("TopicA", 8, 8) is created          # existing topic is returned
    manager.put_topic(TopicConfig("TopicB", 2, 2, attributes={"queue.type": "SimpleCQ"}, extra={"x": 1}))
    assert manager.data_version.counter == 2
    manager.persist()
    value = fastjson.loads((tmp_path / "topics.json").read_text())
    assert list(value["dataVersion"]) == ["counter", "stateVersion", "timestamp"]
    assert list(value["topicConfigTable"]["TopicB"]) == [
        "attributes", "order", "perm", "readQueueNums", "topicFilterType", "topicName", "topicSysFlag",
        "writeQueueNums", "x"]
    assert value["topicConfigTable"]["TopicB"]["attributes"] == {"queue.type": "SimpleCQ"}
    again = TopicConfigManager(tmp_path, read_only=True, style="auto")
    topics = again.load()
    assert again.effective_style == "5.x" and topics["TopicB"].extra == {"x": 1}
    assert again.get("TopicA").read_queue_nums == 4 and again.get("nope") is None
    assert again.encode() == (tmp_path / "topics.json").read_text()


def test_topics_4_9_has_no_attributes(tmp_path):
    manager = TopicConfigManager(tmp_path, read_only=False, clock_ms=CLOCK)
    manager.create_topic("T", 1, 1)
    value = fastjson.loads(manager.encode())
    assert "attributes" not in value["topicConfigTable"]["T"]
    assert value["dataVersion"] == {"counter": 1, "timestamp": 1700000000000}


def test_topics_invalid(tmp_path):
    manager = TopicConfigManager(tmp_path, read_only=False)
    with pytest.raises(InvalidTopicError):
        manager.create_topic("bad/topic", 1, 1)
    with pytest.raises(ConfigError):
        manager.create_topic("T", -1, 1)
    ro = TopicConfigManager(tmp_path, read_only=True)
    with pytest.raises(ReadOnlyStoreError):
        ro.create_topic("T", 1, 1)
    assert os.listdir(tmp_path) == []


def _topics_json_cases():
    for fixture in fixture_dirs():
        path = os.path.join(fixture, "store", "config", "topics.json")
        if os.path.isfile(path):
            yield pytest.param(path, id=fixture_id(fixture))
    yield pytest.param("engine-4.9", id="written-by-the-engine-4.9")
    yield pytest.param("engine-5.x", id="written-by-the-engine-5.x")


@pytest.mark.parametrize("path", list(_topics_json_cases()))
def test_topics_json_round_trips_in_fastjsons_dialect(path, tmp_path):
    """A real topics.json (none of today's fixtures has one) or one the engine wrote: re-encoding is
    byte-exact, and the text keeps fastjson's pretty-format rules (tab indents, `"k":v` without spaces,
    bean fields in alphabetical order, every line ending in `\\n` only)."""
    if path.startswith("engine-"):
        writer = TopicConfigManager(tmp_path, read_only=False, style=path.split("-", 1)[1])
        for name, queues in (("TopicB", 4), ("TopicA", 8), ("%RETRY%group-1", 1), ("T" * 120, 2)):
            writer.create_topic(name, queues, queues)
        writer.persist()
        path = os.path.join(tmp_path, "topics.json")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    manager = TopicConfigManager(os.path.dirname(path), read_only=True, style="auto")
    manager.load()
    assert manager.encode() == text
    assert fastjson.dumps(fastjson.loads(text)) == text
    assert "\r" not in text and ": " not in text and text.startswith("{\n\t\"")
    for line in text.splitlines()[1:-1]:
        assert line.startswith("\t") and not line.startswith(" ")
    table = fastjson.loads(text)["topicConfigTable"]
    assert table, "no topic in topicConfigTable"
    assert list(table) == java_hash_order(list(table), 2048), "topics out of ConcurrentHashMap(1024) order"
    for name, fields in table.items():
        assert fields["topicName"] == name
        assert list(fields) == sorted(fields), f"{name}: bean fields out of fastjson's order"


def test_unknown_top_level_members_survive(tmp_path):
    (tmp_path / "consumerOffset.json").write_text(
        '{"offsetTable":{"T@G":{0:1}},"lmqOffsetTable":{"%LMQ%x@G":{0:2}},"aaa":1}')
    manager = ConsumerOffsetManager(tmp_path, read_only=True)
    manager.load()
    assert list(fastjson.loads(manager.encode())) == ["aaa", "lmqOffsetTable", "offsetTable"]
    (tmp_path / "topics.json").write_text('{"topicConfigTable":{},"zeta":[1]}')
    topics = TopicConfigManager(tmp_path, read_only=True, clock_ms=CLOCK)
    topics.load()
    assert list(fastjson.loads(topics.encode())) == ["dataVersion", "topicConfigTable", "zeta"]
