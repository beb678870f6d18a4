"""Index file codec (spec §5): header, hash slots and entries. Pure bytes <-> values, no I/O.

An index file is ``[header 40 B][slot table: max_hash_slot_num x 4 B][entries: max_index_num x 20 B]``.

Header (40 bytes, big-endian):

| field            | offset | size_bytes | meaning                                                        |
|------------------|--------|------------|----------------------------------------------------------------|
| begin_timestamp  | 0      | 8          | store time (ms) of the first indexed message                   |
| end_timestamp    | 8      | 8          | store time (ms) of the last indexed message                    |
| begin_phy_offset | 16     | 8          | phy_offset of the first indexed message                        |
| end_phy_offset   | 24     | 8          | phy_offset of the last indexed message                         |
| hash_slot_count  | 32     | 4          | number of slots that have been occupied                        |
| index_count      | 36     | 4          | next entry number; starts at 1 (0 on disk in a brand-new file) |

Slot ``s`` (4 bytes at ``40 + 4*s``): number of the newest entry whose key hashes to ``s``; 0 = empty.

Entry number ``e`` (20 bytes at ``40 + 4*max_hash_slot_num + 20*e``; entry 0 is never used):

| field       | offset | size_bytes | meaning                                                         |
|-------------|--------|------------|-----------------------------------------------------------------|
| key_hash    | 0      | 4          | abs(javaHash(topic + "#" + key)), 0 for Integer.MIN_VALUE       |
| phy_offset  | 4      | 8          | phy_offset of the message                                       |
| time_diff_s | 12     | 4          | seconds between the store time and the header's begin_timestamp |
| prev_index  | 16     | 4          | previous entry number in the same slot, 0 = end of chain        |
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from store.codec.javahash import index_key_hash
from store.errors import CorruptDataError

INDEX_HEADER_SIZE = 40
INDEX_ENTRY_SIZE = 20
HASH_SLOT_SIZE = 4
INVALID_INDEX = 0
INT32_MAX = 2**31 - 1
KEY_SEPARATOR = "#"

# Header field positions (IndexHeader.*Index in RocketMQ).
BEGIN_TIMESTAMP_POSITION = 0
END_TIMESTAMP_POSITION = 8
BEGIN_PHY_OFFSET_POSITION = 16
END_PHY_OFFSET_POSITION = 24
HASH_SLOT_COUNT_POSITION = 32
INDEX_COUNT_POSITION = 36

HEADER_STRUCT = struct.Struct(">qqqqii")
ENTRY_STRUCT = struct.Struct(">iqii")
SLOT_STRUCT = struct.Struct(">i")
assert HEADER_STRUCT.size == INDEX_HEADER_SIZE
assert ENTRY_STRUCT.size == INDEX_ENTRY_SIZE
assert SLOT_STRUCT.size == HASH_SLOT_SIZE

ENTRY_DTYPE = np.dtype(
    [("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff_s", ">i4"), ("prev_index", ">i4")]
)
assert ENTRY_DTYPE.itemsize == INDEX_ENTRY_SIZE


@dataclass(frozen=True, slots=True)
class IndexHeader:
    """The 40-byte header of an index file, values exactly as stored."""

    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One 20-byte index entry."""

    key_hash: int
    phy_offset: int
    time_diff_s: int
    prev_index: int


def encode_header(header: IndexHeader) -> bytes:
    """Encode a header into its 40 bytes (raises struct.error for a field out of range)."""
    return HEADER_STRUCT.pack(
        header.begin_timestamp,
        header.end_timestamp,
        header.begin_phy_offset,
        header.end_phy_offset,
        header.hash_slot_count,
        header.index_count,
    )


def decode_header(buf, position: int = 0) -> IndexHeader:
    """Decode the header at `position` of `buf`; CorruptDataError if fewer than 40 bytes are there."""
    if position < 0 or len(buf) - position < INDEX_HEADER_SIZE:
        raise CorruptDataError(None, position, f"index header needs {INDEX_HEADER_SIZE} bytes")
    return IndexHeader(*HEADER_STRUCT.unpack_from(buf, position))


def encode_entry(entry: IndexEntry) -> bytes:
    """Encode an entry into its 20 bytes (raises struct.error for a field out of range)."""
    return ENTRY_STRUCT.pack(entry.key_hash, entry.phy_offset, entry.time_diff_s, entry.prev_index)


def decode_entry(buf, position: int = 0) -> IndexEntry:
    """Decode the entry at `position` of `buf`; CorruptDataError if fewer than 20 bytes are there."""
    if position < 0 or len(buf) - position < INDEX_ENTRY_SIZE:
        raise CorruptDataError(None, position, f"index entry needs {INDEX_ENTRY_SIZE} bytes")
    return IndexEntry(*ENTRY_STRUCT.unpack_from(buf, position))


def index_file_size(max_hash_slot_num: int, max_index_num: int) -> int:
    """Size in bytes of an index file with these dimensions (spec §5.1)."""
    return INDEX_HEADER_SIZE + max_hash_slot_num * HASH_SLOT_SIZE + max_index_num * INDEX_ENTRY_SIZE


def slot_position(slot: int) -> int:
    """Byte position of hash slot `slot` inside an index file."""
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(max_hash_slot_num: int, entry_number: int) -> int:
    """Byte position of entry number `entry_number` inside an index file."""
    return INDEX_HEADER_SIZE + max_hash_slot_num * HASH_SLOT_SIZE + entry_number * INDEX_ENTRY_SIZE


def build_key(topic: str, key: str) -> str:
    """The string that is hashed for an index entry: ``topic#key`` (IndexService.buildKey)."""
    return topic + KEY_SEPARATOR + key


def slot_of(key_hash: int, max_hash_slot_num: int) -> int:
    """Slot of a (non-negative) key hash (spec §5.4)."""
    return key_hash % max_hash_slot_num


def key_hash_and_slot(key_string: str, max_hash_slot_num: int) -> tuple[int, int]:
    """(keyHash, slot) of a full key string ``topic#key``."""
    key_hash = index_key_hash(key_string)
    return key_hash, key_hash % max_hash_slot_num


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """timeDiff stored for a put (spec §5.5): Java long division (toward zero), then clamped.

    0 when the header has no begin time yet; otherwise clamped to [0, Integer.MAX_VALUE].
    """
    if begin_timestamp <= 0:
        return 0
    diff_ms = store_timestamp - begin_timestamp
    # Java's `/` truncates toward zero; Python's `//` floors, so divide the magnitude.
    diff_s = diff_ms // 1000 if diff_ms >= 0 else -((-diff_ms) // 1000)
    if diff_s > INT32_MAX:
        return INT32_MAX
    if diff_s < 0:
        return 0
    return diff_s
