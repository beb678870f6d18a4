"""The pull's last line against a wrong message: is a record the one its consume-queue unit names?

A unit whose record is not the one it names is never served. Units this process's dispatch wrote
at their record's own queue offset are right by construction (the file queue's `trusted_from`:
every unit at or past it; those below came from disk, or follow an out-of-order write). Any other
unit's record must carry the pulled queue id and the unit's queue offset (QUEUEID at byte 12,
QUEUEOFFSET at byte 20, `MessageDecoder`'s fixed header: one C-level unpack per record, `_carries`)
and the pulled topic (right after the body of a v1 record with IPv4 hosts, else `_topic_of`; a
decoded message's topic). The common unfiltered pull does the same check in C while it slices
(`store.kernel.pull.pull_unfiltered`, never laxer than `_carries`). When that fails, the
unit-by-unit loop of store/commitlog/read_path.py reads the window again checking each record in
full (`_wrong_record`) and skips the wrong ones like RocketMQ skips an unreadable unit (counted as
scanned, MESSAGE_WAS_REMOVING if nothing was taken before it), with a one-line reason each in
`GetMessageResult.skipped`. RocketMQ itself does not check this (`DefaultMessageStore.getMessage`
serves whatever the unit's offset and size select); it matters after a power cut or a recovery bug
leaves a unit pointing at another record. The RocksDB queue keeps no such boundary: its pulls
always check.
"""

from __future__ import annotations

import struct
from itertools import repeat

from store.codec.message import MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2
from store.consumequeue.lmq import record_lists_unit

_QUEUE_FIELDS = struct.Struct(">12xi4xq")      # a record's QUEUEID (byte 12), QUEUEOFFSET (20)
_MAGIC_SYSFLAG = struct.Struct(">4xi28xi")     # its MAGICCODE (byte 4), SYSFLAG (36)
# MAGICCODE (4), QUEUEID (12), QUEUEOFFSET (20), SYSFLAG (36), BODY LENGTH if IPv4 hosts (84)
_HEAD = struct.Struct(">4xi4xi4xq8xi44xi")
_TOPIC_PREFIXES: dict = {}   # topic -> its v1 TOPIC LENGTH byte + TOPIC bytes


def _carries(records, queue_id: int, first_offset: int, taken, topic: str, decode) -> bool:
    """True if every record carries `queue_id`, its unit's queue offset (`first_offset` plus its
    index in the window: `taken`, or 0, 1, ... when None) and `topic` (checked by `_found` after
    decoding when `decode` is True)."""
    if not records:
        return True
    if taken is None:
        offsets = range(first_offset, first_offset + len(records))
    else:
        offsets = [first_offset + index for index in taken]
    try:
        heads = list(map(_HEAD.unpack_from, records))
    except struct.error:   # shorter than a record header
        return False
    if decode is True:
        return [head[1:3] for head in heads] == list(zip(repeat(queue_id), offsets))
    expected = _TOPIC_PREFIXES.get(topic)
    if expected is None:
        if len(_TOPIC_PREFIXES) >= 1024:
            _TOPIC_PREFIXES.clear()
        encoded = topic.encode()
        expected = _TOPIC_PREFIXES[topic] = bytes((len(encoded) & 0xFF,)) + encoded
    width = len(expected)
    for (magic, got_queue_id, got_offset, sys_flag, body_length), record, offset in \
            zip(heads, records, offsets):
        if got_queue_id != queue_id or got_offset != offset:
            return False
        if magic == MESSAGE_MAGIC_V1 and not sys_flag & 0x30 and body_length >= 0:
            # v1 with IPv4 hosts: TOPIC LENGTH (1 byte) and TOPIC right after the body.
            if record[88 + body_length:88 + body_length + width] != expected:
                return False
        elif _topic_of(record) != expected[1:]:
            return False
    return True


def _topic_of(raw) -> bytes | None:
    """The TOPIC bytes of the record `raw` (None if its lengths run past it)."""
    try:
        magic, sys_flag = _MAGIC_SYSFLAG.unpack_from(raw)
    except struct.error:
        return None
    at = 68 + (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)   # BODY LENGTH
    at += 4 + max(int.from_bytes(raw[at:at + 4], "big", signed=True), 0)
    width = 2 if magic == MESSAGE_MAGIC_V2 else 1                              # TOPIC LENGTH
    length = int.from_bytes(raw[at:at + width], "big", signed=True)
    at += width
    if length < 0 or at + length > len(raw):
        return None
    return bytes(raw[at:at + length])


def _wrong_record(raw, topic: str, queue_id: int, queue_offset: int, phy_offset: int) -> str | None:
    """Why the record `raw` is not the one the unit (topic, queue_id, queue_offset) names; None
    if it is."""
    got_topic = _topic_of(raw)
    try:
        got_queue_id, got_offset = _QUEUE_FIELDS.unpack_from(raw)
    except struct.error:
        got_topic, got_queue_id, got_offset = None, None, None
    if got_topic == topic.encode() and got_queue_id == queue_id and got_offset == queue_offset or \
            record_lists_unit(raw, topic, queue_id, queue_offset):      # an LMQ unit
        return None
    where = f"unit {queue_offset} of {topic}/{queue_id} points at commit log offset {phy_offset}"
    if got_topic is None:
        return f"{where}, where no readable record of {len(raw)} bytes starts"
    return (f"{where}, whose record is of {got_topic.decode('utf-8', 'replace')}/{got_queue_id} "
            f"queue offset {got_offset}")
