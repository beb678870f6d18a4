"""`DLedgerCommitLog`: the DLedger data files presented as the commit log the engine reads.

RocketMQ's `DLedgerCommitLog` (5.3.3) reads a record at physical offset `o` from data file
`o / mappedFileSizeForEntryData`, position `o % size` (`getData`): the same place as in a commit log,
because the record's offset is `entry pos + 48` (`wroteOffset = dledgerFuture.getPos() +
DLedgerEntry.BODY_OFFSET`; the append hook writes that into PHYSICALOFFSET, and msgIds encode it).
So every read of the base `CommitLog` works unchanged on the data files; what differs:

- walking the log steps over entry headers (`checkMessageAndReturnSize` over DLedger data:
  `bufferSize = msgSize + BODY_OFFSET`, a DLedger BLANK returns size 0);
- `getMinOffset`: the first data file's start + its start position (the first entry's pos, not +48);
- `getMaxOffset` / `getConfirmOffset`: DLedger's `committedPos` (the end of the committed entry), else
  the first file's start if > 0, else 0;
- recovery (`store.dledger.recovery`) is `DLedgerMmapFileStore.recover` (the entry walk), then
  RocketMQ's `dledgerRecoverNormally/Abnormally` (cut consume queues past the log; after a crash,
  re-dispatch from the data file `isMmapFileMatchedRecover` picks);
- writing (`store.dledger.writer`): a single-member group only, as its leader; a larger group
  needs a quorum, and appends raise `ReadOnlyStoreError`.

The committed index is the `checkpoint`'s `committedIndex` (`recover()`, capped at the last entry).
A single-member group (`dLegerPeers` lists one peer) commits its whole log as soon as it leads
(`DLedgerEntryPusher.QuorumAckChecker` raises the leader's own watermark to `ledgerEndIndex` every
second, a quorum of one): the broker's answers after start cover every entry, and so do ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.codec import record_check
from store.commitlog.commit_log import (AppendResult, CommitLog, RecordTooLargeForSegment,
                                        is_queued_transaction_type)
from store.dledger.entries import BLANK, ENTRY, STOP, file_tuple, walk_entries
from store.dledger.entry_codec import ENTRY_HEADER_BYTES, ENTRY_MAGIC_1
from store.dledger.layout import DLedgerLayout
from store.dledger.recovery import recover
from store.dledger.writer import IndexWriter, append_entry, check_writable, persist_checkpoint
from store.mappedfile.mapped_file_queue import MappedFileQueue


@dataclass
class DLedgerState:
    """`DLedgerMmapFileStore`'s ledger state after recovery (-1: none)."""

    ledger_begin_index: int = -1
    ledger_end_index: int = -1
    ledger_end_term: int = -1
    committed_index: int = -1
    committed_pos: int = -1
    write_pos: int = 0              # dataFileList.getMaxWrotePosition() after recovery
    checkpoint_committed_index: int | None = None
    checkpoint_end_index: int | None = None
    index_file_present: bool = False
    current_term: int = 0           # currterm's currTerm (the term a leader appends in)


class _DataFiles(MappedFileQueue):
    """The data files; closing a writable log persists DLedger's checkpoint first (shutdown)."""

    on_close = None

    def close(self) -> None:
        if self.on_close is not None:
            self.on_close()
        super().close()


