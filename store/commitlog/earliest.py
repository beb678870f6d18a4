"""[5.x] The store-wide earliest message time, as RocketMQ 5.3.3 computes it (bug included).

`DefaultMessageStore.getEarliestMessageTime` asks `CommitLog.pickupStoreTimestamp(minPhyOffset, size)`
for the STORETIMESTAMP of the first record (a DLedger log: `minPhyOffset + DLedgerEntry.BODY_OFFSET`):

| step | 5.3.3                                                                                  |
|------|----------------------------------------------------------------------------------------|
| 1    | `size` = MESSAGE_STORE_TIMESTAMP_POSITION (56) + 8, or + 20 when brokerIP1 is IPv6     |
| 2    | -1 unless minOffset <= offset and offset + size <= maxOffset                           |
| 3    | read `size` bytes; the store time is at 48 + 8 (IPv4 born host) or 48 + 20 (IPv6)      |
| 4    | an IPv6 born host with a 64-byte read: `getLong(68)` throws IndexOutOfBoundsException  |

We raise `EarliestTimeUnavailable` at step 4 (carrying the first record's real store time) so that
the CLI and the dashboard can say in words what happened instead of showing an error.
"""

from __future__ import annotations

from store.codec import message as msgcodec
from store.errors import EarliestTimeUnavailable

MESSAGE_STORE_TIMESTAMP_POSITION = 56        # MessageDecoder.MESSAGE_STORE_TIMESTAMP_POSITION
DLEDGER_BODY_OFFSET = 48                     # DLedgerEntry.BODY_OFFSET
_MESSAGE_MAGICS = (msgcodec.MESSAGE_MAGIC_V1, msgcodec.MESSAGE_MAGIC_V2)


def _first_record_offset(commit_log, min_offset: int) -> int | None:
    for offset in (min_offset, min_offset + DLEDGER_BODY_OFFSET):
        head = commit_log.read(offset, 8)
        if head is not None and int.from_bytes(head[4:8], "big", signed=True) in _MESSAGE_MAGICS:
            return offset
    return None


def earliest_message_time_5x(commit_log, store_host: str) -> int:
    """What 5.3.3's store-wide `getEarliestMessageTime` answers (-1 when it answers -1); raises
    EarliestTimeUnavailable where it throws (see the module docstring)."""
    min_offset = commit_log.min_offset()
    offset = _first_record_offset(commit_log, min_offset)
    if offset is None:
        return -1
    window = MESSAGE_STORE_TIMESTAMP_POSITION + len(msgcodec.msgid.encode_host(store_host))
    if offset < min_offset or offset + window > commit_log.max_offset():
        return -1
    head = commit_log.read(offset, window)
    if head is None:
        return -1
    sys_flag = int.from_bytes(head[msgcodec.SYSFLAG_POSITION:msgcodec.SYSFLAG_POSITION + 4], "big",
                              signed=True)
    position = msgcodec.store_timestamp_position(sys_flag)
    if position + 8 > window:
        raw = commit_log.read(offset + position, 8)
        first = -1 if raw is None else int.from_bytes(raw, "big", signed=True)
        raise EarliestTimeUnavailable(
            f"RocketMQ 5.3.3 cannot compute this when the first record's born host is IPv6 (its "
            f"getEarliestMessageTime bug: it reads {window} bytes of the record at {offset} and its "
            f"store time sits at bytes {position}..{position + 7})", first)
    return int.from_bytes(head[position:position + 8], "big", signed=True)
