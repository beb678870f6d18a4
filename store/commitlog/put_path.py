"""Turning a `Message` into an encoded commit-log record, with RocketMQ's checks (spec §2.6, §8.2).

Everything here runs outside the put lock: validation, the properties string, the record bytes with
placeholder offsets. The commit log patches queue offset, physical offset and store timestamp in.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import lru_cache

from store.api import Message, PutMessageStatus
from store.codec import message as msgcodec
from store.codec import prop_crc
from store.codec.javahash import tags_code as compute_tags_code
from store.codec.properties import java_hashmap_order
from store.codec.topic import validate_topic
from store.commitlog.commit_log import RecordDraft
from store.errors import InvalidTopicError
from store.kernel import encode_put, encode_record

MAX_PROPERTIES_LENGTH = 32767
MAX_QUEUE_ID = 65535          # a guard against directory explosions; RocketMQ queues are small ints
SCHEDULE_TOPIC = msgcodec.SCHEDULE_TOPIC
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


# Topic names already validated, per "v2 records allowed" (a bounded memo: validation is on the hot
# path, and the compiled encoder only takes topics found here).
_VALID_TOPICS: dict[bool, set[str]] = {False: set(), True: set()}
_VALID_TOPICS_MAX = 100_000
# Host fields ("ip:port" -> 8 or 20 bytes) already encoded; the compiled encoder reads them here.
_HOST_FIELDS: dict[str, bytes] = {}
_HOST_FIELDS_MAX = 4096


class PutRefused(Exception):
    """A put that fails validation: carries RocketMQ's status and a sentence for the caller."""

    def __init__(self, status: PutMessageStatus, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def parse_delay_levels(text: str) -> list[int]:
    """`messageDelayLevel` ("1s 5s ... 2h") as milliseconds per level (level 1 first)."""
    levels = []
    for token in text.split():
        unit = token[-1]
        if unit not in _UNIT_MS or not token[:-1].isdigit():
            raise ValueError(f"bad delay level {token!r}")
        levels.append(int(token[:-1]) * _UNIT_MS[unit])
    return levels


@dataclass(frozen=True)
class PutSettings:
    """The slice of StoreConfig the put path needs."""

    store_host: str
    max_message_size: int
    properties_style: str           # "4.9" or "5.x"
    allow_v2_records: bool          # 5.x autoMessageVersionOnTopicLen
    delay_levels_ms: tuple[int, ...]
    segment_size_bytes: int
    # [5.x] enabledAppendPropCRC: reserve the 20-byte `__CRC32#` trailer, sealed in the put lock.
    append_prop_crc: bool = False

    def __post_init__(self):
        # What the compiled encoder needs, in the order it reads it (see encode_put in store/kernel/c/put.c).
        object.__setattr__(self, "kernel_context", (
            _VALID_TOPICS[self.allow_v2_records], _HOST_FIELDS, _host_field(self.store_host),
            self.max_message_size, self.properties_style == "4.9", self.allow_v2_records,
            self.segment_size_bytes, self.append_prop_crc))


@lru_cache(maxsize=4096)
def _tags_code(tags: str | None) -> int:
    # A store sees few distinct tags; their hash is computed once.
    return compute_tags_code(tags)


def _refuse_user_properties(user) -> None:
    """Raise PutRefused naming the first bad user property (the slow, explaining path)."""
    for name, value in user.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                             f"property {name!r} must map a string to a string")
        if not name or "\x01" in name or "\x02" in name:
            raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                             f"property name {name!r} is empty or holds a separator character")
        if "\x02" in value:
            raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                             f"property {name!r} holds the property separator \\x02")


def build_properties(message: Message) -> dict[str, str]:
    """TAGS, KEYS and the user properties of `message`, checked, in HashMap insertion order."""
    properties: dict[str, str] = {}
    tags = message.tags
    if tags:
        if type(tags) is not str and not isinstance(tags, str) or "\x01" in tags or "\x02" in tags:
            raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                             "tags must be a string without separator characters")
        properties["TAGS"] = tags
    keys = message.keys
    if keys:
        try:
            joined = " ".join([k for k in (keys.split(" ") if isinstance(keys, str) else keys) if k])
        except TypeError:
            raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL, "keys must be strings") from None
        if joined:
            if "\x01" in joined or "\x02" in joined:
                raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                                 "keys must not hold separator characters")
            properties["KEYS"] = joined
    user = message.properties
    if user:
        # All names and values checked at once; the explaining loop runs only when one is bad.
        try:
            names = "".join(user)
            values = "".join(user.values())
        except TypeError:
            names = values = "\x02"
        if "\x01" in names or "\x02" in names or "\x02" in values or "" in user:
            _refuse_user_properties(user)
        properties.update(user)
    return properties


