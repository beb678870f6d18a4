"""`StoreConfig`: RocketMQ's `MessageStoreConfig` (spec §15) plus the few broker values the store uses.

One mechanical rule names the fields: the snake_case of the RocketMQ property name
(`mappedFileSizeCommitLog` -> `mapped_file_size_commit_log`, `checkCRCOnRecover` -> `check_crc_on_recover`),
with RocketMQ's default. The exceptions are `store_host` (from `brokerIP1` + `listenPort`) and the
engine-only `store_format` (`storeFormat` in our files; brokers ignore unknown keys). RocketMQ's names,
the units (RocketMQ's names carry none) and the value rules are the table in `store.config_table`;
names and units are also appended to the class docstring.

Reading follows `MixAll.properties2Object` except that a bad value is an error here (Java's
`Boolean.parseBoolean` quietly reads "yes" as false): every failure raises ConfigError naming the key and
the value. Keys we do not know are kept in `unknown` and listed by `unknown_keys()`, never dropped.
`mappedFileSizeConsumeQueue` is rounded up to a multiple of 20, as RocketMQ's getter does.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from store.codec import java_properties, prop_crc
from store.config_table import ENUM_VALUES, POSITIVE_FIELDS, PROPERTIES
from store.errors import ConfigError

CQ_UNIT_SIZE_BYTES = 20
_DEFAULT_ROOT = os.path.join(os.path.expanduser("~"), "store")
_DELAY_LEVEL = re.compile(r"\d+[smhd]")


@dataclass(frozen=True)
class StoreConfig:
    """RocketMQ store configuration. Fields, RocketMQ names and units (generated table below):
    """

    store_path_root_dir: str = _DEFAULT_ROOT
    store_path_commit_log: str | None = None
    read_only_commit_log_store_paths: str | None = None
    mapped_file_size_commit_log: int = 1073741824
    mapped_file_size_consume_queue: int = 6000000
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 50331648
    bit_map_length_consume_queue_ext: int = 64
    mapper_file_size_batch_consume_queue: int = 13800000
    store_type: str = "default"
    max_message_size: int = 4194304
    flush_disk_type: str = "ASYNC_FLUSH"
    broker_role: str = "ASYNC_MASTER"
    flush_interval_commit_log: int = 500
    flush_commit_log_timed: bool = True
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10000
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60000
    sync_flush_timeout: int = 5000
    slave_timeout: int = 3000
    put_message_timeout: int = 8000
    ha_slave_fallbehind_max: int = 268435456
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    fast_fail_if_no_buffer_in_store_pool: bool = False
    use_reentrant_lock_when_put_message: bool = True
    os_page_cache_busy_time_out_mills: int = 1000
    warm_maped_file_enable: bool = False
    flush_least_pages_when_warm_maped_file: int = 4096
    check_crc_on_recover: bool = True
    duplication_enable: bool = False
    message_index_enable: bool = True
    message_index_safe: bool = False
    max_hash_slot_num: int = 5000000
    max_index_num: int = 20000000
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    max_transfer_bytes_on_message_in_memory: int = 262144
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 65536
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    max_filter_message_size: int = 16000
    travel_cq_file_num_when_get_message: int = 1
    offset_check_in_slave: bool = False
    disk_fall_recorded: bool = True
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flush_delay_offset_interval: int = 10000
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_warning_level_ratio: int = 90
    disk_space_clean_forcibly_ratio: int = 85
    clean_resource_interval: int = 10000
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    destroy_maped_file_interval_forcibly: int = 120000
    redelete_hanged_file_interval: int = 120000
    clean_file_forcibly_enable: bool = True
    delete_file_batch_max: int = 10
    enable_lmq: bool = False
    enable_multi_dispatch: bool = False
    max_lmq_consume_queue_num: int = 20000
    auto_message_version_on_topic_len: bool = True
    enabled_append_prop_crc: bool = False
    force_verify_prop_crc: bool = False
    read_un_committed: bool = False
    recheck_reput_offset_from_cq: bool = False
    put_consume_queue_data_by_file_channel: bool = True
    enable_build_consume_queue_concurrently: bool = False
    rocksdb_cq_double_write_enable: bool = False
    rocksdb_compression_type: str = "lz4"
    bottom_most_compression_type_for_consume_queue_store: str = "zstd"
    clean_rocks_db_dirty_cq_interval_min: int = 60
    wake_commit_when_put_message: bool = True
    wake_flush_when_put_message: bool = False
    topic_queue_lock_num: int = 32
    broker_cluster_name: str = "DefaultCluster"
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    flush_consumer_offset_interval: int = 5000
    default_topic_queue_nums: int = 8
    enable_calc_filter_bit_map: bool = False
    timer_wheel_enable: bool = True
    mapped_file_size_timer_log: int = 104857600
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 259200
    timer_roll_window_slot: int = 172800
    timer_flush_interval_ms: int = 1000
    timer_congest_num_each_slot: int = 2147483647
    timer_stop_enqueue: bool = False
    timer_stop_dequeue: bool = False
    enable_d_leger_commit_log: bool = False
    d_leger_group: str | None = None
    d_leger_peers: str | None = None
    d_leger_self_id: str | None = None
    store_path_d_ledger_commit_log: str | None = None
    store_host: str = "127.0.0.1:10911"
    store_format: str = "auto"
    unknown: dict[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name == "unknown":
                continue
            value = getattr(self, f.name)
            if isinstance(value, str) and f.type != "str" and f.type != "str | None":
                value = _parse(f.name, f.type, value)
            _check(f.name, f.type, value)
            object.__setattr__(self, f.name, value)
        size = self.mapped_file_size_consume_queue
        rounded = -(-size // CQ_UNIT_SIZE_BYTES) * CQ_UNIT_SIZE_BYTES   # RocketMQ rounds up
        object.__setattr__(self, "mapped_file_size_consume_queue", rounded)
        object.__setattr__(self, "unknown", {str(k): str(v) for k, v in self.unknown.items()})

    # ------------------------------------------------------------------------------------ building
    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any], **overrides: Any) -> StoreConfig:
        """Build from RocketMQ property names (strings as in broker.conf); unknown keys go to `unknown`.
        `overrides` are snake_case field names and win over the mapping."""
        by_name = {rocketmq: name for name, (rocketmq, _) in PROPERTIES.items()}
        values: dict[str, Any] = {}
        unknown: dict[str, str] = {}
        ip, port = None, None
        for key, raw in mapping.items():
            text = raw if isinstance(raw, str) else str(raw)
            if key == "brokerIP1":
                ip = text.strip()
            elif key == "listenPort":
                port = text.strip()
                if not port.isdigit() or not 0 <= int(port) <= 65535:
                    raise ConfigError(f"listenPort must be a port number, got {text!r}")
            elif key in by_name:
                values[by_name[key]] = text
            else:
                unknown[key] = text
        if ip is not None or port is not None:
            default_ip, default_port = _split_host("store_host", cls.store_host)
            ip = ip or default_ip
            values["store_host"] = f"[{ip}]:{port or default_port}" if ":" in ip else \
                f"{ip}:{port or default_port}"
        known = {f.name for f in dataclasses.fields(cls)} - {"unknown"}
        for name, value in overrides.items():
            if name not in known:
                raise ConfigError(f"unknown config override {name!r}={value!r}")
            values[name] = value
        return cls(unknown=unknown, **values)

    @classmethod
    def from_properties(cls, path: str | os.PathLike, **overrides: Any) -> StoreConfig:
        """Read a broker.conf / store.properties file (UTF-8, else ISO-8859-1 like Java)."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {os.fspath(path)}: {exc}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        return cls.from_dict(java_properties.load(text), **overrides)

    def replace(self, **changes: Any) -> StoreConfig:
        """A copy with `changes` (snake_case field names) applied and validated."""
        known = {f.name for f in dataclasses.fields(self)}
        for name, value in changes.items():
            if name not in known:
                raise ConfigError(f"unknown config field {name!r}={value!r}")
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------------------------- output
    def to_dict(self) -> dict[str, str]:
        """RocketMQ property name -> text, every known field (None omitted), then the unknown keys."""
        out: dict[str, str] = {}
        for name, (rocketmq, _) in PROPERTIES.items():
            value = getattr(self, name)
            if name == "store_host":
                ip, port = _split_host(name, value)
                out["brokerIP1"], out["listenPort"] = ip, str(port)
            elif name == "store_format" and value == "auto":
                continue
            elif value is not None:
                out[rocketmq] = str(value).lower() if isinstance(value, bool) else str(value)
        out.update(self.unknown)
        return out

    def to_properties(self) -> str:
        """broker.conf text with RocketMQ property names (reads back to an equal StoreConfig)."""
        return java_properties.dump(self.to_dict())

    def unknown_keys(self) -> list[str]:
        """Keys of the source that no field models (kept in `unknown`, in source order)."""
        return list(self.unknown)

    def recovery_crc_mode(self, style: str) -> int:
        """The CRC check recovery makes (a `store.codec.prop_crc` CRC_* mode): none without
        `checkCRCOnRecover`; the [5.x] `__CRC32#` record CRC with `forceVerifyPropCRC` on a 5.x
        store (4.9.7 has no such setting); else BODYCRC."""
        return prop_crc.crc_mode(self.check_crc_on_recover,
                                 style == "5.x" and self.force_verify_prop_crc)

    # ---------------------------------------------------------------------------------- derived paths
    @property
    def commit_log_dirs(self) -> tuple[str, ...]:
        """Every commit-log directory (storePathCommitLog may list several, comma-separated)."""
        if self.store_path_commit_log is None:
            return (os.path.join(self.store_path_root_dir, "commitlog"),)
        return tuple(p.strip() for p in self.store_path_commit_log.split(",") if p.strip())

    @property
    def commit_log_dir(self) -> str:
        return self.commit_log_dirs[0]

    def _root(self, *parts: str) -> str:
        return os.path.join(self.store_path_root_dir, *parts)

    consume_queue_dir = property(lambda self: self._root("consumequeue"))
    consume_queue_ext_dir = property(lambda self: self._root("consumequeue_ext"))
    batch_consume_queue_dir = property(lambda self: self._root("batchconsumequeue"))
    index_dir = property(lambda self: self._root("index"))
    config_dir = property(lambda self: self._root("config"))
    checkpoint_path = property(lambda self: self._root("checkpoint"))
    abort_path = property(lambda self: self._root("abort"))
    lock_path = property(lambda self: self._root("lock"))


