"""One commit-log record: its layout, encode, patch and decode (spec §2, §14.5-14.7a).

B = 8 (IPv4) or 20 (IPv6, sysflag 0x10) bytes of BORNHOST, S likewise for STOREHOST (sysflag 0x20),
T = 1 (v1, magic 0xDAA320A7) or 2 (v2, magic 0xDAA320AB, [5.x]). Every integer is signed big-endian.

| field                       | offset       | size_bytes | meaning                                  |
|-----------------------------|--------------|------------|------------------------------------------|
| TOTALSIZE                   | 0            | 4          | length of the whole record               |
| MAGICCODE                   | 4            | 4          | v1 / v2 magic (BLANK magic: end of file) |
| BODYCRC                     | 8            | 4          | `zlib.crc32(body) & 0x7FFFFFFF`          |
| QUEUEID                     | 12           | 4          | queue id                                 |
| FLAG                        | 16           | 4          | producer's opaque flag                   |
| QUEUEOFFSET                 | 20           | 8          | queue_offset in the consume queue        |
| PHYSICALOFFSET              | 28           | 8          | phy_offset of this record                |
| SYSFLAG                     | 36           | 4          | bit field (§2.2)                         |
| BORNTIMESTAMP               | 40           | 8          | producer clock, ms                       |
| BORNHOST                    | 48           | B          | address + int port                       |
| STORETIMESTAMP              | 48+B         | 8          | broker clock, ms                         |
| STOREHOST                   | 56+B         | S          | address + int port                       |
| RECONSUMETIMES              | 56+B+S       | 4          | retries                                  |
| PREPARED TRANSACTION OFFSET | 60+B+S       | 8          | phy_offset of the half message (commits) |
| BODY LENGTH                 | 68+B+S       | 4          | n                                        |
| BODY                        | 72+B+S       | n          | raw bytes                                |
| TOPIC LENGTH                | 72+B+S+n     | T          | t (signed byte / short)                  |
| TOPIC                       | 72+B+S+n+T   | t          | UTF-8                                    |
| PROPERTIES LENGTH           | 72+B+S+n+T+t | 2          | p (signed short)                         |
| PROPERTIES                  | 74+B+S+n+T+t | p          | §2.3, see store.codec.properties         |

TOTALSIZE = 74 + B + S + n + T + t + p. A BLANK record is just TOTALSIZE (bytes to the end of the
file, >= 8) + BLANK magic.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from store.codec import msgid
from store.codec.properties import MAX_PROPERTIES_LENGTH, decode_properties
from store.errors import CorruptDataError
from store.kernel import encode_record
from store.kernel.decode import decode_records

MESSAGE_MAGIC_V1 = -626843481          # 0xDAA320A7
MESSAGE_MAGIC_V2 = -626843477          # 0xDAA320AB, [5.x] 2-byte topic length
BLANK_MAGIC = -875286124               # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
CRC_MASK = 0x7FFFFFFF

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK = 0x4, 0x8, 0xC   # short aliases
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_NEED_UNWRAP = 0x40
SYSFLAG_INNER_BATCH = 0x80
SYSFLAG_COMPRESSION_TYPE_MASK = 0x700

QUEUE_OFFSET_POSITION = 20
PHY_OFFSET_POSITION = 28
SYSFLAG_POSITION = 36
BORN_TIMESTAMP_POSITION = 40
BORN_HOST_POSITION = 48
MAX_TOPIC_LENGTH_V1_BYTES = 127
MAX_TOPIC_LENGTH_V2_BYTES = 32767

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

SIZE_MAGIC_STRUCT = struct.Struct(">ii")
HEAD_STRUCT = struct.Struct(">iiiiiqqi")                    # TOTALSIZE .. SYSFLAG
_OFFSETS = struct.Struct(">qq")                             # QUEUEOFFSET, PHYSICALOFFSET
LONG_STRUCT = struct.Struct(">q")
_TOPIC_LENGTH = {1: struct.Struct(">b"), 2: struct.Struct(">h")}
_PROPERTIES_LENGTH = struct.Struct(">h")
_MAGIC_OF_VERSION = {1: MESSAGE_MAGIC_V1, 2: MESSAGE_MAGIC_V2}
_VERSION_OF_MAGIC = {MESSAGE_MAGIC_V1: 1, MESSAGE_MAGIC_V2: 2}
# Whole fixed part (TOTALSIZE .. BODY LENGTH) per (B, S), hosts as one address+port byte string each.
_FIXED = {(b, s): struct.Struct(f">iiiiiqqiq{b}sq{s}siqi") for b in (8, 20) for s in (8, 20)}

assert SIZE_MAGIC_STRUCT.size == 8 and HEAD_STRUCT.size == 40 and _OFFSETS.size == 16
assert _TOPIC_LENGTH[1].size == 1 and _TOPIC_LENGTH[2].size == 2 and _PROPERTIES_LENGTH.size == 2
assert all(_FIXED[b, s].size == 72 + b + s for b, s in _FIXED)
assert QUEUE_OFFSET_POSITION + 8 == PHY_OFFSET_POSITION
assert MAX_PROPERTIES_LENGTH == MAX_TOPIC_LENGTH_V2_BYTES == 32767


def born_host_size(sys_flag: int) -> int:
    """B: 20 bytes when the BORNHOST_V6 bit is set, else 8."""
    return 20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8


def store_host_size(sys_flag: int) -> int:
    """S: 20 bytes when the STOREHOST_V6 bit is set, else 8."""
    return 20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8


def store_timestamp_position(sys_flag: int) -> int:
    """Position of STORETIMESTAMP inside a record: 48 + B."""
    return BORN_HOST_POSITION + born_host_size(sys_flag)


def compute_record_size(body_len: int, topic_len: int, props_len: int, *, born_v6: bool = False,
                        store_v6: bool = False, version: int = 1) -> int:
    """TOTALSIZE of a record with these field lengths (in bytes), as `calMsgLength` computes it."""
    return (72 + (20 if born_v6 else 8) + (20 if store_v6 else 8) + max(body_len, 0)
            + (2 if version == 2 else 1) + topic_len + 2 + max(props_len, 0))


# Not frozen: a frozen dataclass costs ~5x more to build, and one is built per message.
# Treat instances as immutable.
@dataclass(slots=True)
class MessageRecord:
    """One decoded commit-log record; `properties_raw` holds the stored PROPERTIES bytes exactly."""

    store_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]
    properties_raw: bytes

    @property
    def msg_id(self) -> str:
        """The offset msgId (store host + commit_log_offset, upper-case hex)."""
        return msgid.create_message_id(self.store_host, self.commit_log_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        """The KEYS property as stored (keys separated by single spaces), or None."""
        return self.properties.get("KEYS")

    @property
    def key_list(self) -> list[str]:
        """The non-empty tokens of KEYS split on " ", as the index builds them."""
        keys = self.properties.get("KEYS")
        return [key for key in keys.split(" ") if key] if keys else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get("UNIQ_KEY")

    @property
    def version(self) -> int:
        return 2 if self.magic == MESSAGE_MAGIC_V2 else 1

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & SYSFLAG_TRANSACTION_MASK


# Not frozen: a frozen dataclass costs ~5x more to build, and one is built per message.
# Treat instances as immutable.
@dataclass(slots=True)
class DispatchRequest:
    """What recovery and dispatch take from a record (spec §2.7); `keys` is "" without KEYS."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str] | None   # None when dispatch parsed the record in bulk (unread)