class DLedgerCommitLog(CommitLog):
    """A read-only commit log over `dledger-<selfId>/data` (see the module docstring)."""

    # RocketMQ's cleanup deletes no DLedger data file (`DLedgerCommitLog.deleteExpiredFile` returns
    # at once without old commit-log files); DLedger's CleanSpaceService does, by its own rules.
    cleaned_by_dledger = True

    def __init__(self, layout: DLedgerLayout, *, read_only: bool, store_host: str, clock_ms=None):
        super().__init__(layout.data_dir, layout.data_file_bytes, read_only=read_only,
                         store_host=store_host, clock_ms=clock_ms)
        self.layout = layout
        self.state = DLedgerState()
        self._entry_ends: dict[int, int] = {}       # entry index -> pos + size, of walked entries
        self.mapped_files = _DataFiles(layout.data_dir, layout.data_file_bytes, read_only=read_only)
        self.mapped_files.on_close = self._on_close
        self.index_writer = None if read_only else IndexWriter(layout.index_dir,
                                                               layout.index_file_bytes)
        self.dirty = False

    def _on_close(self) -> None:
        if self.index_writer is None:
            return
        if self.state.ledger_end_index >= 0:
            persist_checkpoint(self)
        self.index_writer.flush()
        self.index_writer.close()

    # -- offsets ---------------------------------------------------------------------------------

    def max_offset(self) -> int:
        if self.state.committed_pos > 0:
            return self.state.committed_pos
        return max(self.min_offset(), 0)

    def max_wrote_offset(self) -> int:
        return self.state.write_pos

    def store_timestamp_at(self, phy_offset: int, size: int | None = None) -> int:
        """STORETIMESTAMP of the record at `phy_offset`; at an entry's own pos (the min offset),
        of the record inside it (`getEarliestMessageTime` adds `DLedgerEntry.BODY_OFFSET`)."""
        head = self.read(phy_offset, ENTRY_HEADER_BYTES)
        if head is not None and int.from_bytes(head[:4], "big", signed=True) == ENTRY_MAGIC_1 \
                and int.from_bytes(head[24:32], "big", signed=True) == phy_offset:
            phy_offset += ENTRY_HEADER_BYTES
        return super().store_timestamp_at(phy_offset, size)

    # -- writes (a single-member group) ---------------------------------------------------------

    def append_one(self, record, draft) -> AppendResult:
        return self.append([record], [draft])

    def append(self, records, drafts, now_ms=None) -> AppendResult:
        """One entry per record (store.dledger.writer); records of one topic and queue."""
        check_writable(self)
        for record in records:
            if ENTRY_HEADER_BYTES + len(record) + 8 > self.segment_size_bytes:
                raise RecordTooLargeForSegment(
                    f"{len(record)} bytes need a DLedger data file of at least "
                    f"{ENTRY_HEADER_BYTES + len(record) + 8} bytes")
        first = drafts[0]
        queued = is_queued_transaction_type(first.sys_flag)
        key = (first.topic, first.queue_id)
        with self.put_lock:
            store_timestamp = self.clock_ms() if now_ms is None else now_ms
            store_timestamp = max(store_timestamp, self.last_store_timestamp)
            queue_offset = self.queue_offsets.get(key, 0) if queued else 0
            positions = [append_entry(self, record, draft, queue_offset + i if queued else 0,
                                      store_timestamp)
                         for i, (record, draft) in enumerate(zip(records, drafts))]
            if queued:
                self.queue_offsets[key] = queue_offset + len(records)
            self.last_store_timestamp = store_timestamp
        msg_ids = tuple(self._msg_id_prefix + f"{pos + ENTRY_HEADER_BYTES:016X}"
                        for pos in positions)
        return AppendResult(positions[0] + ENTRY_HEADER_BYTES, sum(len(r) for r in records),
                            queue_offset, store_timestamp, msg_ids, len(records))

    # -- walking ---------------------------------------------------------------------------------

    def _files(self) -> list[tuple]:
        return [file_tuple(mapped) for mapped in self.mapped_files.files]

    def entries(self, start_phy_offset: int, *, limit_offset: int | None = None):
        """Yield (header, file_number, position) of valid entries from the entry at or after
        `start_phy_offset` (an entry pos or a record offset), up to the write position."""
        files = self._files()
        mapped = self.mapped_files.find_file(max(start_phy_offset, self.min_offset()))
        if mapped is None:
            return
        first = self.mapped_files.files.index(mapped)
        end = self.state.write_pos
        if limit_offset is not None:
            end = min(limit_offset, end)
        for step, number, position, what in walk_entries(files, first):
            if step != ENTRY:
                if step == STOP:
                    return
                continue
            if what.pos >= end:
                return
            if what.pos < start_phy_offset and what.body_pos != start_phy_offset:
                continue
            yield what, number, position

    def scan(self, start_phy_offset: int, *, check_crc: bool, limit_offset: int | None = None,
             max_records: int | None = None):
        """(record phy_offset, CheckResult) of the record inside each entry (`CommitLog.scan`'s
        contract, entry headers stepped over); ends after the first invalid record."""
        count = 0
        for header, number, position in self.entries(start_phy_offset, limit_offset=limit_offset):
            buffer = self.mapped_files.files[number].buffer
            result = record_check.check_message(buffer, position + ENTRY_HEADER_BYTES,
                                                check_crc=check_crc,
                                                limit=position + header.size)
            yield header.body_pos, result
            if result.kind != record_check.CHECK_RECORD:
                return
            count += 1
            if max_records is not None and count >= max_records:
                return

    def entry_layout(self, mapped) -> tuple[int, int, int]:
        """(bytes of entries up to the BLANK or the read position, BLANK filler bytes, entries)
        of one data file (`store.inspect`'s segment layout)."""
        data_bytes = filler = count = 0
        limit = min(mapped.read_position, mapped.file_size_bytes)
        for step, _number, position, what in walk_entries([file_tuple(mapped)]):
            if step == ENTRY and position + what.size <= limit:
                count += 1
                data_bytes = position + what.size
                continue
            if step == BLANK:
                data_bytes, filler = position, what
            break
        return data_bytes, filler, count

    def walk_for_dispatch(self, offset: int, end: int, batch: list, room: int) -> int | None:
        """Dispatch hook (`store.services.dispatch`): append up to `room` requests of the records
        in entries from `offset` (an entry boundary) below `end`; returns the next offset (None:
        nothing to do now). An invalid record is skipped with its entry, as RocketMQ's reput
        skips a `bufferSize` it could read."""
        moved = None
        for header, number, position in self.entries(offset, limit_offset=end):
            if header.pos + header.size > end or room <= 0:
                break
            buffer = self.mapped_files.files[number].buffer
            result = record_check.check_message(buffer, position + ENTRY_HEADER_BYTES,
                                                check_crc=False, limit=position + header.size)
            if result.kind == record_check.CHECK_RECORD:
                batch.append(result.request)
                room -= 1
            moved = header.pos + header.size
        if moved is None:
            mapped = self.mapped_files.find_file(offset)
            if mapped is not None and offset < end:
                # A BLANK (or the end of a file) at `offset`: go on with the next file.
                head = mapped.read(offset - mapped.file_from_offset, 4, unchecked=True)
                if head is not None and int.from_bytes(head, "big", signed=True) == -1:
                    return mapped.file_end_offset
        return moved

    # -- recovery (store.dledger.recovery) -------------------------------------------------------

    def recover_dledger(self, report, *, abnormal: bool, read_only: bool, check_crc: bool,
                        cq_max_phy_offset: int, min_timestamp: int) -> None:
        """Fill `report` (a `RecoveryReport`) as `dledgerRecoverNormally/Abnormally` recover."""
        recover(self, report, abnormal=abnormal, read_only=read_only, check_crc=check_crc,
                cq_max_phy_offset=cq_max_phy_offset, min_timestamp=min_timestamp)
