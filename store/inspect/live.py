"""`StoreInspector`: read-only views of an opened store's internals (`MessageStore.inspect`).

The dashboard's pages, the tour and the CLI read the commit log's segments, the consume-queue units and
the index files only through this class, so that a change to an internal changes one place. It holds
the parts it is handed (no back-reference to the store) and returns plain values:

| method                                  | returns                                                  |
|-----------------------------------------|----------------------------------------------------------|
| `segments()`                            | `SegmentView` per commit-log segment, oldest first, with |
|                                         | its wrote / committed / flushed / read positions         |
| `segment_holding(phy_offset)`           | the `SegmentView` that holds a physical offset, or None  |
| `segment_layout(name)`                  | `SegmentLayout`: bytes of records, BLANK filler, records |
| `records(start_phy_offset, ...)`        | (phy_offset, CheckResult) from an offset, bounded        |
| `record_bytes(phy_offset)`              | one record's raw bytes, or None                          |
| `read(phy_offset, size)`                | raw bytes of the log, or None                            |
| `record_size_at(phy_offset)`            | TOTALSIZE of the record there, or None                   |
| `queue_unit` / `queue_units`            | consume-queue units (`CqUnit`, or a numpy array)         |
| `queue_max_phy_end(topic, queue_id)`    | end of the last record a queue points to, -1 if none     |
| `queue_file_names(topic, queue_id)`     | a file consume queue's segment names ([] for RocksDB)    |
| `rocksdb_stats()`                       | the RocksDB backend's properties, or None for files      |
| `index_headers()` / `index_entries()`   | index headers as stored; one file's entries (numpy)      |
| `index_slots(name)` / `index_chain()`   | one file's slot table; a key's chain hop by hop          |
| `recovery` / `dispatch_state()`         | what recovery did; the reput pointer and its backlog     |
| `restart_plan()`                        | what a broker restart would do after a crash (abort)     |
| `record_hex(phy_offset)`                | [5.x] a record's hex with its `__CRC32#` field marked    |
| `is_dledger` / `dledger_entry(offset)`  | a DLedger log: the entry header around a record          |
| `dledger_log()` / `log_dir()`           | the DLedger log's state; the log's directory             |
| `batch_queues()` / `batch_units()`      | [5.x] batch consume queues, their units and records      |
| `served_queue_keys()` / `served_unit()` | every served queue with [5.x] batch queues; a read's unit |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from store import kernel
from store.errors import StoreError
from store.inspect.admin_views import AdminViewsMixin
from store.inspect.batch_view import BatchViewsMixin
from store.inspect.dledger_view import DLedgerViewsMixin
from store.inspect.record_hex import RecordHexView, record_hex_view
from store.inspect.restart_plan import RestartPlanMixin
from store.inspect.scheduled import ScheduledViewsMixin
from store.inspect.timer import TimerInspectMixin
from store.mappedfile.mapped_file import parse_file_name

SCAN_ROWS = 8192                          # rows per compiled scan call
MAX_SCAN_BATCHES_PER_SEGMENT = 1 << 16    # a 1 GiB segment of the smallest records is 12 M records
MAX_RECORDS_PER_WALK = 200_000            # `records()` stops after this many unless told otherwise


@dataclass(frozen=True)
class SegmentView:
    """One commit-log segment file and its pointers, as of the call (RocketMQ's `MappedFile`)."""

    name: str
    path: str
    file_from_offset: int
    file_size_bytes: int
    wrote_position: int
    committed_position: int
    flushed_position: int
    read_position: int

    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size_bytes

    @property
    def is_full(self) -> bool:
        return self.read_position >= self.file_size_bytes


@dataclass(frozen=True)
class SegmentLayout:
    """What a segment holds: bytes of records (up to the BLANK or the read position), the BLANK
    filler's length at its end (0 if none), and its records (-1 when the scan cap was reached)."""

    data_bytes: int
    filler_bytes: int
    records: int


def native(array: np.ndarray | None) -> np.ndarray | None:
    """`array` in this machine's byte order. The files are big-endian (Java's ByteBuffer), and the
    codecs' numpy dtypes say so (`>i8`); such arrays must not leave the inspection API, because pandas,
    Arrow and Streamlit refuse or mis-read byte-swapped columns. A copy only when a swap is needed."""
    if array is None or array.dtype.isnative:
        return array
    return array.astype(array.dtype.newbyteorder("="))


class StoreInspector(AdminViewsMixin, ScheduledViewsMixin, TimerInspectMixin, RestartPlanMixin,
                     DLedgerViewsMixin, BatchViewsMixin):
    """Read-only views of the parts of an opened store; see the module docstring."""

    def __init__(self, *, config, commit_log, consume_queues, index_service, recovery_report, reput):
        self.config = config
        self._commit_log = commit_log
        self._consume_queues = consume_queues
        self._index_service = index_service
        self.recovery = recovery_report
        self._reput = reput              # the ReputService: its offset and backlog

    # -- commit log ------------------------------------------------------------------------------

    @staticmethod
    def _view(mapped) -> SegmentView:
        return SegmentView(os.path.basename(mapped.path), mapped.path, mapped.file_from_offset,
                           mapped.file_size_bytes, mapped.wrote_position, mapped.committed_position,
                           mapped.flushed_position, mapped.read_position)

    def segments(self) -> list[SegmentView]:
        """Every commit-log segment, oldest first."""
        return [self._view(mapped) for mapped in list(self._commit_log.mapped_files.files)]

    def segment_holding(self, phy_offset: int) -> SegmentView | None:
        mapped = self._commit_log.mapped_files.find_file(phy_offset)
        return None if mapped is None else self._view(mapped)

    def segment_layout(self, name: str) -> SegmentLayout:
        """Walk one segment's records with the compiled scan (about 0.1 us a record), bounded.

        Counts the records RocketMQ's check accepts; a SCHEDULE_TOPIC_XXXX record whose DELAY Java
        cannot parse is counted too (recovery would stop there: `check()` reports it). Raises
        StoreError for a name that is not a segment of this store.
        """
        file_from_offset = parse_file_name(name)
        mapped = None if file_from_offset is None else \
            self._commit_log.mapped_files.find_file(file_from_offset)
        if mapped is None or mapped.file_from_offset != file_from_offset:
            raise StoreError(f"no commit-log segment named {name!r} in {self.config.commit_log_dir}")
        entry_layout = getattr(self._commit_log, "entry_layout", None)
        if entry_layout is not None:        # a DLedger log: entries wrap the records
            return SegmentLayout(*entry_layout(mapped))
        out = kernel.scan_buffer(SCAN_ROWS)
        limit = min(mapped.read_position, mapped.file_size_bytes)
        position = 0
        records = 0
        for _ in range(MAX_SCAN_BATCHES_PER_SEGMENT):   # bounded: each batch moves on by its records
            count, position, kind, _ = kernel.scan(mapped.buffer, position, limit, False, out)
            records += count
            if kind != kernel.STOP_FULL:
                break
        else:
            return SegmentLayout(position, 0, -1)
        filler = mapped.file_size_bytes - position if kind == kernel.STOP_BLANK else 0
        return SegmentLayout(position, filler, records)

    def records(self, start_phy_offset: int, *, check_crc: bool, limit_phy_offset: int | None = None,
                max_records: int = MAX_RECORDS_PER_WALK) -> Iterator[tuple]:
        """(phy_offset, CheckResult) from `start_phy_offset` (a record start) until the first invalid
        record, `limit_phy_offset`, the end of the log or `max_records` records. A BLANK filler is
        yielded and the walk moves on to the next segment."""
        return self._commit_log.scan(start_phy_offset, check_crc=check_crc,
                                     limit_offset=limit_phy_offset, max_records=max_records)

    def record_bytes(self, phy_offset: int) -> bytes | None:
        return self._commit_log.read_record(phy_offset)

    def record_hex(self, phy_offset: int) -> RecordHexView | None:
        """[5.x] The record at `phy_offset` as a hex view with its `__CRC32#` field marked and its
        property CRC judged (apache/rocketmq#9852; store.inspect.record_hex); None if no record.

        Reads past the recovered end of the log too: a record that failed the CRC is where a
        forceVerifyPropCRC recovery ended the log, and that is the one an operator asks about."""
        mapped = self._commit_log.mapped_files.find_file(phy_offset)
        if mapped is None:
            return None
        position = phy_offset - mapped.file_from_offset
        head = mapped.read(position, 8, unchecked=True)
        size = int.from_bytes(head[:4], "big", signed=True) if head else 0
        if head is None or head[4:8] not in (b"\xda\xa3\x20\xa7", b"\xda\xa3\x20\xab") or size < 8:
            return None
        raw = mapped.read(position, size, unchecked=True)     # None when TOTALSIZE runs past the file
        return None if raw is None else record_hex_view(raw, phy_offset)

    def read(self, phy_offset: int, size: int) -> bytes | None:
        return self._commit_log.read(phy_offset, size)

    def record_size_at(self, phy_offset: int) -> int | None:
        return self._commit_log.record_size_at(phy_offset)

    # -- consume queues --------------------------------------------------------------------------

    def queue_unit(self, topic: str, queue_id: int, queue_offset: int):
        """The `CqUnit` at `queue_offset`, or None."""
        return self._consume_queues.get_unit(topic, queue_id, queue_offset)

    def queue_units(self, topic: str, queue_id: int, queue_offset: int, max_units: int) -> np.ndarray | None:
        """Up to `max_units` units from `queue_offset` (a structured array in native byte order; may
        stop at a file end)."""
        return native(self._consume_queues.get_units(topic, queue_id, queue_offset, max_units))

    def queue_max_phy_end(self, topic: str, queue_id: int) -> int:
        return self._consume_queues.get_max_phy_end(topic, queue_id)

    def queue_file_names(self, topic: str, queue_id: int) -> list[str]:
        """Segment file names of a file consume queue, oldest first (empty for RocksDB)."""
        directory = os.path.join(self.config.consume_queue_dir, topic, str(queue_id))
        try:
            return sorted(name for name in os.listdir(directory) if name.isdigit())
        except OSError:
            return []

    def rocksdb_stats(self) -> dict | None:
        """The RocksDB consume queue's properties, SST files and compaction state; None for files."""
        stats_of = getattr(self._consume_queues, "stats", None)
        return stats_of() if stats_of is not None else None

    # -- index -----------------------------------------------------------------------------------

    @property
    def has_index(self) -> bool:
        return self._index_service is not None

    def index_headers(self) -> list[tuple]:
        """(file name, `IndexHeader` as stored) for every index file, oldest first."""
        return [] if self._index_service is None else self._index_service.headers()

    def _index(self):
        if self._index_service is None:
            raise StoreError("this store has no index (messageIndexEnable=false)")
        return self._index_service

    def index_entries(self, name: str | None = None) -> np.ndarray:
        """Entries of the named index file (the newest by default), native byte order; row number =
        entry number."""
        return native(self._index().entries(name))

    def index_slots(self, name: str | None = None) -> np.ndarray:
        """Slot table of the named index file (the newest by default), native byte order."""
        return native(self._index().slot_table(name))

    def index_chain(self, topic: str, key: str) -> list[tuple]:
        """The slot chain `topic#key` hashes to in every file, newest file first: (name, steps)."""
        return self._index().walk_chain(topic, key)

    # -- recovery and dispatch -------------------------------------------------------------------

    def dispatch_state(self) -> dict[str, int]:
        """The reput pointer, the log's end and the bytes dispatch has still to read."""
        return {"reput_offset": self._reput.reput_offset, "max_phy_offset": self._commit_log.max_offset(),
                "behind_bytes": self._reput.behind_bytes()}