# -- encoding ---------------------------------------------------------------------------------------

def _explain_bad_field(fields: dict[str, tuple[int, int]]) -> str:
    """Name the field that made a struct pack fail (only called on the error path)."""
    for name, (value, bits) in fields.items():
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{name} must be an int, not {type(value).__name__}"
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            return f"{name} {value} does not fit a signed {bits}-bit field"
    return "a field does not fit its type"


def encode_message(*, topic: str, queue_id: int, body: bytes, properties_raw: bytes, flag: int = 0,
                   sys_flag: int = 0, queue_offset: int = 0, phy_offset: int = 0, born_timestamp: int,
                   born_host: str, store_timestamp: int, store_host: str, reconsume_times: int = 0,
                   prepared_transaction_offset: int = 0, version: int = 1) -> bytearray:
    """Encode one record. BODYCRC is computed and the IPv6 sysflag bits are set (or cleared) from the
    host strings. Raises ValueError for a field that does not fit its type (topic longer than 127
    bytes in v1, properties longer than 32,767 bytes, an int out of range, a bad host)."""
    born = msgid.encode_host(born_host)
    store = msgid.encode_host(store_host)
    topic_bytes = _topic_bytes(topic)
    magic = _MAGIC_OF_VERSION.get(version)
    if magic is None:
        raise ValueError(f"record version must be 1 or 2, not {version!r}")
    topic_length = len(topic_bytes)
    if topic_length > (MAX_TOPIC_LENGTH_V1_BYTES if version == 1 else MAX_TOPIC_LENGTH_V2_BYTES):
        raise ValueError(f"topic of {topic_length} bytes does not fit a v{version} record")
    properties_length = len(properties_raw)
    if properties_length > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties of {properties_length} bytes exceed {MAX_PROPERTIES_LENGTH}")
    body_length = len(body)
    b = len(born)
    s = len(store)
    total = 72 + b + s + body_length + version + topic_length + 2 + properties_length
    if isinstance(sys_flag, int):       # the host bits must describe the host fields written
        sys_flag = sys_flag & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6) \
            | (SYSFLAG_BORNHOST_V6 if b == 20 else 0) | (SYSFLAG_STOREHOST_V6 if s == 20 else 0)
    try:
        return encode_record(topic_bytes, queue_id, flag, sys_flag, queue_offset, phy_offset,
                             born_timestamp, born, store_timestamp, store, reconsume_times,
                             prepared_transaction_offset, body, properties_raw, version)
    except (OverflowError, TypeError):
        raise ValueError(_explain_bad_field({
            "TOTALSIZE": (total, 32), "queue_id": (queue_id, 32), "flag": (flag, 32),
            "queue_offset": (queue_offset, 64), "phy_offset": (phy_offset, 64),
            "sys_flag": (sys_flag, 32), "born_timestamp": (born_timestamp, 64),
            "store_timestamp": (store_timestamp, 64), "reconsume_times": (reconsume_times, 32),
            "prepared_transaction_offset": (prepared_transaction_offset, 64)})) from None