def _split_host(name: str, host: str) -> tuple[str, int]:
    ip, sep, port = host.rpartition(":")
    if not sep or not ip or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{name} must be 'ip:port', got {host!r}")
    return ip.strip("[]"), int(port)


def _parse(name: str, type_name: str, text: str) -> Any:
    rocketmq = PROPERTIES[name][0]
    stripped = text.strip()
    if type_name == "bool":
        if stripped.lower() in ("true", "false"):
            return stripped.lower() == "true"
        raise ConfigError(f"{rocketmq} must be true or false, got {text!r}")
    if type_name == "int":
        if re.fullmatch(r"[+-]?[0-9]+", stripped):
            return int(stripped)
        raise ConfigError(f"{rocketmq} must be an integer, got {text!r}")
    if type_name == "float":
        try:
            return float(stripped)
        except ValueError:
            raise ConfigError(f"{rocketmq} must be a number, got {text!r}") from None
    raise AssertionError(f"no parser for {type_name}")


def _check(name: str, type_name: str, value: Any) -> None:
    rocketmq = PROPERTIES[name][0]
    expected = {"bool": bool, "int": int, "float": (int, float), "str": str, "str | None": (str, type(None))}
    if not isinstance(value, expected[type_name]) or (type_name == "int" and isinstance(value, bool)):
        raise ConfigError(f"{rocketmq} must be {type_name}, got {value!r}")
    if type_name == "int":
        if value < 0 or (value == 0 and name in POSITIVE_FIELDS):
            raise ConfigError(f"{rocketmq} must be "
                              f"{'positive' if name in POSITIVE_FIELDS else '>= 0'}, got {value!r}")
    if name in ENUM_VALUES and value not in ENUM_VALUES[name]:
        raise ConfigError(f"{rocketmq} must be one of {ENUM_VALUES[name]}, got {value!r}")
    if name == "message_delay_level" and not all(_DELAY_LEVEL.fullmatch(v) for v in value.split()):
        raise ConfigError(f"messageDelayLevel must be durations like '1s 5m 2h', got {value!r}")
    if name == "store_host":
        _split_host(name, value)


def _snake(rocketmq: str) -> str:
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", rocketmq)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()


# Import-time self-checks: the table covers every field, and the naming rule holds.
assert set(PROPERTIES) == {f.name for f in dataclasses.fields(StoreConfig)} - {"unknown"}
assert all(_snake(rocketmq) == name for name, (rocketmq, _) in PROPERTIES.items()
           if name not in ("store_host", "store_format"))
StoreConfig.__doc__ += "\n".join(
    ["", "    | field | RocketMQ name | unit | default |", "    |---|---|---|---|"]
    + [f"    | {n} | {r} | {u} | {f.default!r} |" for f in dataclasses.fields(StoreConfig)
       if f.name in PROPERTIES for n, (r, u) in [(f.name, PROPERTIES[f.name])]])
