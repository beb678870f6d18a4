"""[5.x] The property CRC: a CRC of the whole record kept in its last property (spec §2.4).

With `enabledAppendPropCRC=true` (RocketMQ 5.x `MessageStoreConfig`) the put path reserves
`CommitLog.CRC32_RESERVED_LEN` = 20 bytes at the end of PROPERTIES (`MessageExtEncoder.encode`; a
`\x02` goes before them when the properties did not already end with one) and, in the put lock, once
queue offset, physical offset and store timestamp are in place, `DefaultAppendMessageCallback.doAppend`
fills them with `MessageDecoder.createCrc32`:

| part        | offset (from the record start) | size_bytes | meaning                                  |
|-------------|--------------------------------|------------|------------------------------------------|
| `__CRC32#`  | TOTALSIZE - 20                 | 8          | `MessageConst.PROPERTY_CRC32`            |
| `\x01`      | TOTALSIZE - 12                 | 1          | NAME_VALUE_SEPARATOR                     |
| digits      | TOTALSIZE - 11                 | 10         | the CRC, least significant digit first, `'0'`-padded |
| `\x02`      | TOTALSIZE - 1                  | 1          | PROPERTY_SEPARATOR                       |

The CRC is `UtilAll.crc32` (java.util.zip.CRC32 & 0x7FFFFFFF) of bytes [0, TOTALSIZE - 20) of the
record. BODYCRC still holds the body's CRC. The real 5.3.3 store of tests/data/fixtures/rocketmq-5.3.3/
prop-crc agrees with the source on every byte.

With `forceVerifyPropCRC=true`, `CommitLog.checkMessageAndReturnSize(checkCRC=true)` (recovery, with
`checkCRCOnRecover`) checks this CRC instead of BODYCRC: it takes the LAST `__CRC32#` property of the
parsed map (wherever it is), reads its characters right to left as `expected = expected * 10 + (c -
'0')` in Java int arithmetic, and compares that with the CRC of [end of PROPERTIES - TOTALSIZE, end of
PROPERTIES - 20). No property, or a negative parse, is a failure. A CRC of 0 (digits `0000000000`) is
valid: RocketMQ before 5.3.2 read it as "no CRC" and cut the log there (apache/rocketmq#9121, fixed by
#9122, in 5.3.3).
"""

from __future__ import annotations

import zlib

PROPERTY_CRC32 = "__CRC32#"
CRC32_RESERVED_LENGTH = 20           # CommitLog.CRC32_RESERVED_LEN: len("__CRC32#") + 1 + 10 + 1
CRC_DIGITS = 10
DIGITS_OFFSET_FROM_END = 11          # the digits start 11 bytes before the record's end
_CRC_MASK = 0x7FFFFFFF
_NAME = PROPERTY_CRC32.encode("ascii") + b"\x01"

# What `check_crc` asks of a record check (record_check.check_message, kernel.scan, the recovery walk):
# booleans keep working (False = 0, True = 1).
CRC_NONE = 0           # checkCRC false
CRC_BODY = 1           # checkCRC true, forceVerifyPropCRC false: BODYCRC against the body
CRC_PROPERTY = 2       # checkCRC true, forceVerifyPropCRC true: the `__CRC32#` property

assert len(_NAME) + CRC_DIGITS + 1 == CRC32_RESERVED_LENGTH


def crc_mode(check_crc_on_recover: bool, force_verify_prop_crc: bool) -> int:
    """The check recovery makes: `checkCRCOnRecover` and `forceVerifyPropCRC` as one CRC_* value."""
    if not check_crc_on_recover:
        return CRC_NONE
    return CRC_PROPERTY if force_verify_prop_crc else CRC_BODY


def crc_digits(crc: int) -> bytes:
    """`MessageDecoder.createCrc32`'s 10 digits of `crc` (0..2**31-1): least significant first."""
    if not 0 <= crc <= _CRC_MASK:
        raise ValueError(f"a property CRC is 0..2147483647, not {crc}")
    return str(crc).rjust(CRC_DIGITS, "0")[::-1].encode("ascii")


def trailer(crc: int = 0) -> bytes:
    """The 20 bytes `__CRC32#` \\x01 digits \\x02 (CRC 0 is the placeholder the put path encodes)."""
    return _NAME + crc_digits(crc) + b"\x02"


PLACEHOLDER = trailer(0)


