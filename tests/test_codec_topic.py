"""store.codec.topic: RocketMQ's topic rules (spec §2.6)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec.topic import MAX_TOPIC_LENGTH_V1, validate_topic
from store.errors import InvalidTopicError

LEGAL = "%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


def test_limit_constant():
    assert MAX_TOPIC_LENGTH_V1 == 127


@pytest.mark.parametrize("topic", ["TopicTest", "a", "%RETRY%group", "A|B", "t-1_2",
                                   "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "x" * 127])
def test_legal(topic):
    validate_topic(topic)
    validate_topic(topic, allow_v2=True)


@pytest.mark.parametrize("topic, fragment", [
    ("", "empty"),
    (".", "'.'"), ("..", "'.'"), ("a.b", "'.'"), ("a/b", "'/'"), ("a\x00b", "'\\x00'"),
    ("a b", "' '"), ("topic\n", "'\\n'"), ("标签", "'标'"), ("a#b", "'#'"),
])
def test_illegal_characters(topic, fragment):
    with pytest.raises(InvalidTopicError, match="empty" if not topic else "illegal character") as info:
        validate_topic(topic, allow_v2=True)
    assert fragment in str(info.value)


@pytest.mark.parametrize("topic, allow_v2, ok", [
    ("x" * 127, False, True),
    ("x" * 128, False, False),
    ("x" * 128, True, True),                          # [5.x] any topic, as a v2 record
    ("x" * 255, True, True),
    ("x" * 256, True, False),                         # a consumequeue/ directory name's limit
    ("%RETRY%" + "g" * 120, False, True),             # 127
    ("%RETRY%" + "g" * 121, False, False),            # 128 without v2
    ("%RETRY%" + "g" * 121, True, True),              # 128 with v2 (spec vector D)
    ("%RETRY%" + "g" * 248, True, True),              # 255
    ("%RETRY%" + "g" * 249, True, False),             # 256
])
def test_lengths(topic, allow_v2, ok):
    if ok:
        validate_topic(topic, allow_v2=allow_v2)
    else:
        with pytest.raises(InvalidTopicError, match=f"{len(topic)} characters long"):
            validate_topic(topic, allow_v2=allow_v2)


def test_not_a_string():
    with pytest.raises(InvalidTopicError, match="string"):
        validate_topic(b"TopicA")


@given(st.text(LEGAL, min_size=1, max_size=127))
def test_any_legal_topic_passes(topic):
    validate_topic(topic)


@given(st.text(LEGAL, max_size=20), st.characters().filter(lambda c: c not in LEGAL),
       st.text(LEGAL, max_size=20))
def test_any_other_character_fails(prefix, bad, suffix):
    with pytest.raises(InvalidTopicError):
        validate_topic(prefix + bad + suffix, allow_v2=True)
