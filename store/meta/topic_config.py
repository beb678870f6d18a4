"""`config/topics.json` (spec §7.2): `dataVersion` + `topicConfigTable`, in the broker's dialect."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from store.codec import fastjson
from store.codec.topic import validate_topic
from store.errors import ConfigError, CorruptDataError, ReadOnlyStoreError
from store.meta.config_files import (TOPICS_FILE, DataVersion, JsonConfigFile, _as_int, _check_style,
                                     _extra_members, _sorted_members, _wall_clock_ms, java_hash_order)

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
# `TopicConfigManager.topicConfigTable` is `new ConcurrentHashMap<>(1024)` (4.9.7 and 5.3.3): a table of
# 2,048 bins, which fastjson writes in bin order. Past 1,536 topics the map resizes, and
# ConcurrentHashMap's transfer reorders bins differently from HashMap's: not modelled.
_TOPIC_TABLE_CAPACITY = 2048
_TOPIC_MEMBERS = ("attributes", "order", "perm", "readQueueNums", "topicFilterType", "topicName",
                  "topicSysFlag", "writeQueueNums")


@dataclass
class TopicConfig:
    """RocketMQ `TopicConfig`. `extra` keeps members we do not model, so they survive a round trip."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)   # [5.x]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self, style: str) -> dict:
        members = {"attributes": dict(self.attributes), "order": self.order, "perm": self.perm,
                   "readQueueNums": self.read_queue_nums, "topicFilterType": self.topic_filter_type,
                   "topicName": self.topic_name, "topicSysFlag": self.topic_sys_flag,
                   "writeQueueNums": self.write_queue_nums}
        if style != "5.x":
            del members["attributes"]
        members.update(self.extra)
        return {name: members[name] for name in sorted(members)}   # fastjson SortField: alphabetical

    @classmethod
    def from_json(cls, name: str, obj: Any) -> TopicConfig:
        if not isinstance(obj, dict):
            raise CorruptDataError(None, 0, f"topic config of {name!r} is not an object")
        try:
            cfg = cls(topic_name=obj.get("topicName", name),
                      read_queue_nums=_as_int(obj.get("readQueueNums", 16), "readQueueNums"),
                      write_queue_nums=_as_int(obj.get("writeQueueNums", 16), "writeQueueNums"),
                      perm=_as_int(obj.get("perm", 6), "perm"),
                      topic_filter_type=obj.get("topicFilterType", "SINGLE_TAG"),
                      topic_sys_flag=_as_int(obj.get("topicSysFlag", 0), "topicSysFlag"),
                      order=obj.get("order", False), attributes=dict(obj.get("attributes") or {}),
                      extra={k: v for k, v in obj.items() if k not in _TOPIC_MEMBERS})
        except (TypeError, ValueError) as exc:
            raise CorruptDataError(None, 0, f"topic config of {name!r}: {exc}") from None
        if not isinstance(cfg.order, bool) or not isinstance(cfg.topic_name, str):
            raise CorruptDataError(None, 0, f"topic config of {name!r} has bad member types")
        return cfg


