"""Hosted writing of a single-member DLedger group: appends as `DLedgerMmapFileStore.appendAsLeader`.

Each message becomes one entry (a batch becomes one entry per message, as `DLedgerCommitLog`'s
batch put hands DLedger one body per message): the record is written at `pos + 48` with its
PHYSICALOFFSET set to that offset (RocketMQ's append hook), QUEUEOFFSET and STORETIMESTAMP, then the
48-byte header (`index` = last + 1, `term` = the current term, `pos`); a file that cannot hold the
entry plus 8 bytes ends with a DLedger BLANK (`MmapFileList.preAppend`). The index unit of every
entry is written to `dledger-<id>/index` (`encodeIndex`). A member of a larger group needs a quorum
to commit, which this engine cannot give: writes are refused there.

`IndexWriter` also serves recovery of a writable open: DLedger's `recover()` rewrites the index
from the first unit that does not match its entry (or from the first entry when the file is
missing), so the index always matches the data after a hosted open.

`persist_checkpoint` writes `committedIndex` and `endIndex` (`persistCheckPoint`, at shutdown).
"""

from __future__ import annotations

import os

from store.dledger.entry_codec import (DEFAULT_INDEX_FILE_BYTES, ENTRY_HEADER_BYTES,
                                       INDEX_UNIT_BYTES, MIN_BLANK_BYTES, encode_blank,
                                       encode_entry_header, encode_index_unit)
from store.errors import ReadOnlyStoreError
from store.kernel import place
from store.mappedfile.mapped_file import create_sparse_file, offset_to_file_name


class IndexWriter:
    """Writes 32-byte units into DLedger's index files (created sparse, at their full size)."""

    def __init__(self, directory: str, file_bytes: int = DEFAULT_INDEX_FILE_BYTES):
        self.directory = directory
        self.file_bytes = file_bytes
        self._handles: dict[int, object] = {}

    def write(self, entry_index: int, unit: bytes) -> None:
        offset = entry_index * INDEX_UNIT_BYTES
        start = offset - offset % self.file_bytes
        handle = self._handles.get(start)
        if handle is None:
            os.makedirs(self.directory, exist_ok=True)
            path = os.path.join(self.directory, offset_to_file_name(start))
            if not os.path.exists(path):
                create_sparse_file(path, self.file_bytes)
            handle = self._handles[start] = open(path, "r+b")   # noqa: SIM115 (closed in close())
        handle.seek(offset - start)
        handle.write(unit)

    def flush(self) -> None:
        for handle in self._handles.values():
            handle.flush()
            os.fsync(handle.fileno())

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()


def index_unit_of(header) -> bytes:
    return encode_index_unit(pos=header.pos, size=header.size, index=header.index,
                             term=header.term, magic=header.magic)


def check_writable(commit_log) -> None:
    layout = commit_log.layout
    if commit_log.read_only:
        raise ReadOnlyStoreError("the store is open read-only")
    if layout.peers != 1:
        raise ReadOnlyStoreError(
            f"{layout.data_dir} belongs to a DLedger group of "
            f"{'unknown size' if layout.peers is None else f'{layout.peers} members'} "
            f"(dLegerPeers): an entry is committed by a quorum, which this engine cannot give; "
            f"it writes only single-member DLedger stores")


def append_entry(commit_log, record, draft, queue_offset: int, store_timestamp: int) -> int:
    """Write one entry wrapping `record` (under the caller's put lock); returns its pos."""
    queue = commit_log.mapped_files
    state = commit_log.state
    size = ENTRY_HEADER_BYTES + len(record)
    mapped = queue.files[-1] if queue.files else None
    if mapped is None or mapped.wrote_position >= mapped.file_size_bytes:
        mapped = queue.last_file_or_create(state.write_pos)
    position = mapped.wrote_position
    if size + MIN_BLANK_BYTES > mapped.file_size_bytes - position:
        free = mapped.file_size_bytes - position
        target = mapped.write_buffer if mapped.write_buffer is not None else mapped.buffer
        target[position:position + MIN_BLANK_BYTES] = encode_blank(free)
        mapped.wrote_position = mapped.file_size_bytes
        mapped = queue.last_file_or_create(0)
        position = mapped.wrote_position
    pos = mapped.file_from_offset + position
    index = state.ledger_end_index + 1
    term = max(state.current_term, state.ledger_end_term)
    target = mapped.write_buffer if mapped.write_buffer is not None else mapped.buffer
    place(target, position + ENTRY_HEADER_BYTES, record, queue_offset, pos + ENTRY_HEADER_BYTES,
          draft.store_timestamp_position, store_timestamp)
    target[position:position + ENTRY_HEADER_BYTES] = encode_entry_header(
        size=size, index=index, term=term, pos=pos, body_size=len(record))
    mapped.wrote_position = position + size
    commit_log.index_writer.write(index, encode_index_unit(pos=pos, size=size, index=index,
                                                           term=term))
    state.ledger_end_index, state.ledger_end_term = index, term
    if state.ledger_begin_index < 0:
        state.ledger_begin_index = index
    state.write_pos = pos + size
    state.committed_index, state.committed_pos = index, pos + size    # a quorum of one
    commit_log.dirty = True
    return pos


def persist_checkpoint(commit_log) -> None:
    """`committedIndex` and `endIndex` to `dledger-<id>/checkpoint` (old one kept as .bak)."""
    state = commit_log.state
    path = commit_log.layout.checkpoint_path
    text = f"committedIndex={state.committed_index}\nendIndex={state.ledger_end_index}\n"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="latin-1") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    if os.path.exists(path):
        os.replace(path, path + ".bak")
    os.replace(tmp, path)