@lru_cache(maxsize=4096)
def _topic_bytes(topic: str) -> bytes:
    """UTF-8 of a topic, memoized: a store has few topics and they repeat on every put."""
    if not isinstance(topic, str):
        raise ValueError(f"topic must be a string, not {type(topic).__name__}")
    return topic.encode("utf-8")


def patch_message(buf, position: int, *, queue_offset: int, phy_offset: int,
                  store_timestamp: int) -> None:
    """Write QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP into the encoded record at `position`."""
    _OFFSETS.pack_into(buf, position + QUEUE_OFFSET_POSITION, queue_offset, phy_offset)
    sys_flag = int.from_bytes(buf[position + SYSFLAG_POSITION:position + SYSFLAG_POSITION + 4],
                              "big", signed=True)
    LONG_STRUCT.pack_into(buf, position + store_timestamp_position(sys_flag), store_timestamp)


def encode_blank(size: int) -> bytes:
    """The 8 bytes of a BLANK record covering `size` bytes (to the end of the file)."""
    if not END_FILE_MIN_BLANK_LENGTH <= size < 2**31:
        raise ValueError(f"a BLANK record covers 8..2**31-1 bytes, not {size}")
    return SIZE_MAGIC_STRUCT.pack(size, BLANK_MAGIC)


# -- decoding ---------------------------------------------------------------------------------------

class FieldLayout(NamedTuple):
    """Where the fields of one record are: `decode_message` and `record_check.check_message` read
    through it."""

    total_size: int
    magic: int
    version: int
    sys_flag: int
    body_position: int
    body_length: int          # BODY LENGTH if positive, else 0 (RocketMQ reads no body)
    topic_position: int
    topic_length: int
    properties_position: int
    properties_length: int    # PROPERTIES LENGTH if positive, else 0
    computed_size: int        # what `calMsgLength` makes of the field lengths (vs TOTALSIZE)