def _apply_delay(topic: str, queue_id: int, properties: dict, sys_flag: int,
                 settings: PutSettings) -> tuple[str, int]:
    """Spec §2.9: a DELAY level moves the message to SCHEDULE_TOPIC_XXXX, queue level-1."""
    level_text = properties.get("DELAY")
    if not level_text or (sys_flag & 0x0C) not in (0x00, 0x08):
        return topic, queue_id
    try:
        level = int(level_text)
    except ValueError:
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL, f"DELAY {level_text!r} is not a number")
    if level <= 0:
        return topic, queue_id
    if level > len(settings.delay_levels_ms):
        # CommitLog.asyncPutMessage: setDelayTimeLevel(maxDelayLevel) rewrites the DELAY property.
        level = len(settings.delay_levels_ms)
        properties["DELAY"] = str(level)
    properties["REAL_TOPIC"] = topic
    properties["REAL_QID"] = str(queue_id)
    return SCHEDULE_TOPIC, level - 1


def delay_tags_code(properties: dict, store_timestamp: int, delay_levels_ms) -> int:
    """tagsCode of a SCHEDULE_TOPIC_XXXX unit: the delivery time (spec §4.3)."""
    try:
        level = int(properties.get("DELAY", "0"))
    except ValueError:
        level = 0
    if level <= 0:
        return store_timestamp + 1000
    level = min(level, len(delay_levels_ms))
    return store_timestamp + delay_levels_ms[level - 1]


def _host_field(host: str) -> bytes:
    field = _HOST_FIELDS.get(host)
    if field is None:
        field = msgcodec.msgid.encode_host(host)
        if len(_HOST_FIELDS) < _HOST_FIELDS_MAX:
            _HOST_FIELDS[host] = field
    return field


@lru_cache(maxsize=4096)
def _topic_field(topic: str) -> bytes:
    return topic.encode("utf-8")


_FORMATTERS: dict[tuple[str, ...], tuple] = {}     # property names -> (values getter, template)
_FORMATTERS_MAX = 4096


def _formatter(names: tuple[str, ...]):
    # Producers send the same property names over and over: their HashMap order, and a template
    # with the names already in place, are made once per set of names.
    order = java_hashmap_order(names, 16) if len(names) > 1 else list(names)
    template = "\x02".join(name.replace("{", "{{").replace("}", "}}") + "\x01{}" for name in order)
    getter = operator.itemgetter(*order)
    formatter = (getter, template, len(order) == 1)
    if len(_FORMATTERS) < _FORMATTERS_MAX:
        _FORMATTERS[names] = formatter
    return formatter


def _properties_raw(properties: dict[str, str], style: str) -> bytes:
    """encode_properties(properties, style=style, capacity=16) for a dict of str values."""
    if not properties:
        return b""
    names = tuple(properties)
    getter, template, single = _FORMATTERS.get(names) or _formatter(names)
    text = template.format(getter(properties)) if single else template.format(*getter(properties))
    return (text if style == "4.9" else text + "\x02").encode("utf-8")


def encode_for_put(message: Message, settings: PutSettings, now_ms: int
                   ) -> tuple[bytearray, RecordDraft]:
    """Validate and encode one message; raise PutRefused with RocketMQ's status on bad input."""
    if encode_put is not None:
        # The compiled encoder takes the common case whole; it answers None for anything unusual
        # (a topic not yet validated, a DELAY, a field to refuse...), which the code below decides.
        fast = encode_put(message, settings.kernel_context, now_ms)
        if fast is None and validated_now(message.topic, settings):
            # A topic's first message: validated once here, the compiled encoder takes it too
            # (not the whole Python encode per new topic).
            fast = encode_put(message, settings.kernel_context, now_ms)
        if fast is not None:
            record, topic, queue_id, sys_flag, tags_code, keys, uniq_key, timestamp_position = fast
            return record, RecordDraft(topic, queue_id, sys_flag, tags_code, keys, uniq_key,
                                       message.prepared_transaction_offset, None, -1,
                                       timestamp_position)
    return _encode_for_put(message, settings, now_ms)


