"""Topic name rules (RocketMQ `TopicValidator`, spec §2.6).

A topic is stored in the record's TOPIC field and names a directory under `consumequeue/`, so the
rules protect both the format and the file system:

| rule                    | limit                                                           |
|-------------------------|-----------------------------------------------------------------|
| characters              | letters, digits, `%`, `_`, `-` and the bar (regex below)        |
| length, v1 record       | 1..127 (`MAX_TOPIC_LENGTH_V1`, the signed TOPIC LENGTH byte)    |
| length, `%RETRY%` topic | 1..255 when v2 records are allowed ([5.x] autoMessageVersion..) |

The character rule is RocketMQ's regex `^[%|a-zA-Z0-9_-]+$`, so a topic is never `.`, `..`, never has
a `/` or NUL, and its UTF-8 byte length equals its length in characters.
"""

from __future__ import annotations

import re

from store.errors import InvalidTopicError

MAX_TOPIC_LENGTH_V1 = 127
MAX_TOPIC_LENGTH_V2 = 255
RETRY_TOPIC_PREFIX = "%RETRY%"

_LEGAL_CHARACTERS = re.compile(r"[%|a-zA-Z0-9_\-]+", re.ASCII)
_ILLEGAL_CHARACTER = re.compile(r"[^%|a-zA-Z0-9_\-]", re.ASCII)


def max_topic_length(topic: str, *, allow_v2: bool = False) -> int:
    """The longest legal length for `topic`: 255 for `%RETRY%` topics when v2 records are allowed."""
    if allow_v2 and topic.startswith(RETRY_TOPIC_PREFIX):
        return MAX_TOPIC_LENGTH_V2
    return MAX_TOPIC_LENGTH_V1


def validate_topic(topic: str, *, allow_v2: bool = False) -> None:
    """Raise InvalidTopicError unless `topic` is a legal RocketMQ topic name."""
    if not isinstance(topic, str):
        raise InvalidTopicError(f"the topic must be a string, not {type(topic).__name__}")
    if not topic:
        raise InvalidTopicError("the topic is empty")
    if not _LEGAL_CHARACTERS.fullmatch(topic):
        bad = _ILLEGAL_CHARACTER.search(topic)
        assert bad is not None
        raise InvalidTopicError(
            f"topic {topic[:64]!r} contains the illegal character {bad.group()!r} at index "
            f"{bad.start()}; allowed are letters, digits, '%', '|', '_' and '-'")
    limit = max_topic_length(topic, allow_v2=allow_v2)
    if len(topic) > limit:
        if topic.startswith(RETRY_TOPIC_PREFIX) and not allow_v2:
            hint = f" (retry topics may have up to {MAX_TOPIC_LENGTH_V2} with v2 records)"
        else:
            hint = ""
        raise InvalidTopicError(
            f"topic {topic[:32]!r}... is {len(topic)} characters long; the limit is {limit}{hint}")