class TopicConfigManager:
    """`topics.json`: `dataVersion` + `topicConfigTable` (spec §7.2), written in insertion order.

    `style` "5.x" writes `attributes` and `dataVersion.stateVersion`; "auto" follows the loaded file.
    """

    def __init__(self, config_dir: str | os.PathLike, *, read_only: bool, style: str = "4.9",
                 clock_ms: Callable[[], int] = _wall_clock_ms):
        self.style = _check_style(style)
        self.read_only = read_only
        self.clock_ms = clock_ms
        self.file = JsonConfigFile(os.path.join(os.fspath(config_dir), TOPICS_FILE), read_only=read_only)
        self.data_version = DataVersion(timestamp=clock_ms())
        self.dirty = False               # changed since loaded or persisted (shutdown persists it)
        self._topics: dict[str, TopicConfig] = {}
        self.extra_members: dict[str, Any] = {}
        self._loaded_style: str | None = None

    @staticmethod
    def _decode(obj: Any) -> tuple[dict[str, TopicConfig], DataVersion | None, bool, dict]:
        if not isinstance(obj, dict):
            raise CorruptDataError(None, 0, "topics.json is not an object")
        table = obj.get("topicConfigTable")
        table = {} if table is None else table
        if not isinstance(table, dict):
            raise CorruptDataError(None, 0, "topicConfigTable is not an object")
        topics = {name: TopicConfig.from_json(name, cfg) for name, cfg in table.items()}
        raw_version = obj.get("dataVersion")
        version = DataVersion.from_json(raw_version) if raw_version is not None else None
        is_5x = isinstance(raw_version, dict) and "stateVersion" in raw_version
        return topics, version, is_5x, _extra_members(obj, ("dataVersion", "topicConfigTable"))

    def load(self) -> dict[str, TopicConfig]:
        loaded = self.file.load(self._decode)
        if loaded is None:
            self._topics, self._loaded_style, self.extra_members = {}, None, {}
        else:
            self._topics, version, is_5x, self.extra_members = loaded
            if version is not None:
                self.data_version = version
            self._loaded_style = "5.x" if is_5x else "4.9"
        return dict(self._topics)

    @property
    def effective_style(self) -> str:
        return self.style if self.style != "auto" else (self._loaded_style or "4.9")

    def get(self, name: str) -> TopicConfig | None:
        return self._topics.get(name)

    def topics(self) -> dict[str, TopicConfig]:
        return dict(self._topics)

    def is_batch_topic(self, name: str) -> bool:
        """[5.x] `QueueTypeUtils.isBatchCq`: attributes `queue.type=BatchCQ` (an unknown value:
        not a batch topic here, where RocketMQ's CQType.valueOf throws)."""
        cfg = self._topics.get(name)
        if cfg is None or not cfg.attributes:      # dispatch asks per topic and pass: no import
            return False
        from store.consumequeue.batch.topic_type import is_batch_cq
        try:
            return is_batch_cq(cfg.attributes)
        except ValueError:
            return False

    def put_topic(self, cfg: TopicConfig) -> None:
        """Add or replace a topic config; bumps dataVersion."""
        if self.read_only:
            raise ReadOnlyStoreError("topic configs are read-only")
        for what, value in (("read_queue_nums", cfg.read_queue_nums),
                            ("write_queue_nums", cfg.write_queue_nums)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{what} of topic {cfg.topic_name!r} must be a non-negative int: {value!r}")
        self._topics[cfg.topic_name] = cfg
        self.data_version.next_version(self.clock_ms())
        self.dirty = True

    def create_topic(self, name: str, read_queue_nums: int, write_queue_nums: int, *,
                     perm: int = PERM_READ | PERM_WRITE) -> TopicConfig:
        """Return the existing config of `name`, or create one (bumping dataVersion)."""
        existing = self._topics.get(name)
        if existing is not None:
            return existing
        validate_topic(name, allow_v2=True)
        cfg = TopicConfig(topic_name=name, read_queue_nums=read_queue_nums,
                          write_queue_nums=write_queue_nums, perm=perm)
        self.put_topic(cfg)
        return cfg

    def note_queue(self, name: str, queue_id: int, default_queue_nums: int) -> int:
        """A broker's auto-create for a put to queue `queue_id` of topic `name`: the topic created
        with max(queue_id + 1, `default_queue_nums`) queues, or grown to queue_id + 1; the number
        of write queues its config then covers. Configs only grow (this and `create_topic` are
        their writers), so the store notes every covered queue at once: a topic of N queues costs
        one call, not N."""
        config = self._topics.get(name)
        queue_nums = max(queue_id + 1, default_queue_nums)
        if config is None:
            config = self.create_topic(name, queue_nums, queue_nums)
        elif queue_id >= config.write_queue_nums:
            config.read_queue_nums = max(config.read_queue_nums, queue_id + 1)
            config.write_queue_nums = queue_id + 1
            self.put_topic(config)
        return config.write_queue_nums

    def encode(self) -> str:
        style = self.effective_style
        obj = {"dataVersion": self.data_version.to_json(style),
               "topicConfigTable": {name: self._topics[name].to_json(style)
                                    for name in java_hash_order(list(self._topics), _TOPIC_TABLE_CAPACITY)}}
        return fastjson.dumps(_sorted_members(obj, self.extra_members))

    def persist(self) -> None:
        self.file.persist(self.encode())
        self.dirty = False