def _encode_for_put(message: Message, settings: PutSettings, now_ms: int
                    ) -> tuple[bytearray, RecordDraft]:
    """`encode_for_put` in Python: every message when the kernel is not built, else the ones the
    compiled encoder declines. A hot path: only refusals and first sightings leave it for a helper."""
    body = message.body
    if type(body) is not bytes:
        body = _body_bytes(body)
    topic = message.topic
    queue_id = message.queue_id
    if not isinstance(topic, str) or not isinstance(queue_id, int):
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL, "topic must be a str and queue_id an int")
    if topic not in _VALID_TOPICS[settings.allow_v2_records]:
        _remember_topic(topic, settings)
    if not 0 <= queue_id <= MAX_QUEUE_ID or len(body) > settings.max_message_size:
        _refuse_queue_id_or_body(queue_id, body, settings)
    sys_flag = message.sys_flag
    flag = message.flag
    if (sys_flag or flag) and (
            not -(2**31) <= sys_flag < 2**31 or not -(2**31) <= flag < 2**31):
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL, "flag and sys_flag must be 32-bit ints")
    prepared_offset = message.prepared_transaction_offset
    if prepared_offset and (type(prepared_offset) is not int or
                            not -(2**63) <= prepared_offset < 2**63):
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                         "prepared_transaction_offset must be a 64-bit int")
    properties = build_properties(message)
    if "DELAY" in properties:
        topic, queue_id = _apply_delay(topic, queue_id, properties, sys_flag, settings)
    if settings.append_prop_crc:
        # CommitLog.asyncPutMessage: msg.deleteProperty(PROPERTY_CRC32) before encoding.
        properties.pop(prop_crc.PROPERTY_CRC32, None)
    # The store is handed messages directly (not through a broker's request parser), so it
    # serializes a default 16-bucket HashMap in either style, as the 5.3.3 fixtures show.
    properties_raw = _properties_raw(properties, settings.properties_style)
    if settings.append_prop_crc:
        properties_raw = prop_crc.reserve(properties_raw)
    if len(properties_raw) > MAX_PROPERTIES_LENGTH:
        _refuse_properties_size(properties, properties_raw)
    topic_raw = _topic_field(topic)
    version = 2 if settings.allow_v2_records and len(topic_raw) > 127 else 1
    born_timestamp = now_ms if message.born_timestamp is None else message.born_timestamp
    try:
        born = _host_field(message.born_host or "127.0.0.1:0")
        store = _host_field(settings.store_host)
        if len(topic_raw) > (127 if version == 1 else 32767):
            raise ValueError(f"topic of {len(topic_raw)} bytes does not fit a v{version} record")
        # The host bits must describe the host fields written.
        sys_flag = sys_flag & ~0x30 | (0x10 if len(born) == 20 else 0) | \
            (0x20 if len(store) == 20 else 0)
        record = encode_record(topic_raw, queue_id, flag, sys_flag, 0, 0, born_timestamp, born,
                               now_ms, store, 0, prepared_offset, body, properties_raw, version)
    except (ValueError, OverflowError, TypeError) as error:
        if not isinstance(error, ValueError):   # the codec names the field that does not fit
            error = _explain_encoding_error(error, message, settings, topic, queue_id, body,
                                            properties_raw, flag, sys_flag, born_timestamp, version,
                                            now_ms)
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL, str(error)) from None
    size = len(record)
    if size > settings.max_message_size + 65536 or \
            size + msgcodec.END_FILE_MIN_BLANK_LENGTH > settings.segment_size_bytes:
        _refuse_record_size(size, settings)
    delay_ms = -1
    if topic == SCHEDULE_TOPIC and "DELAY" in properties:
        # The tagsCode is the delivery time, known only once the store timestamp is (in the lock).
        delay_ms = delay_tags_code(properties, 0, settings.delay_levels_ms)
    draft = RecordDraft(
        topic, queue_id, sys_flag, _tags_code(properties.get("TAGS")), properties.get("KEYS", ""),
        properties.get("UNIQ_KEY"), prepared_offset, properties, delay_ms,
        msgcodec.BORN_HOST_POSITION + len(born),   # STORETIMESTAMP follows BORNHOST
        settings.append_prop_crc)
    return record, draft


