"""DLedger's on-disk layouts (openmessaging/dledger `dledger-all-0.3.1.2`, used by RocketMQ 5.3.3).

Entry (`DLedgerEntryCoder.encode`, fields of `DLedgerEntry`), big-endian, at the entry's `pos`:

| field      | offset | size_bytes | meaning                                                         |
|------------|--------|------------|-----------------------------------------------------------------|
| magic      | 0      | 4          | `DLedgerMmapFileStore.MAGIC_1` = 1 (`CURRENT_MAGIC`)            |
| size       | 4      | 4          | whole entry: 48 + body length (`computeSizeInBytes`)           |
| index      | 8      | 8          | entry number, 0, 1, ... (`ledgerEndIndex + 1`)                 |
| term       | 16     | 8          | the leader's term when it was appended                          |
| pos        | 24     | 8          | the entry's own offset in the data files (`POS_OFFSET` = 24)   |
| channel    | 32     | 4          | reserved, 0                                                     |
| chainCrc   | 36     | 4          | reserved for a chained CRC; 0.3.1.2 never sets it (0)           |
| bodyCrc    | 40     | 4          | 0.3.1.2 never sets it (0)                                        |
| bodySize   | 44     | 4          | body length                                                      |
| body       | 48     | bodySize   | one whole RocketMQ record (`BODY_OFFSET` = `HEADER_SIZE` 44 + 4) |

BLANK (`MmapFileList.preAppend`): when an entry plus `MIN_BLANK_LEN` (8) bytes does not fit in the
rest of a file, the file ends with magic `BLANK_MAGIC_CODE` (-1), then the bytes left, then zeros.
Note the order: magic first, unlike a commit-log BLANK (TOTALSIZE first).

Index unit (`DLedgerEntryCoder.encodeIndex`, `INDEX_UNIT_SIZE` = 32), unit k at byte 32 k:

| field | offset | size_bytes |
|-------|--------|------------|
| magic | 0      | 4          |
| pos   | 4      | 8          |
| size  | 12     | 4          |
| index | 16     | 8          |
| term  | 24     | 8          |
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from store.errors import CorruptDataError

ENTRY_MAGIC_1 = 1                       # DLedgerMmapFileStore.MAGIC_1 = CURRENT_MAGIC
BLANK_MAGIC = -1                        # MmapFileList.BLANK_MAGIC_CODE
MIN_BLANK_BYTES = 8                     # MmapFileList.MIN_BLANK_LEN
ENTRY_POS_POSITION = 24                 # DLedgerEntry.POS_OFFSET
ENTRY_HEADER_BYTES = 48                 # DLedgerEntry.BODY_OFFSET (HEADER_SIZE 44 + bodySize 4)
INDEX_UNIT_BYTES = 32                   # DLedgerMmapFileStore.INDEX_UNIT_SIZE
DEFAULT_INDEX_FILE_BYTES = INDEX_UNIT_BYTES * 5 * 1024 * 1024   # DLedgerConfig.mappedFileSizeForEntryIndex

_ENTRY = struct.Struct(">iiqqqiiii")
_INDEX = struct.Struct(">iqiqq")
_BLANK = struct.Struct(">ii")
assert _ENTRY.size == ENTRY_HEADER_BYTES and _INDEX.size == INDEX_UNIT_BYTES


@dataclass(frozen=True, slots=True)
class EntryHeader:
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_size: int

    @property
    def body_pos(self) -> int:
        """RocketMQ's physical offset of the record inside (`pos + BODY_OFFSET`)."""
        return self.pos + ENTRY_HEADER_BYTES


@dataclass(frozen=True, slots=True)
class IndexUnit:
    magic: int
    pos: int
    size: int
    index: int
    term: int


def decode_entry_header(buffer, position: int, *, path: str | None = None) -> EntryHeader:
    """The 48-byte header at `position` (no validation beyond length)."""
    if position < 0 or position + ENTRY_HEADER_BYTES > len(buffer):
        raise CorruptDataError(path, position, f"no room for a {ENTRY_HEADER_BYTES}-byte DLedger "
                                               f"entry header ({len(buffer) - position} bytes left)")
    return EntryHeader(*_ENTRY.unpack_from(buffer, position))


def encode_entry_header(*, size: int, index: int, term: int, pos: int, body_size: int,
                        magic: int = ENTRY_MAGIC_1, channel: int = 0, chain_crc: int = 0,
                        body_crc: int = 0) -> bytes:
    return _ENTRY.pack(magic, size, index, term, pos, channel, chain_crc, body_crc, body_size)


def decode_index_unit(buffer, position: int, *, path: str | None = None) -> IndexUnit:
    if position < 0 or position + INDEX_UNIT_BYTES > len(buffer):
        raise CorruptDataError(path, position, f"no room for a {INDEX_UNIT_BYTES}-byte DLedger "
                                               f"index unit ({len(buffer) - position} bytes left)")
    return IndexUnit(*_INDEX.unpack_from(buffer, position))


def encode_index_unit(*, pos: int, size: int, index: int, term: int,
                      magic: int = ENTRY_MAGIC_1) -> bytes:
    return _INDEX.pack(magic, pos, size, index, term)


def encode_blank(free_bytes: int) -> bytes:
    """The 8 bytes that start a BLANK filling the `free_bytes` left in a file (zeros follow)."""
    assert free_bytes >= MIN_BLANK_BYTES
    return _BLANK.pack(BLANK_MAGIC, free_bytes)
