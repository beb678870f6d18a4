"""`DLedgerViewsMixin` of `StoreInspector`: the DLedger entry around a record, and the log's state.

On a store with `enableDLegerCommitLog=true` (RocketMQ 5.3.3 `DLedgerCommitLog`) every RocketMQ record
sits inside a DLedger entry whose 48-byte header (`DLedgerEntryCoder.encode`, fields of `DLedgerEntry`:
magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodySize; `store.dledger.entry_codec`)
starts at `pos` = the record's physical offset - 48 (`wroteOffset = pos + DLedgerEntry.BODY_OFFSET`).
The dashboard shows those header fields next to the record, and the header bytes apart from the
record's in its byte view. On a plain commit log every method here answers None / False.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from store.dledger.commit_log import DLedgerCommitLog
from store.dledger.entry_codec import ENTRY_HEADER_BYTES, ENTRY_MAGIC_1, decode_entry_header

__all__ = ["DLEDGER_HEADER_FIELDS", "DLedgerEntryView", "DLedgerLogView", "DLedgerViewsMixin"]

# (name, position, size) of the entry header's fields, as DLedgerEntryCoder.encode writes them.
DLEDGER_HEADER_FIELDS = (("magic", 0, 4), ("size", 4, 4), ("index", 8, 8), ("term", 16, 8),
                         ("pos", 24, 8), ("channel", 32, 4), ("chainCrc", 36, 4), ("bodyCrc", 40, 4),
                         ("bodySize", 44, 4))


@dataclass(frozen=True)
class DLedgerEntryView:
    """One entry's header as stored, where it is, and whether it frames the record it is asked for."""

    file_name: str
    position: int                 # the header's first byte in its data file
    header: bytes                 # the 48 header bytes
    magic: int
    size: int                     # whole entry: 48 + bodySize
    index: int
    term: int
    pos: int                      # the entry's own offset in the data files
    channel: int
    chain_crc: int
    body_crc: int
    body_size: int

    @property
    def record_phy_offset(self) -> int:
        """RocketMQ's physical offset of the record inside (pos + 48)."""
        return self.pos + ENTRY_HEADER_BYTES

    @property
    def magic_ok(self) -> bool:
        return self.magic == ENTRY_MAGIC_1

    def as_row(self) -> dict:
        return {"dledger_index": self.index, "term": self.term, "entry_pos": self.pos,
                "entry_size": self.size, "magic": self.magic, "channel": self.channel,
                "chain_crc": self.chain_crc, "body_crc": self.body_crc, "body_size": self.body_size}


@dataclass(frozen=True)
class DLedgerLogView:
    """Where the DLedger log lives and `DLedgerMmapFileStore`'s state after recovery (-1: none)."""

    base_dir: str
    data_dir: str
    index_dir: str
    self_id: str
    ledger_begin_index: int
    ledger_end_index: int
    ledger_end_term: int
    committed_index: int
    committed_pos: int
    current_term: int


class DLedgerViewsMixin:
    """Needs `self._commit_log` (see `StoreInspector`)."""

    @property
    def is_dledger(self) -> bool:
        """True when the log is a DLedger log (`dledger-<id>/data`), not `commitlog/`."""
        return isinstance(self._commit_log, DLedgerCommitLog)

    def log_dir(self) -> str:
        """The directory holding the log's segment files."""
        return self._commit_log.mapped_files.directory

    def dledger_log(self) -> DLedgerLogView | None:
        """The DLedger log's directories and state; None on a plain commit log."""
        if not self.is_dledger:
            return None
        layout, state = self._commit_log.layout, self._commit_log.state
        return DLedgerLogView(layout.base_dir, layout.data_dir, layout.index_dir, str(layout.self_id),
                              state.ledger_begin_index, state.ledger_end_index, state.ledger_end_term,
                              state.committed_index, state.committed_pos, state.current_term)

    def dledger_entry(self, record_phy_offset: int) -> DLedgerEntryView | None:
        """The entry whose body is the record at `record_phy_offset`: its header at offset - 48, read
        as stored. None on a plain commit log, or when no entry header framing that record is there
        (the header's pos must equal offset - 48)."""
        if not self.is_dledger:
            return None
        entry_pos = record_phy_offset - ENTRY_HEADER_BYTES
        mapped = self._commit_log.mapped_files.find_file(max(entry_pos, 0))
        if entry_pos < 0 or mapped is None:
            return None
        position = entry_pos - mapped.file_from_offset
        raw = mapped.read(position, ENTRY_HEADER_BYTES, unchecked=True)
        if raw is None:
            return None
        header = decode_entry_header(raw, 0, path=mapped.path)
        if header.pos != entry_pos:
            return None
        return DLedgerEntryView(os.path.basename(mapped.path), position, bytes(raw), header.magic,
                                header.size, header.index, header.term, header.pos, header.channel,
                                header.chain_crc, header.body_crc, header.body_size)