# -- the cold branches of _encode_for_put: refusals and first sightings ----------------------------

def _body_bytes(body) -> bytes:
    """A body that is not `bytes`: a copy of a bytearray or memoryview, else PutRefused."""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL, "the body must be bytes")
    return bytes(body)


def validated_now(topic, settings: PutSettings) -> bool:
    """True when `topic` is a legal topic seen for the first time, now remembered; False when it was
    known already, is not a str or is illegal (the Python encoder then refuses it, in its order)."""
    valid_topics = _VALID_TOPICS[settings.allow_v2_records]
    if type(topic) is not str or topic in valid_topics or len(valid_topics) >= _VALID_TOPICS_MAX:
        return False
    try:
        validate_topic(topic, allow_v2=settings.allow_v2_records)
    except (InvalidTopicError, TypeError):
        return False
    valid_topics.add(topic)
    return True


def _remember_topic(topic: str, settings: PutSettings) -> None:
    """Validate a topic not seen before (PutRefused if illegal) and remember it (bounded)."""
    valid_topics = _VALID_TOPICS[settings.allow_v2_records]
    try:
        validate_topic(topic, allow_v2=settings.allow_v2_records)
    except (InvalidTopicError, TypeError) as error:
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL, str(error)) from None
    if len(valid_topics) < _VALID_TOPICS_MAX:
        valid_topics.add(topic)


def _refuse_queue_id_or_body(queue_id: int, body: bytes, settings: PutSettings) -> None:
    """PutRefused for a queue id out of range, else for a body over maxMessageSize."""
    if not 0 <= queue_id <= MAX_QUEUE_ID:
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                         f"queue id {queue_id} is outside 0..{MAX_QUEUE_ID}")
    raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                     f"body of {len(body)} bytes exceeds maxMessageSize "
                     f"({settings.max_message_size} bytes)")


def _refuse_properties_size(properties: dict[str, str], properties_raw: bytes) -> None:
    """PutRefused for a properties string over 32,767 bytes."""
    # Characters over the limit is MESSAGE_ILLEGAL (4.9.7's check); only bytes over it is
    # PROPERTIES_SIZE_EXCEEDED. Characters <= bytes, so only count them here.
    characters = sum(len(k) + len(v) + 2 for k, v in properties.items())
    if characters > MAX_PROPERTIES_LENGTH:
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                         f"properties text of {characters} characters exceeds 32767")
    raise PutRefused(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                     f"properties of {len(properties_raw)} bytes exceed 32767")


def _explain_encoding_error(error: Exception, message: Message, settings: PutSettings, topic: str,
                            queue_id: int, body: bytes, properties_raw: bytes, flag, sys_flag,
                            born_timestamp, version: int, now_ms: int) -> Exception:
    """The codec's ValueError naming the field that made the compiled encoder fail (`error` when
    the codec accepts the fields after all)."""
    try:
        msgcodec.encode_message(
            topic=topic, queue_id=queue_id, body=body, properties_raw=properties_raw,
            flag=flag, sys_flag=sys_flag, born_timestamp=born_timestamp,
            born_host=message.born_host or "127.0.0.1:0", store_timestamp=now_ms,
            store_host=settings.store_host, version=version)
    except ValueError as explained:
        return explained
    return error


def _refuse_record_size(size: int, settings: PutSettings) -> None:
    """PutRefused for a record over maxMessageSize + 64 KiB, else for one no segment can hold."""
    if size > settings.max_message_size + 65536:
        raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                         f"record of {size} bytes exceeds maxMessageSize + 64 KiB")
    raise PutRefused(PutMessageStatus.MESSAGE_ILLEGAL,
                     f"record of {size} bytes cannot fit a commit log segment of "
                     f"{settings.segment_size_bytes} bytes")