def reserve(properties_raw: bytes) -> bytes:
    """`MessageExtEncoder.encode` with enabledAppendPropCRC: a `\x02` after properties that do not end
    with one, then the 20 reserved bytes (the placeholder, sealed in the put lock by `seal`)."""
    if properties_raw and not properties_raw.endswith(b"\x02"):
        properties_raw += b"\x02"
    return properties_raw + PLACEHOLDER


def delete_property(text: str, name: str = PROPERTY_CRC32) -> str:
    """`MessageUtils.deleteProperty` (what `CommitLog.asyncPutMessage`'s `msg.deleteProperty(
    PROPERTY_CRC32)` does to a properties string set beforehand, e.g. a re-put record's): every
    `name` + `\x01` entry is cut up to and including its `\x02`, or to the end without one."""
    if name not in text:
        return text
    kept = []
    start = 0
    for _ in range(len(text) + 1):              # bounded: every round moves `start` forward
        found = -1
        search = start
        while True:
            found = text.find(name, search)
            if found == -1:
                break
            search = found + len(name)
            if (found == 0 or text[found - 1] == "\x02") and \
                    len(text) > found + len(name) and text[found + len(name)] == "\x01":
                break
        if found == -1:
            kept.append(text[start:])
            break
        kept.append(text[start:found])
        end = text.find("\x02", found + len(name) + 1)
        if end == -1:
            break
        start = end + 1
    return "".join(kept)


def record_crc(buf, position: int, total_size: int) -> int:
    """`UtilAll.crc32` of the record at `position` up to its last 20 bytes."""
    return zlib.crc32(buf[position:position + total_size - CRC32_RESERVED_LENGTH]) & _CRC_MASK


def seal(record: bytearray, position: int = 0) -> int:
    """Write the property CRC of the finished record at `position` into its digits; returns it.

    The record's last 20 bytes must be the reserved trailer (offsets and store time already set)."""
    total_size = int.from_bytes(record[position:position + 4], "big", signed=True)
    end = position + total_size
    assert total_size >= CRC32_RESERVED_LENGTH and \
        record[end - CRC32_RESERVED_LENGTH:end - DIGITS_OFFSET_FROM_END] == _NAME, \
        "the record has no reserved property CRC trailer"
    crc = record_crc(record, position, total_size)
    record[end - DIGITS_OFFSET_FROM_END:end - 1] = crc_digits(crc)
    return crc


def has_reserved_trailer(buf, position: int, total_size: int) -> bool:
    """Whether the record's last 20 bytes are shaped like `__CRC32#` \\x01 10 bytes \\x02."""
    end = position + total_size
    return total_size >= CRC32_RESERVED_LENGTH and end <= len(buf) and \
        bytes(buf[end - CRC32_RESERVED_LENGTH:end - DIGITS_OFFSET_FROM_END]) == _NAME and \
        buf[end - 1] in (2, b"\x02")


def expected_crc(value: str) -> int:
    """What 5.3.3 makes of a `__CRC32#` value: Java `int` arithmetic over its UTF-16 code units,
    right to left, `expected = expected * 10 + (c - '0')` (negative: no usable CRC)."""
    units = value.encode("utf-16-be", "surrogatepass")
    expected = 0
    for index in range(len(units) - 2, -1, -2):
        expected = (expected * 10 + ((units[index] << 8) | units[index + 1]) - 48) & 0xFFFFFFFF
    return expected - (1 << 32) if expected & 0x80000000 else expected


def check_property_crc(buf, properties: dict[str, str] | None, properties_end: int,
                       total_size: int) -> tuple[bool, str]:
    """The `forceVerifyPropCRC` check of `checkMessageAndReturnSize` for the record whose PROPERTIES
    end at `properties_end` of `buf` (a segment: Java's buffer starts at the segment's first byte).
    Returns (ok, reason)."""
    value = properties.get(PROPERTY_CRC32) if properties else None
    if value is None:
        return False, "no __CRC32# property (forceVerifyPropCRC)"
    expected = expected_crc(value)
    if expected < 0:
        return False, f"__CRC32# {value!r} is not a CRC"
    start = properties_end - total_size
    if start < 0 or total_size < CRC32_RESERVED_LENGTH:
        return False, f"TOTALSIZE {total_size} leaves no range for the property CRC"
    crc = zlib.crc32(buf[start:properties_end - CRC32_RESERVED_LENGTH]) & _CRC_MASK
    if crc != expected:
        return False, f"property CRC {expected} does not match the record (crc {crc})"
    return True, ""
