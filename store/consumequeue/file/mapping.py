"""Mapping a file consume queue's segments only while the queue is in use.

Python 3.11's `mmap` keeps a duplicate of the file descriptor for every mapping (`trackfd=False` only
exists from 3.13), so a store with 16k queues cannot keep every file mapped without running out of
descriptors. The store keeps an LRU of mapped queues; the least recently used one is `hibernate`d
(its files unmapped, wrote/flushed positions remembered) and mapped again on its next use. Nothing is
msynced when unmapping: dirty pages stay in the page cache and `flush_unmapped` syncs them through a
short-lived descriptor.

A mixin of `FileConsumeQueue` (uses `directory`, `file_size_bytes`, `read_only`, `style`,
`_first_created`, `_mapped_files`, `_hibernated`, `on_touch`).
"""

from __future__ import annotations

import os

from store.consumequeue.base import STYLE_5X
from store.mappedfile.mapped_file import offset_to_file_name
from store.mappedfile.mapped_file_queue import MappedFileQueue


class OnDemandMapping:
    def _new_file_queue(self) -> MappedFileQueue:
        queue = MappedFileQueue(self.directory, self.file_size_bytes, read_only=self.read_only,
                                allow_empty_last_file=self.style == STYLE_5X)
        queue.sync_directories = False   # batched: see FileConsumeQueue._last_file_or_create
        queue.pwrite_appends = True      # as 5.x's putConsumeQueueDataByFileChannel
        return queue

    @property
    def mapped_files(self) -> MappedFileQueue:
        if self._mapped_files is None:
            self._wake()
        if self.on_touch is not None:
            self.on_touch(self)
        return self._mapped_files

    @property
    def is_mapped(self) -> bool:
        return self._mapped_files is not None

    def hibernate(self) -> None:
        """Unmap every file, remembering positions. No msync here: dirty pages stay in the page cache
        and `flush` syncs them later through a descriptor (`flush_unmapped`)."""
        mapped_files = self._mapped_files
        if mapped_files is None:
            return
        first_created = self._first_created
        self._hibernated = (
            {f.file_from_offset: (f.wrote_position, f.flushed_position) for f in mapped_files.files},
            mapped_files.flushed_where, mapped_files.committed_where,
            first_created.file_from_offset if first_created in mapped_files.files else None,
            mapped_files.max_offset())
        self._first_created = None
        mapped_files.close()
        self._mapped_files = None

    def _wake(self) -> None:
        positions, flushed_where, committed_where, first_created_from, _ = self._hibernated
        mapped_files = self._new_file_queue()
        mapped_files.load()
        kept = []
        for mapped in mapped_files.files:
            if mapped.file_from_offset in positions:
                wrote_position, flushed_position = positions[mapped.file_from_offset]
                mapped.set_positions(wrote_position)
                mapped.flushed_position = flushed_position
                kept.append(mapped)
                if mapped.file_from_offset == first_created_from:
                    self._first_created = mapped
            else:
                mapped.close()  # forgotten in memory (read-only truncation/expiry)
        mapped_files.files = kept
        mapped_files.flushed_where, mapped_files.committed_where = flushed_where, committed_where
        self._mapped_files = mapped_files
        self._hibernated = None

    def unflushed_bytes(self) -> int:
        if self._mapped_files is not None:
            return sum(f.read_position - f.flushed_position for f in self._mapped_files.files)
        return sum(wrote - flushed for wrote, flushed in self._hibernated[0].values())

    def flush_unmapped(self) -> None:
        """fdatasync the files of an unmapped queue that hold unflushed bytes (no mapping needed)."""
        positions, _, committed_where, first_created_from, max_cq_offset = self._hibernated
        for file_from_offset, (wrote, flushed) in list(positions.items()):
            if wrote <= flushed:
                continue
            path = os.path.join(self.directory, offset_to_file_name(file_from_offset))
            fd = os.open(path, os.O_RDWR)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
            positions[file_from_offset] = (wrote, wrote)
        self._hibernated = (positions, max_cq_offset, committed_where, first_created_from,
                            max_cq_offset)
