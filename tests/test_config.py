"""StoreConfig (spec §15)."""

from __future__ import annotations

import dataclasses
import os
import re

import pytest

from store.config import StoreConfig
from store.config_table import PROPERTIES
from store.errors import ConfigError
from tests.fixtures_util import fixture_dirs, fixture_id, load_dump

FIXTURES = fixture_dirs()


def _spec_section_15() -> dict[str, str]:
    """Property -> default text from the spec's §15 table."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "spec",
                        "rocketmq-store-format.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    section = text.split("## 15.", 1)[1].split("## 16.", 1)[0]
    result = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`(\w+)`", cells[0])
        defaults = [d.strip().strip("`") for d in cells[1].split(" / ")] if len(names) > 1 else [cells[1]]
        for name, default in zip(names, defaults):
            result[name] = default.strip("`")
    return result


def test_every_spec_property_is_a_field_with_its_default():
    by_rocketmq = {rocketmq: name for name, (rocketmq, _) in PROPERTIES.items()}
    cfg = StoreConfig()
    spec = _spec_section_15()
    assert len(spec) > 80
    for rocketmq, default in spec.items():
        assert rocketmq in by_rocketmq, f"{rocketmq} has no field"
        value = getattr(cfg, by_rocketmq[rocketmq])
        if rocketmq in ("storePathRootDir", "storePathCommitLog", "readOnlyCommitLogStorePaths"):
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        assert text == default, (rocketmq, text, default)


def test_defaults_and_derived_paths():
    cfg = StoreConfig(store_path_root_dir="/data/store")
    assert cfg.mapped_file_size_commit_log == 1073741824
    assert cfg.mapped_file_size_consume_queue == 6000000
    assert cfg.flush_disk_type == "ASYNC_FLUSH" and cfg.store_type == "default"
    assert cfg.store_host == "127.0.0.1:10911" and cfg.broker_cluster_name == "DefaultCluster"
    assert cfg.long_polling_enable is True and cfg.short_polling_time_mills == 1000
    assert cfg.flush_consumer_offset_interval == 5000 and cfg.default_topic_queue_nums == 8
    assert cfg.disk_space_warning_level_ratio == 90 and cfg.disk_space_clean_forcibly_ratio == 85
    assert cfg.store_format == "auto"
    assert cfg.commit_log_dir == "/data/store/commitlog"
    assert cfg.consume_queue_dir == "/data/store/consumequeue"
    assert cfg.index_dir == "/data/store/index"
    assert cfg.config_dir == "/data/store/config"
    assert cfg.checkpoint_path == "/data/store/checkpoint"
    assert cfg.abort_path == "/data/store/abort"
    assert cfg.lock_path == "/data/store/lock"
    multi = cfg.replace(store_path_commit_log="/a/cl, /b/cl")
    assert multi.commit_log_dirs == ("/a/cl", "/b/cl") and multi.commit_log_dir == "/a/cl"


def test_naming_rule_and_docstring_table():
    for f in dataclasses.fields(StoreConfig):
        if f.name != "unknown":
            assert f"| {f.name} | {PROPERTIES[f.name][0]} |" in StoreConfig.__doc__
    assert PROPERTIES["check_crc_on_recover"][0] == "checkCRCOnRecover"


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_fixture_properties_match_effective_config(fixture):
    cfg = StoreConfig.from_properties(os.path.join(fixture, "store.properties"),
                                      store_path_root_dir="/tmp/x")
    assert cfg.unknown_keys() == []
    by_rocketmq = {rocketmq: name for name, (rocketmq, _) in PROPERTIES.items()}
    for key, value in load_dump(fixture).get("config", {}).items():
        if key in by_rocketmq and key not in ("storePathRootDir", "storePathCommitLog"):
            assert getattr(cfg, by_rocketmq[key]) == value, key


def test_from_properties_keeps_unknown_keys_and_round_trips(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("# broker\nbrokerClusterName = Cluster9\nbrokerName=broker-a\n"
                    "mappedFileSizeConsumeQueue=2001\nflushDiskType=SYNC_FLUSH\nbrokerIP1=10.0.0.7\n"
                    "checkCRCOnRecover=FALSE\nstoreType=defaultRocksDB\nstorePathRootDir=/srv/store\n"
                    "namesrvAddr=127.0.0.1:9876\n", encoding="utf-8")
    cfg = StoreConfig.from_properties(path, store_format="5.x")
    assert cfg.unknown_keys() == ["brokerName", "namesrvAddr"]
    assert cfg.unknown == {"brokerName": "broker-a", "namesrvAddr": "127.0.0.1:9876"}
    assert cfg.mapped_file_size_consume_queue == 2020          # rounded up to 20
    assert cfg.flush_disk_type == "SYNC_FLUSH" and cfg.check_crc_on_recover is False
    assert cfg.store_host == "10.0.0.7:10911" and cfg.broker_cluster_name == "Cluster9"
    assert cfg.store_format == "5.x"
    out = tmp_path / "out.conf"
    out.write_text(cfg.to_properties(), encoding="utf-8")
    assert StoreConfig.from_properties(out) == cfg
    assert "mappedFileSizeConsumeQueue=2020\n" in cfg.to_properties()
    assert "brokerName=broker-a\n" in cfg.to_properties()


def test_round_trip_of_changed_values():
    cfg = StoreConfig().replace(store_host="[::1]:10912", message_delay_level="1s 2m",
                                read_only_commit_log_store_paths="/ro", max_index_num=400,
                                enable_lmq=True, store_format="4.9")
    assert StoreConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.to_dict()["brokerIP1"] == "::1" and cfg.to_dict()["listenPort"] == "10912"


@pytest.mark.parametrize("key, value", [
    ("mappedFileSizeCommitLog", "1g"),
    ("mappedFileSizeCommitLog", "-1"),
    ("mappedFileSizeCommitLog", "0"),
    ("maxIndexNum", ""),
    ("flushDiskType", "async_flush"),
    ("flushDiskType", "FAST"),
    ("storeType", "rocksdb"),
    ("brokerRole", "MASTER"),
    ("checkCRCOnRecover", "yes"),
    ("fileReservedTime", "-5"),
    ("messageDelayLevel", "1s 5x"),
    ("listenPort", "70000"),
    ("storeFormat", "6.0"),
])
def test_bad_values_raise_config_error_naming_key_and_value(key, value):
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_dict({key: value})
    message = str(info.value)
    assert key in message and (repr(value) in message or f"got {value}" in message)


@pytest.mark.parametrize("size, expected", [(1, 20), (20, 20), (2000, 2000), (2001, 2020), (6000000, 6000000)])
def test_consume_queue_size_rounds_up(size, expected):
    assert StoreConfig.from_dict({"mappedFileSizeConsumeQueue": str(size)}).mapped_file_size_consume_queue \
        == expected


def test_overrides():
    cfg = StoreConfig.from_dict({"maxHashSlotNum": "100"}, max_hash_slot_num=64, enable_lmq="true")
    assert cfg.max_hash_slot_num == 64 and cfg.enable_lmq is True
    with pytest.raises(ConfigError):
        StoreConfig.from_dict({}, maxHashSlotNum=5)           # overrides are snake_case
    with pytest.raises(ConfigError):
        StoreConfig.from_dict({}, max_hash_slot_num="many")
    with pytest.raises(ConfigError):
        StoreConfig.from_dict({}, enable_lmq=1)               # typed overrides must have the field's type
    with pytest.raises(ConfigError):
        StoreConfig().replace(nope=1)
    with pytest.raises(ConfigError):
        StoreConfig().replace(flush_disk_type="SOMETIMES")


def test_missing_properties_file(tmp_path):
    with pytest.raises(ConfigError):
        StoreConfig.from_properties(tmp_path / "absent.conf")


def test_frozen_and_hashable():
    cfg = StoreConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.max_index_num = 3
    assert hash(cfg) == hash(StoreConfig())
