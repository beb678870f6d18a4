"""Whether a topic's queues are batch consume queues (`QueueTypeUtils.isBatchCq`, 5.3.3).

`QueueTypeUtils.getCQType(topicConfig)`: the topic config's `attributes` map (topics.json), key
`queue.type` (`TopicAttributes.QUEUE_TYPE_ATTRIBUTE`), value a `CQType` name (`SimpleCQ`, `BatchCQ`,
`RocksDBCQ`); no config, no attributes or no key: the attribute's default, `SimpleCQ`.
`CQType.valueOf` of any other value throws in RocketMQ; here it is a ValueError naming the value.
"""

from __future__ import annotations

from typing import Mapping

QUEUE_TYPE_ATTRIBUTE = "queue.type"          # TopicAttributes.QUEUE_TYPE_ATTRIBUTE.getName()
CQ_TYPES = ("SimpleCQ", "BatchCQ", "RocksDBCQ")   # CQType
DEFAULT_CQ_TYPE = "SimpleCQ"                 # QUEUE_TYPE_ATTRIBUTE's default value


def cq_type(attributes: Mapping[str, str] | None) -> str:
    """`QueueTypeUtils.getCQType` from a topic's attributes (None: no topic config)."""
    if not attributes or QUEUE_TYPE_ATTRIBUTE not in attributes:
        return DEFAULT_CQ_TYPE
    value = attributes[QUEUE_TYPE_ATTRIBUTE]
    if value not in CQ_TYPES:
        raise ValueError(f"topic attribute {QUEUE_TYPE_ATTRIBUTE}={value!r} is not one of "
                         f"{', '.join(CQ_TYPES)}")
    return value


def is_batch_cq(attributes: Mapping[str, str] | None) -> bool:
    """`QueueTypeUtils.isBatchCq`."""
    return cq_type(attributes) == "BatchCQ"