def field_layout(buf, position: int, end: int) -> FieldLayout:
    """Field positions of the message record at `position`, reading nothing at or past `end`.

    Raises CorruptDataError for a torn record (including the [5.x] rule: TOTALSIZE past `end`), an
    unknown magic or a negative TOPIC LENGTH, where RocketMQ's check answers -1.
    """
    if position < 0 or position + 8 > end:
        raise CorruptDataError(None, position, "TOTALSIZE and MAGICCODE run past the end (torn)")
    total_size, magic = SIZE_MAGIC_STRUCT.unpack_from(buf, position)
    version = _VERSION_OF_MAGIC.get(magic)
    if version is None:
        what = "a BLANK (end of file) record" if magic == BLANK_MAGIC else \
            f"magic {magic & 0xFFFFFFFF:#010x}"
        raise CorruptDataError(None, position + 4, f"{what} where a message record should start")
    if total_size > end - position or position + HEAD_STRUCT.size > end:
        raise CorruptDataError(None, position, f"TOTALSIZE {total_size} runs past the end (torn)")
    sys_flag = HEAD_STRUCT.unpack_from(buf, position)[7]
    body_length_position = position + 68 + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8) + \
        (20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8)
    if body_length_position + 4 > end:
        raise CorruptDataError(None, position, "fixed fields run past the end (torn)")
    n = int.from_bytes(buf[body_length_position:body_length_position + 4], "big", signed=True)
    n = n if n > 0 else 0
    topic_length_position = body_length_position + 4 + n
    if topic_length_position + version > end:
        raise CorruptDataError(None, body_length_position + 4, "BODY runs past the end (torn)")
    topic_length = _TOPIC_LENGTH[version].unpack_from(buf, topic_length_position)[0]
    if topic_length < 0:
        raise CorruptDataError(None, topic_length_position, f"negative TOPIC LENGTH {topic_length}")
    topic_position = topic_length_position + version
    properties_position = topic_position + topic_length + 2
    if properties_position > end:
        raise CorruptDataError(None, topic_position, "TOPIC runs past the end (torn)")
    p = _PROPERTIES_LENGTH.unpack_from(buf, properties_position - 2)[0]
    p = p if p > 0 else 0
    if properties_position + p > end:
        raise CorruptDataError(None, properties_position, "PROPERTIES run past the end (torn)")
    return FieldLayout(total_size, magic, version, sys_flag, body_length_position + 4, n,
                       topic_position, topic_length, properties_position, p,
                       properties_position + p - position)


def decode_message(buf, position: int = 0, *, check_crc: bool = False) -> MessageRecord:
    """Decode the record at `position` of `buf` (bytes, bytearray, memoryview or mmap).

    Raises CorruptDataError for a torn record, a BLANK or unknown magic, a negative topic length, a
    CRC mismatch (`check_crc`, bodies of 1+ bytes, like RocketMQ) or a TOTALSIZE that differs from
    the field lengths. A negative BODY or PROPERTIES LENGTH means "empty", as in RocketMQ.
    """
    layout = field_layout(buf, position, len(buf))
    b = born_host_size(layout.sys_flag)
    (total_size, magic, body_crc, queue_id, flag, queue_offset, phy_offset, sys_flag, born_timestamp,
     born, store_timestamp, store, reconsume_times, prepared_offset, _) = \
        _FIXED[b, store_host_size(layout.sys_flag)].unpack_from(buf, position)
    body = bytes(buf[layout.body_position:layout.body_position + layout.body_length])
    if check_crc and body and zlib.crc32(body) & CRC_MASK != body_crc:
        raise CorruptDataError(None, position + 8, f"BODYCRC {body_crc} does not match the body "
                                                   f"(crc {zlib.crc32(body) & CRC_MASK})")
    if layout.computed_size != total_size:
        raise CorruptDataError(None, position, f"TOTALSIZE {total_size} differs from the "
                                               f"{layout.computed_size} bytes of its fields")
    topic = bytes(buf[layout.topic_position:layout.topic_position + layout.topic_length])
    start = layout.properties_position
    properties_raw = bytes(buf[start:start + layout.properties_length])
    return MessageRecord(
        total_size, magic, body_crc, queue_id, flag, queue_offset, phy_offset, sys_flag,
        born_timestamp, msgid.host_to_string(born), store_timestamp, msgid.host_to_string(store),
        reconsume_times, prepared_offset, body, topic.decode("utf-8", "replace"),
        decode_properties(properties_raw) if properties_raw else {}, properties_raw)


def decode_messages(records: list) -> list[MessageRecord]:
    """`[decode_message(raw) for raw in records]` in one kernel call (store/kernel/decode.py):
    the same records, or the same CorruptDataError for the first record it refuses."""
    return decode_records(records, MessageRecord, decode_message, decode_properties,
                          msgid.host_to_string)
