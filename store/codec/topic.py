"""Topic name rules (RocketMQ `TopicValidator`, spec §2.6).

A topic is stored in the record's TOPIC field and names a directory under `consumequeue/`, so the
rules protect both the format and the file system:

| rule                    | limit                                                           |
|-------------------------|-----------------------------------------------------------------|
| characters              | letters, digits, `%`, `_`, `-` and the bar (regex below)        |
| length, v1 record       | 1..127 (`MAX_TOPIC_LENGTH_V1`, the signed TOPIC LENGTH byte)    |
| length, v2 record       | 1..255 when v2 records are allowed ([5.x])                      |

[5.x] The store itself (5.3.3 `CommitLog.asyncPutMessage`, `autoMessageVersionOnTopicLen`) writes a
topic over 127 bytes as a v2 record (2-byte TOPIC LENGTH) and refuses none. The 127 limit is the
broker's request rule (`HookUtils.checkBeforePutMessage`: non-retry topics over `Byte.MAX_VALUE` are
refused there, and `TopicValidator.TOPIC_MAX_LENGTH`); the 255 limit is the file system's (the topic
names a `consumequeue/` directory, and a Linux file name is at most 255 bytes; `HookUtils`'
`MAX_TOPIC_LENGTH`). This engine is the store, so with v2 records every topic may have 255.

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
    """The longest legal length for `topic`: 255 when v2 records are allowed ([5.x]), else 127."""
    return MAX_TOPIC_LENGTH_V2 if allow_v2 else MAX_TOPIC_LENGTH_V1


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
        hint = "" if allow_v2 else f" (a 5.x-format store takes up to {MAX_TOPIC_LENGTH_V2}, as v2 records)"
        raise InvalidTopicError(
            f"topic {topic[:32]!r}... is {len(topic)} characters long; the limit is {limit}{hint}")
