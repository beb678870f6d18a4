"""An ordered set of fixed-size segment files named by start offset (RocketMQ's `MappedFileQueue`).

The commit log and every file-based consume queue are one of these. The offsets here are offsets in
the file set: physical offsets for the commit log, CQ byte offsets (queue offset x 20) for a consume
queue. Rules (spec §1.1): every file is exactly `file_size_bytes`; consecutive files differ by exactly
that size; files are processed in ascending name order.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from store.errors import CorruptDataError, ReadOnlyStoreError
from store.mappedfile.mapped_file import (
    MappedFile, make_directories_durable, offset_to_file_name, parse_file_name,
)


@dataclass
class LoadProblems:
    """What load() found odd but could work around (reported by check())."""

    ignored_names: list[str] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (expected file start, found start)
    removed_empty_last_file: str | None = None


class MappedFileQueue:
    """Segment files of one file set, plus the queue-level committed and flushed offsets."""

    def __init__(self, directory: str, file_size_bytes: int, *, read_only: bool = False,
                 allow_empty_last_file: bool = True):
        assert file_size_bytes > 0
        self.directory = directory
        self.file_size_bytes = file_size_bytes
        self.read_only = read_only
        self.allow_empty_last_file = allow_empty_last_file
        self.files: list[MappedFile] = []
        self._flushed_where = 0
        # SYNC_FLUSH's group commit syncs the commit log outside the GIL and moves only its own
        # `flushed` (store/kernel/group_commit.py): set here, `flushed_where` is never below it.
        self.flush_floor = None
        self.committed_where = 0
        self.problems = LoadProblems()
        # Guards the list of files against concurrent create/delete; appends are serialized by the
        # owner's lock.
        self._files_lock = threading.RLock()
        # Set by the store when the transient store pool is on: (borrow() -> buffer|None, give_back()).
        self.write_buffer_pool = None
        # warmMapedFileEnable: touch every page of a new segment before the writer reaches it.
        self.warm_new_files = False
        # False: the owner makes new files' directory entries durable itself (consume queues
        # batch those fsyncs into their periodic flush).
        self.sync_directories = True
        # Appends by pwrite instead of through the maps (see MappedFile.pwrite_appends).
        self.pwrite_appends = False
        # Each file keeps the descriptor it syncs through (see MappedFile.hold_sync_fd).
        self.hold_sync_fds = False
        # New files take records by pwrite (MappedFile.write_records_by_pwrite; use_pwrite_records).
        self.pwrite_records = False
        # Files flush [flushed, read position) only, their pages below it dropped first
        # (MappedFile.ranged_sync).
        self.ranged_sync = False
        # Set by the store's services for the commit log: an object whose take(file_from_offset)
        # returns that segment made in the background, or None (store/services/allocate.py).
        self.allocator = None

    # -- loading ---------------------------------------------------------------------------------

    def _list_segment_names(self) -> list[str]:
        if not os.path.isdir(self.directory):
            return []
        names = []
        for name in os.listdir(self.directory):
            if parse_file_name(name) is None:
                if not name.endswith(".creating"):
                    self.problems.ignored_names.append(name)
                elif not self.read_only:
                    # Our own temporary name of a segment whose creation a crash interrupted.
                    os.remove(os.path.join(self.directory, name))
                continue
            if os.path.isdir(os.path.join(self.directory, name)):
                self.problems.ignored_names.append(name)
                continue
            names.append(name)
        names.sort()
        return names

    def load(self) -> None:
        """Map every segment file; all positions are set to the file size (recovery lowers them)."""
        names = self._list_segment_names()
        if names and self.allow_empty_last_file:
            last_path = os.path.join(self.directory, names[-1])
            if os.path.getsize(last_path) == 0:
                # 5.x deletes a zero-length last file (a crash during creation); a read-only open just
                # skips it.
                self.problems.removed_empty_last_file = names[-1]
                if not self.read_only:
                    os.remove(last_path)
                names.pop()
        files = []
        try:
            for name in names:
                mapped = MappedFile(os.path.join(self.directory, name), self.file_size_bytes,
                                    read_only=self.read_only)
                mapped.set_positions(self.file_size_bytes)
                mapped.pwrite_appends = self.pwrite_appends
                mapped.hold_sync_fd = self.hold_sync_fds
                mapped.ranged_sync = self.ranged_sync
                files.append(mapped)
        except CorruptDataError:
            for mapped in files:
                mapped.close()
            raise
        for previous, current in zip(files, files[1:]):
            expected = previous.file_from_offset + self.file_size_bytes
            if current.file_from_offset != expected:
                self.problems.gaps.append((expected, current.file_from_offset))
        with self._files_lock:
            self.files = files

    def refresh(self) -> list[MappedFile]:
        """Map segment files that appeared since load (read-only following); return the new ones."""
        known = {f.file_from_offset for f in self.files}
        added = []
        for name in self._list_segment_names():
            offset = parse_file_name(name)
            if offset in known:
                continue
            path = os.path.join(self.directory, name)
            try:
                mapped = MappedFile(path, self.file_size_bytes, read_only=self.read_only)
            except (CorruptDataError, FileNotFoundError):
                continue  # being created right now; the next refresh picks it up
            added.append(mapped)
        if added:
            with self._files_lock:
                self.files = sorted(self.files + added, key=lambda f: f.file_from_offset)
        # Files deleted by the writer (expiry) disappear from our list too.
        present = set(self._list_segment_names())
        with self._files_lock:
            gone = [f for f in self.files if os.path.basename(f.path) not in present]
            if gone:
                self.files = [f for f in self.files if f not in gone]
        for f in gone:
            f.close()
        return added

    # -- lookup ----------------------------------------------------------------------------------

    def first_file(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    def last_file(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def find_file(self, offset: int) -> MappedFile | None:
        """The file containing `offset`, or None."""
        files = self.files
        if not files:
            return None
        first = files[0].file_from_offset
        index = (offset - first) // self.file_size_bytes
        if 0 <= index < len(files):
            candidate = files[index]
            if candidate.file_from_offset <= offset < candidate.file_end_offset:
                return candidate
        for candidate in files:  # gaps in the file set: fall back to a scan
            if candidate.file_from_offset <= offset < candidate.file_end_offset:
                return candidate
        return None

    @property
    def flushed_where(self) -> int:
        """End of what is forced to disk (the group commit's figure if that is further)."""
        floor = self.flush_floor
        if floor is not None:
            synced = floor.flushed
            if synced > self._flushed_where:
                return synced
        return self._flushed_where

    @flushed_where.setter
    def flushed_where(self, value: int) -> None:
        self._flushed_where = value

    def min_offset(self) -> int:
        first = self.first_file()
        return first.file_from_offset if first else 0

    def max_offset(self) -> int:
        """End of what readers may see: the start + read position of the last file holding data.

        Trailing files with nothing readable (a preallocated next segment seen by a read-only open)
        do not move the end; after recovery of a writable store there are none.
        """
        files = self.files
        for mapped in reversed(files):
            if mapped.read_position > 0:
                return mapped.file_from_offset + mapped.read_position
        return files[0].file_from_offset if files else 0

    def end_and_file(self, offset: int) -> tuple[int, MappedFile | None, int, object]:
        """(`max_offset()`, `find_file(offset)`, that file's `read_position` and `buffer`; 0 and
        None without a file) in one call: a pull asks all of them each time."""
        files = self.files
        if not files:
            return 0, None, 0, None
        last = files[-1]
        # last.read_position, without the property's call
        position = last.committed_position if last.write_buffer is not None else last.wrote_position
        end = last.file_from_offset + position if position > 0 else self.max_offset()
        index = (offset - files[0].file_from_offset) // self.file_size_bytes
        if 0 <= index < len(files):
            candidate = files[index]
            start = candidate.file_from_offset
            if start <= offset < start + candidate.file_size_bytes:   # file_end_offset
                if candidate is last:
                    return end, last, position, last._map
                return end, candidate, candidate.read_position, candidate._map
        found = self.find_file(offset)
        if found is None:
            return end, None, 0, None
        return end, found, found.read_position, found._map

    def max_wrote_offset(self) -> int:
        last = self.last_file()
        return last.file_from_offset + last.wrote_position if last else 0

    # -- writing ---------------------------------------------------------------------------------

    def create_file(self, file_from_offset: int) -> MappedFile:
        if self.read_only:
            raise ReadOnlyStoreError(f"cannot create a segment in read-only {self.directory}")
        assert file_from_offset % self.file_size_bytes == 0
        if self.sync_directories:
            make_directories_durable(self.directory)
        else:   # the owner makes the new entries durable (consume queues batch it)
            os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, offset_to_file_name(file_from_offset))
        buffer = self.write_buffer_pool.borrow() if self.write_buffer_pool else None
        release = self.write_buffer_pool.give_back if buffer is not None else None
        mapped = self.allocator.take(file_from_offset) if self.allocator is not None else None
        if mapped is not None:      # made (and warmed) in the background
            mapped.write_buffer = buffer
            mapped.release_write_buffer = release
        else:
            mapped = MappedFile(path, self.file_size_bytes, create=True, write_buffer=buffer,
                                release_write_buffer=release, sync_directory=self.sync_directories)
            if self.warm_new_files and buffer is None:
                mapped.warm()
        mapped.pwrite_appends = self.pwrite_appends
        mapped.hold_sync_fd = self.hold_sync_fds
        mapped.ranged_sync = self.ranged_sync
        if self.pwrite_records:
            mapped.write_records_by_pwrite()
        with self._files_lock:
            self.files = self.files + [mapped]
        return mapped

    def set_ranged_sync(self, ranged: bool) -> None:
        """Whether this queue's files, those there and those to come, flush through
        `sync_range` (MappedFile.ranged_sync) or fdatasync."""
        self.ranged_sync = ranged
        with self._files_lock:
            files = list(self.files)
        for mapped in files:
            mapped.ranged_sync = ranged

    def use_pwrite_records(self) -> None:
        """From now on the last file (if it has room) and every new one take put_fast's records
        by pwrite (MappedFile.write_records_by_pwrite)."""
        if self.read_only:
            return
        self.pwrite_records = True
        with self._files_lock:
            last = self.files[-1] if self.files else None
        if last is not None and not last.destroyed and last.wrote_position < last.file_size_bytes:
            last.write_records_by_pwrite()

    def last_file_or_create(self, start_offset: int = 0) -> MappedFile:
        """The last file if it has room, else a new one (at `start_offset`'s file when none exist)."""
        last = self.last_file()
        if last is None:
            first_start = start_offset - start_offset % self.file_size_bytes
            self.flushed_where = self.committed_where = first_start
            return self.create_file(first_start)
        if last.is_full():
            return self.create_file(last.file_from_offset + self.file_size_bytes)
        return last

    def set_positions(self, offset: int) -> None:
        """After recovery: committed and flushed offsets of the queue."""
        self.flushed_where = offset
        self.committed_where = offset

    def note_flushed(self, offset: int) -> None:
        """Someone else synced up to `offset` (SYNC_FLUSH's group commit loop): move
        `flushed_where` and that file's `flushed_position` there, never back."""
        if offset > self._flushed_where:
            mapped = self.find_file(offset - 1)
            if mapped is not None:
                mapped.note_flushed(offset - mapped.file_from_offset)
            self._flushed_where = offset

    def flush(self, least_pages: int = 0) -> bool:
        """Flush the file holding `flushed_where`; True if the flushed offset moved."""
        return self._advance("flushed_where", MappedFile.flush, least_pages)

    def commit(self, least_pages: int = 0) -> bool:
        """Commit (transient pool) the file holding `committed_where`; True if it moved."""
        return self._advance("committed_where", MappedFile.commit, least_pages)

    def _advance(self, where_name: str, step, least_pages: int) -> bool:
        """Run `step` (flush or commit) on the file holding the offset `where_name` names and move
        that offset to the file's new position."""
        where = getattr(self, where_name)
        mapped = self.find_file(where) or self._file_at_boundary(where)
        if mapped is None:
            return False
        new_where = mapped.file_from_offset + step(mapped, least_pages)
        setattr(self, where_name, new_where)
        return new_where != where

    def _file_at_boundary(self, offset: int) -> MappedFile | None:
        # `offset` is the end of a full file: the next file (if any) is the one to work on.
        return self.find_file(offset - 1) if offset > 0 else None

    def truncate_dirty_files(self, offset: int) -> None:
        """Spec §11.4: files ending past `offset` are cut there (and the cut bytes zeroed) or deleted.

        RocketMQ leaves the cut bytes in place; we zero them so that a later recovery can never
        resurrect a record that was cut (a shorter new write could leave valid-looking stale records
        behind it).
        """
        with self._files_lock:
            keep = []
            for mapped in self.files:
                if mapped.file_end_offset <= offset:
                    keep.append(mapped)
                elif offset >= mapped.file_from_offset:
                    position = offset - mapped.file_from_offset
                    mapped.set_positions(position)
                    if not self.read_only:
                        mapped.zero_from(position)
                    keep.append(mapped)
                else:
                    if self.read_only:
                        mapped.close()
                    else:
                        mapped.destroy()
            self.files = keep

    def delete_files(self, victims: list[MappedFile]) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"cannot delete segments of read-only {self.directory}")
        with self._files_lock:
            self.files = [f for f in self.files if f not in victims]
        for mapped in victims:
            mapped.destroy()

    def delete_last_file(self) -> None:
        last = self.last_file()
        if last is not None:
            self.delete_files([last])

    def close(self) -> None:
        for mapped in self.files:
            mapped.close()

    def total_size_bytes(self) -> int:
        return len(self.files) * self.file_size_bytes
