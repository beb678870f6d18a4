"""A record's bytes as a hex view with its [5.x] property-CRC field marked (apache/rocketmq#9852).

Operators asked to see the bytes of a record whose `__CRC32#` check fails. `record_hex_view` judges
one record's property CRC the way 5.3.3's `checkMessageAndReturnSize` does with forceVerifyPropCRC
(`store.codec.prop_crc`) and says where the CRC field is; `hex_lines` prints it like `hexdump -C`,
with a marker line under every line that holds part of the 20-byte trailer:

| marker | bytes                                                        |
|--------|--------------------------------------------------------------|
| `--`   | `__CRC32#` and the `\\x01` after it, the final `\\x02`        |
| `^^`   | the 10 CRC digits (least significant first)                  |

Offsets on the left are physical offsets in the commit log. Nothing here reads files: the caller hands
in the record's bytes (`StoreInspector.record_hex`, `store.inspect.raw.prop_crc_failures`).
"""

from __future__ import annotations

from dataclasses import dataclass

from store.codec import prop_crc
from store.codec.message import field_layout
from store.codec.properties import decode_properties
from store.errors import CorruptDataError

HEX_BYTES_PER_LINE = 16
MAX_HEX_BYTES = 1 << 16      # a record's hex view shows at most this many bytes (then says so)


@dataclass(frozen=True)
class RecordHexView:
    """One record's bytes and its property-CRC verdict; positions are relative to the record."""

    phy_offset: int
    raw: bytes
    has_trailer: bool                # the last 20 bytes are shaped `__CRC32#` \x01 10 bytes \x02
    crc_start: int | None            # the trailer's first byte (None without a trailer)
    digits_start: int | None         # its first digit
    stored_value: str | None         # the (last) `__CRC32#` property's value, as parsed
    expected_crc: int | None         # what 5.3.3 reads from it (Java int, right to left)
    computed_crc: int | None         # CRC of bytes [0, TOTALSIZE - 20)
    ok: bool
    reason: str

    def as_dict(self) -> dict:
        """JSON-ready: the verdict, the CRC field's span and the hex lines."""
        return {"phyOffset": self.phy_offset, "size": len(self.raw), "ok": self.ok,
                "reason": self.reason, "crcFieldStart": self.crc_start,
                "crcDigitsStart": self.digits_start, "storedValue": self.stored_value,
                "expectedCrc": self.expected_crc, "computedCrc": self.computed_crc,
                "hex": hex_lines(self)}


def record_hex_view(raw: bytes, phy_offset: int) -> RecordHexView:
    """Judge the property CRC of the record `raw` (one whole record) that starts at `phy_offset`."""
    raw = bytes(raw)
    size = len(raw)
    has_trailer = prop_crc.has_reserved_trailer(raw, 0, size)
    crc_start = size - prop_crc.CRC32_RESERVED_LENGTH if has_trailer else None
    digits_start = size - prop_crc.DIGITS_OFFSET_FROM_END if has_trailer else None
    try:
        layout = field_layout(raw, 0, size)
    except CorruptDataError as error:
        return RecordHexView(phy_offset, raw, has_trailer, crc_start, digits_start, None, None, None,
                             False, f"not a readable record: {error.reason}")
    start = layout.properties_position
    properties = decode_properties(raw[start:start + layout.properties_length])
    value = properties.get(prop_crc.PROPERTY_CRC32)
    computed = prop_crc.record_crc(raw, 0, size) if size >= prop_crc.CRC32_RESERVED_LENGTH else None
    ok, reason = prop_crc.check_property_crc(raw, properties, start + layout.properties_length,
                                             layout.total_size)
    if layout.computed_size != layout.total_size:
        ok, reason = False, (reason + "; " if reason else "") + \
            f"TOTALSIZE {layout.total_size} differs from its fields ({layout.computed_size})"
    return RecordHexView(phy_offset, raw, has_trailer, crc_start, digits_start, value,
                         None if value is None else prop_crc.expected_crc(value), computed, ok,
                         reason or "property CRC matches")


def _marker(view: RecordHexView, index: int) -> str:
    if view.crc_start is None or index < view.crc_start:
        return "  "
    return "^^" if view.digits_start <= index < len(view.raw) - 1 else "--"


def hex_lines(view: RecordHexView, width: int = HEX_BYTES_PER_LINE) -> list[str]:
    """`hexdump -C`-style lines (physical offset, hex bytes, ASCII), each line holding part of the CRC
    trailer followed by a marker line (see the module docstring); a legend line ends it."""
    raw = view.raw[:MAX_HEX_BYTES]
    lines = []
    for line_start in range(0, len(raw), width):
        chunk = raw[line_start:line_start + width]
        hex_part = " ".join(f"{byte:02x}" for byte in chunk).ljust(width * 3 - 1)
        text = "".join(chr(byte) if 0x20 <= byte < 0x7F else "." for byte in chunk)
        lines.append(f"{view.phy_offset + line_start:016x}  {hex_part}  |{text}|")
        markers = [_marker(view, line_start + i) for i in range(len(chunk))]
        if any(m != "  " for m in markers):
            lines.append(" " * 18 + " ".join(markers).rstrip())
    if len(view.raw) > len(raw):
        lines.append(f"... {len(view.raw) - len(raw)} more bytes not shown")
    if view.crc_start is not None:
        lines.append(f"CRC field: bytes {view.crc_start}..{len(view.raw) - 1} of the record "
                     f"(^^ = the 10 digits, least significant first: stored {view.stored_value!r}"
                     f" -> {view.expected_crc}, computed {view.computed_crc})")
    else:
        lines.append(f"no __CRC32# trailer at the end of the record (computed CRC "
                     f"{view.computed_crc})")
    return lines
