"""An annotated hex view of one commit-log record (spec §2.1): every field with its position, size,
raw bytes and decoded value, the body CRC recomputed, and the offset msgId decoded back.

Pure functions over bytes; the page shows the result with st.dataframe / st.code.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from store.codec import message as msgcodec
from store.codec.msgid import create_message_id, decode_host, decode_message_id
from store.codec.properties import decode_properties

BYTES_PER_ROW = 16
MAX_HEX_BYTES = 4096


@dataclass(frozen=True)
class Field:
    number: int
    name: str
    position: int        # inside the record
    size: int
    raw_hex: str
    value: str


def _int(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


def _short_hex(raw: bytes, limit: int = 24) -> str:
    text = raw[:limit].hex(" ").upper()
    return text + (f" … (+{len(raw) - limit} bytes)" if len(raw) > limit else "")


def annotate_record(raw: bytes) -> list[Field]:
    """Field table of a v1/v2 record; raises CorruptDataError (via the codec) for a torn record."""
    record = msgcodec.decode_message(raw)   # validates lengths first
    sys_flag = record.sys_flag
    born = msgcodec.born_host_size(sys_flag)
    store = msgcodec.store_host_size(sys_flag)
    topic_len_size = 2 if record.version == 2 else 1
    layout = [
        ("TOTALSIZE", 4, lambda b: f"{_int(b)} bytes"),
        ("MAGICCODE", 4, lambda b: f"0x{b.hex().upper()} (v{record.version})"),
        ("BODYCRC", 4, lambda b: str(_int(b))),
        ("QUEUEID", 4, lambda b: str(_int(b))),
        ("FLAG", 4, lambda b: str(_int(b))),
        ("QUEUEOFFSET", 8, lambda b: str(_int(b))),
        ("PHYSICALOFFSET", 8, lambda b: str(_int(b))),
        ("SYSFLAG", 4, lambda b: describe_sys_flag(_int(b))),
        ("BORNTIMESTAMP", 8, lambda b: f"{_int(b)} ms"),
        ("BORNHOST", born, lambda b: decode_host(b, 0, born == 20)),
        ("STORETIMESTAMP", 8, lambda b: f"{_int(b)} ms"),
        ("STOREHOST", store, lambda b: decode_host(b, 0, store == 20)),
        ("RECONSUMETIMES", 4, lambda b: str(_int(b))),
        ("PREPARED TRANSACTION OFFSET", 8, lambda b: str(_int(b))),
        ("BODY LENGTH", 4, lambda b: f"{_int(b)} bytes"),
        ("BODY", len(record.body), lambda b: f"{len(b)} bytes (see the body viewer)"),
        ("TOPIC LENGTH", topic_len_size, lambda b: f"{_int(b)} bytes"),
        ("TOPIC", len(record.topic.encode("utf-8")), lambda b: repr(b.decode("utf-8", "replace"))),
        ("PROPERTIES LENGTH", 2, lambda b: f"{_int(b)} bytes"),
        ("PROPERTIES", len(record.properties_raw), lambda b: repr(decode_properties(bytes(b)))),
    ]
    fields = []
    position = 0
    for number, (name, size, describe) in enumerate(layout, start=1):
        chunk = bytes(raw[position:position + size])
        fields.append(Field(number, name, position, size, _short_hex(chunk), describe(chunk)))
        position += size
    assert position == record.store_size, (position, record.store_size)
    return fields


def describe_sys_flag(sys_flag: int) -> str:
    names = []
    if sys_flag & msgcodec.SYSFLAG_COMPRESSED:
        names.append("COMPRESSED")
    if sys_flag & msgcodec.SYSFLAG_MULTI_TAGS:
        names.append("MULTI_TAGS")
    names.append({0x0: "TRANSACTION_NOT_TYPE", 0x4: "TRANSACTION_PREPARED", 0x8: "TRANSACTION_COMMIT",
                  0xC: "TRANSACTION_ROLLBACK"}[sys_flag & msgcodec.SYSFLAG_TRANSACTION_MASK])
    if sys_flag & 0x10:
        names.append("BORNHOST_V6")
    if sys_flag & 0x20:
        names.append("STOREHOST_V6")
    return f"{sys_flag} = " + " | ".join(names)


@dataclass(frozen=True)
class RecordCheck:
    stored_crc: int
    computed_crc: int
    msg_id: str
    msg_id_host: str
    msg_id_phy_offset: int
    phy_offset_matches: bool

    @property
    def crc_ok(self) -> bool:
        return self.stored_crc == self.computed_crc


def check_record(raw: bytes, phy_offset: int) -> RecordCheck:
    """Recompute BODYCRC (CRC-32 masked to 31 bits) and decode the offset msgId back."""
    record = msgcodec.decode_message(raw)
    computed = zlib.crc32(record.body) & msgcodec.CRC_MASK
    msg_id = create_message_id(record.store_host, record.commit_log_offset)
    host, decoded_offset = decode_message_id(msg_id)
    return RecordCheck(record.body_crc, computed, msg_id, host, decoded_offset,
                       record.commit_log_offset == phy_offset)


def hex_rows(raw: bytes, fields: list[Field], base_phy_offset: int,
             max_bytes: int = MAX_HEX_BYTES) -> list[dict]:
    """Classic hex dump rows (absolute offset, 16 bytes, ASCII) with the fields that start in each."""
    starts: dict[int, list[str]] = {}
    for f in fields:
        if f.size:
            starts.setdefault(f.position // BYTES_PER_ROW, []).append(f"{f.name}@{f.position}")
    rows = []
    shown = raw[:max_bytes]
    for row_start in range(0, len(shown), BYTES_PER_ROW):
        chunk = shown[row_start:row_start + BYTES_PER_ROW]
        rows.append({
            "phy_offset": base_phy_offset + row_start,
            "position": row_start,
            "hex": chunk.hex(" ").upper(),
            "ascii": "".join(chr(b) if 32 <= b < 127 else "." for b in chunk),
            "fields starting here": ", ".join(starts.get(row_start // BYTES_PER_ROW, [])),
        })
    return rows


def record_body(raw: bytes) -> bytes:
    """The body of an encoded record (raises CorruptDataError for bytes that are not one)."""
    return msgcodec.decode_message(raw).body
