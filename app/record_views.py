"""The CommitLog page's views of the newer store structures around one record.

- **DLedger entry** (`enableDLegerCommitLog=true`, RocketMQ 5.3.3 `DLedgerCommitLog`): every record
  sits inside an entry whose 48-byte header (`DLedgerEntryCoder.encode`: magic, size, index, term,
  pos, channel, chainCrc, bodyCrc, bodySize) starts at the record's physical offset - 48. The header
  comes from the inspection API (`store.inspect.dledger_entry`); here it becomes field rows, checks
  (magic `MAGIC_1`, size = 48 + bodySize, bodySize = the record's TOTALSIZE, pos = offset - 48) and a
  byte view whose first three 16-byte lines are the header, marked apart from the record's fields.
- **Property CRC** ([5.x] `enabledAppendPropCRC` / `forceVerifyPropCRC`): the `__CRC32#` property,
  the value 5.3.3 reads from its digits, the CRC recomputed and the verdict are the engine's
  (`store.inspect.record_hex`, apache/rocketmq#9852); nothing is computed here.

Pure functions over the values the inspection API returns; the page draws them.
"""

from __future__ import annotations

from app.hexview import BYTES_PER_ROW, Field, hex_rows
from store.inspect.dledger_view import DLEDGER_HEADER_FIELDS
from store.inspect.record_hex import hex_lines

ENTRY_HEADER_PART = "DLedger entry header"
RECORD_PART = "RocketMQ record"
ENTRY_COLUMNS = ("dledger_index", "term", "entry_pos", "entry_size")


def with_entry_columns(store, rows: list[dict]) -> list[dict]:
    """The record browser's rows with their DLedger entry's index, term, pos and size (a row that is
    no record, or whose entry cannot be read, gets empty cells)."""
    out = []
    for row in rows:
        entry = store.inspect.dledger_entry(row["phy_offset"]) if row.get("kind") == "RECORD" else None
        cells = {name: None for name in ENTRY_COLUMNS} if entry is None else {
            "dledger_index": entry.index, "term": entry.term, "entry_pos": entry.pos,
            "entry_size": entry.size}
        out.append({**{k: v for k, v in row.items() if k in ("phy_offset", "kind")}, **cells,
                    **{k: v for k, v in row.items() if k not in ("phy_offset", "kind")}})
    return out


def _describe_header_field(entry, name: str, value: int) -> str:
    if name == "magic":
        return f"{value} (MAGIC_1)" if entry.magic_ok else f"{value} (not MAGIC_1 = 1)"
    if name == "size":
        return f"{value} bytes = 48 + bodySize"
    if name == "pos":
        return f"{value} = the record's physical offset {entry.record_phy_offset} - 48"
    if name in ("chainCrc", "bodyCrc"):
        return f"{value} (DLedger 0.3.1.2 leaves it 0)" if value == 0 else str(value)
    if name == "bodySize":
        return f"{value} bytes: the RocketMQ record inside"
    return str(value)


def entry_header_fields(entry) -> list[Field]:
    """The header's nine fields (positions inside the entry, 0..47) as `hexview.Field` rows."""
    fields = []
    for number, (name, position, size) in enumerate(DLEDGER_HEADER_FIELDS, start=1):
        chunk = entry.header[position:position + size]
        value = int.from_bytes(chunk, "big", signed=True)
        fields.append(Field(number, f"entry.{name}", position, size, chunk.hex(" ").upper(),
                            _describe_header_field(entry, name, value)))
    return fields


def entry_checks(entry, record_size: int, record_phy_offset: int) -> list[dict]:
    """Does the header frame the record? One row per rule DLedger's recover walk relies on."""
    rows = [
        ("magic is MAGIC_1 (1)", entry.magic_ok, str(entry.magic)),
        ("size = 48 + bodySize", entry.size == 48 + entry.body_size,
         f"{entry.size} vs 48 + {entry.body_size}"),
        ("bodySize = the record's TOTALSIZE", entry.body_size == record_size,
         f"{entry.body_size} vs {record_size}"),
        ("pos + 48 = the record's physical offset", entry.record_phy_offset == record_phy_offset,
         f"{entry.pos} + 48 vs {record_phy_offset}"),
    ]
    return [{"check": check, "ok": ok, "detail": detail} for check, ok, detail in rows]


def combined_fields(entry, record_fields: list[Field]) -> list[dict]:
    """Header fields then the record's, positions inside the entry, each with its part."""
    rows = [{"part": ENTRY_HEADER_PART, **f.__dict__} for f in entry_header_fields(entry)]
    offset = len(entry.header)
    for f in record_fields:
        rows.append({"part": RECORD_PART, **f.__dict__, "number": len(rows) + 1,
                     "position": f.position + offset})
    return rows


def entry_hex_rows(entry, raw: bytes, record_fields: list[Field]) -> list[dict]:
    """The hex dump of the whole entry (header + record) from the entry's pos; each line says which
    part it belongs to (the 48-byte header is three whole lines) and which fields start in it."""
    header = len(entry.header)
    fields = entry_header_fields(entry) + [
        Field(f.number, f.name, f.position + header, f.size, f.raw_hex, f.value) for f in record_fields]
    rows = hex_rows(entry.header + bytes(raw), fields, entry.pos)
    assert header % BYTES_PER_ROW == 0
    return [{"part": ENTRY_HEADER_PART if row["position"] < header else RECORD_PART, **row}
            for row in rows]


def crc_shown(config, view) -> bool:
    """Show the property-CRC panel: the store appends or verifies `__CRC32#`, or the record has one."""
    if view is None:
        return False
    return bool(config.enabled_append_prop_crc or config.force_verify_prop_crc
                or view.has_trailer or view.stored_value is not None)


def crc_summary(view) -> dict:
    """The engine's verdict on one record's `__CRC32#` property, as rows for a table."""
    field = "none" if view.crc_start is None else \
        f"bytes {view.crc_start}..{len(view.raw) - 1} of the record (phy {view.phy_offset + view.crc_start:,})"
    return {"__CRC32# stored": view.stored_value, "read as (digits right to left)": view.expected_crc,
            "recomputed (bytes before the field)": view.computed_crc,
            "matches": "yes" if view.ok else "NO", "verdict": view.reason, "field": field}


def crc_hex_text(view) -> str:
    """The record's hex with the CRC field marked (`^^` digits, `--` name and separators)."""
    return "\n".join(hex_lines(view))
