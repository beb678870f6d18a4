"""Is there a valid record here? RocketMQ's `CommitLog.checkMessageAndReturnSize` (spec §2.7).

Recovery, dispatch and the cross-check ask it of every record they cannot take from the compiled scan:
`check_message` answers with a `CheckResult` (a record and its `DispatchRequest`, a BLANK, or invalid)
and never raises for any bytes. The record layout it walks is the table in `store.codec.message`.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

from store.codec.javahash import tags_code as compute_tags_code
from store.codec.message import (
    BLANK_MAGIC, CRC_MASK, HEAD_STRUCT, LONG_STRUCT, SCHEDULE_TOPIC, SIZE_MAGIC_STRUCT, DispatchRequest,
    field_layout, store_timestamp_position,
)
from store.codec.prop_crc import CRC_PROPERTY, check_property_crc
from store.codec.properties import decode_properties
from store.errors import CorruptDataError

CHECK_RECORD = "RECORD"
CHECK_BLANK = "BLANK"
CHECK_INVALID = "INVALID"

PROPERTY_DELAY = "DELAY"
# messageDelayLevel default "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".
DEFAULT_DELAY_LEVELS_MS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
                           420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000)


class CheckResult(NamedTuple):
    """`kind` is CHECK_RECORD (request set), CHECK_BLANK (size 0) or CHECK_INVALID (size -1 for a
    torn record or unknown magic, TOTALSIZE for a length mismatch)."""

    kind: str
    size: int
    request: DispatchRequest | None = None

    RECORD = CHECK_RECORD
    BLANK = CHECK_BLANK
    INVALID = CHECK_INVALID


_RESULT_BLANK = CheckResult(CHECK_BLANK, 0, None)
_RESULT_INVALID = CheckResult(CHECK_INVALID, -1, None)


def _java_int(text: str) -> int | None:
    """`Integer.parseInt(text)`, or None where Java would throw NumberFormatException."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isdecimal():
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


def check_message(buf, position: int, *, check_crc: bool, limit: int | None = None,
                  delay_levels_ms=DEFAULT_DELAY_LEVELS_MS) -> CheckResult:
    """RocketMQ's `checkMessageAndReturnSize` (spec §2.7) on the record at `position` of `buf`.

    `check_crc` is a `store.codec.prop_crc` CRC_* mode (False/True: none/BODYCRC; CRC_PROPERTY: the
    [5.x] `__CRC32#` record CRC of `forceVerifyPropCRC`, checked after the DELAY, before the length,
    as in 5.3.3). `limit` is the first position of `buf` that may not be read (a file's read
    position). The [5.x] rule applies: a message whose TOTALSIZE reaches past `limit` is torn (size -1); a BLANK only needs
    its 8 header bytes. `delay_levels_ms` gives SCHEDULE_TOPIC_XXXX records their delivery-time
    tagsCode (spec §4.3); a DELAY that Java cannot parse makes the record invalid, as in RocketMQ.
    Never raises for any bytes.
    """
    end = len(buf) if limit is None or limit > len(buf) else limit
    if 0 <= position and position + 8 <= end and \
            SIZE_MAGIC_STRUCT.unpack_from(buf, position)[1] == BLANK_MAGIC:
        return _RESULT_BLANK
    try:
        layout = field_layout(buf, position, end)
    except CorruptDataError:                   # RocketMQ's catch-all answers -1
        return _RESULT_INVALID
    _, _, body_crc, queue_id, _, queue_offset, phy_offset, sys_flag = HEAD_STRUCT.unpack_from(buf, position)
    body_position = layout.body_position
    property_crc = check_crc == CRC_PROPERTY     # forceVerifyPropCRC: the record CRC, not BODYCRC
    if check_crc and not property_crc and layout.body_length and body_crc != \
            zlib.crc32(buf[body_position:body_position + layout.body_length]) & CRC_MASK:
        return _RESULT_INVALID
    store_timestamp = LONG_STRUCT.unpack_from(buf, position + store_timestamp_position(sys_flag))[0]
    prepared_offset = LONG_STRUCT.unpack_from(buf, body_position - 12)[0]
    topic = bytes(buf[layout.topic_position:layout.topic_position + layout.topic_length]) \
        .decode("utf-8", "replace")
    start = layout.properties_position
    properties = decode_properties(buf[start:start + layout.properties_length]) \
        if layout.properties_length else {}
    tags_code = compute_tags_code(properties.get("TAGS"))
    if topic == SCHEDULE_TOPIC and PROPERTY_DELAY in properties:
        level = _java_int(properties[PROPERTY_DELAY])
        if level is None:                      # Integer.parseInt throws; RocketMQ answers -1
            return _RESULT_INVALID
        level = min(level, len(delay_levels_ms))
        if level > 0:
            tags_code = store_timestamp + delay_levels_ms[level - 1]
    total_size = layout.total_size
    if property_crc and not check_property_crc(buf, properties, start + layout.properties_length,
                                               total_size)[0]:
        return _RESULT_INVALID
    if layout.computed_size != total_size:
        return CheckResult(CHECK_INVALID, total_size if total_size > 0 else -1, None)
    return CheckResult(CHECK_RECORD, total_size, DispatchRequest(
        topic, queue_id, phy_offset, total_size, tags_code, store_timestamp, queue_offset,
        properties.get("KEYS", ""), properties.get("UNIQ_KEY"), sys_flag, prepared_offset, properties))
