"""Where one file consume queue ends, and cutting it there (RocketMQ's `ConsumeQueue.recover`,
`truncateDirtyLogicFiles`; spec §4.5, §11.4).

`QueueRecovery` is a mixin of `FileConsumeQueue` (`store.consumequeue.file.consume_queue`): `recover`
after open, `truncate_dirty` once the commit log was cut, `refresh` while following a live writer
(read-only). All three find the first invalid (all-zero) unit with `_scan_valid`. It uses
`mapped_files`, `file_size_bytes`, `read_only`, `max_phy_end`, `min_logic_offset`,
`commit_log_min_offset`, `time_cache`, `_drop_files` and `correct_min_offset`.
"""

from __future__ import annotations

import mmap

import numpy as np

from store.codec.cq_unit import (CQ_UNIT_DTYPE, CQ_UNIT_SIZE, is_valid_unit, unpack_unit,
                                 valid_prefix_length)

RECOVER_FROM_LAST_FILES = 3
SCAN_CHUNK_UNITS = 4096  # recovery reads a file in chunks so an all-zero tail is never read whole


def _advise(buffer, option: str, start: int = 0, length: int = 0) -> None:
    """madvise(2) hint on [start, start+length) of a map (all of it without a length); nothing
    where the platform lacks it."""
    try:
        if length:
            aligned = start - start % mmap.PAGESIZE
            buffer.madvise(getattr(mmap, option), aligned, length + start - aligned)
        else:
            buffer.madvise(getattr(mmap, option))
    except (AttributeError, OSError, ValueError):
        pass


class QueueRecovery:
    """Finding and cutting the end of one queue (see the module docstring for what it uses)."""

    def recover(self) -> int:
        """Find the end of the queue from the third-last file on; cut what follows. Returns max_phy_end."""
        files = self.mapped_files.files
        if not files:
            return self.max_phy_end
        index = max(0, len(files) - RECOVER_FROM_LAST_FILES)
        # A power cut can keep a later file's pages and lose the unflushed tail of an earlier one
        # (the kernel writes files back independently). RocketMQ's scan starts at the third-last
        # file whatever comes before it, which leaves such a lost tail as zero units inside the
        # queue: a hole the re-dispatch never fills. So the scan starts at the first file whose
        # last unit is not valid (one unit read per earlier file), and before a window of files
        # with no unit at all (created, but their units lost).
        index = next((position for position, mapped in enumerate(files[:index])
                      if not self._unit_valid(mapped, self.file_size_bytes - CQ_UNIT_SIZE)), index)
        while index > 0 and not self._unit_valid(files[index], 0):
            index -= 1
        end = files[index].file_from_offset
        for mapped in files[index:]:
            valid_units, last_end = self._scan_valid(mapped, 0)
            if valid_units:
                self.max_phy_end = last_end
            end = mapped.file_from_offset + valid_units * CQ_UNIT_SIZE
            if valid_units * CQ_UNIT_SIZE != self.file_size_bytes:
                position = valid_units * CQ_UNIT_SIZE
                if not self.read_only and any(mapped.buffer[position:position + CQ_UNIT_SIZE]):
                    # A torn unit (half written before a power cut): zero it and what follows,
                    # so a later put cannot make stale units behind it valid again.
                    mapped.zero_from(position)
                break
        if self.max_phy_end < 0 and end > files[0].file_from_offset:
            # The scanned files held no unit (created but never flushed before a power cut): the
            # queue ends at the unit before them. RocketMQ leaves maxPhysicOffset at -1 here; then a
            # re-dispatch of the whole log appends unit 0's record again at the queue's end.
            self.max_phy_end = self._unit_end_before(files, end)
        self._cut_at(end)
        self.time_cache.clear()
        if not self.read_only:
            self.trusted_from = end // CQ_UNIT_SIZE   # the units below came from disk
        return self.max_phy_end

    @staticmethod
    def _unit_valid(mapped, position: int) -> bool:
        unit = unpack_unit(mapped.buffer, position)
        return is_valid_unit(unit.phy_offset, unit.size)

    def _unit_end_before(self, files, end: int) -> int:
        """phy_offset + size of the unit just before queue byte offset `end` (-1 if not valid)."""
        position = end - CQ_UNIT_SIZE
        holder = next((m for m in files if m.file_from_offset <= position < m.file_end_offset), None)
        if holder is None:
            return -1
        unit = unpack_unit(holder.buffer, position - holder.file_from_offset)
        return unit.phy_offset + unit.size if is_valid_unit(unit.phy_offset, unit.size) else -1

    def _cut_at(self, end: int) -> None:
        """`truncateDirtyFiles(end)` without zeroing: recovery already proved the tail invalid, and
        reading a whole sparse tail per queue would make opening 16k queues slow."""
        victims = []
        for mapped in self.mapped_files.files:
            if mapped.file_end_offset > end:
                if end >= mapped.file_from_offset:
                    mapped.set_positions(end - mapped.file_from_offset)
                else:
                    victims.append(mapped)
        if victims:
            self._drop_files(victims)
        self.mapped_files.set_positions(end)

    def _scan_valid(self, mapped, start_position: int) -> tuple[int, int]:
        """(units valid from unit 0 up to the first invalid one at/after start, end of the last one)."""
        units_total = self.file_size_bytes // CQ_UNIT_SIZE
        cursor = start_position // CQ_UNIT_SIZE
        last_end = -1
        buffer = mapped.buffer
        # A page fault on a map reads around it (read_ahead_kb: 8 MiB on these VMs), i.e. the whole
        # mostly-sparse 6 MB file per queue: 28-66 s to open 2,048 fresh queues instead of 0.9 s.
        # Recovery reads only the chunks it checks (one read-ahead request each, no read-around);
        # the usual read-ahead is restored afterwards. The first chunk is one page: most queues of
        # a many-queue store end inside it.
        _advise(buffer, "MADV_RANDOM")
        chunk_units = 4096 // CQ_UNIT_SIZE
        try:
            while cursor < units_total:  # bounded: one chunk per step
                count = min(chunk_units, units_total - cursor)
                chunk_units = min(2 * chunk_units, SCAN_CHUNK_UNITS)
                _advise(buffer, "MADV_WILLNEED", cursor * CQ_UNIT_SIZE, count * CQ_UNIT_SIZE)
                chunk = np.frombuffer(buffer, dtype=CQ_UNIT_DTYPE, count=count,
                                      offset=cursor * CQ_UNIT_SIZE)
                valid = valid_prefix_length(chunk)
                if valid:
                    last_end = int(chunk["phy_offset"][valid - 1]) + int(chunk["size"][valid - 1])
                cursor += valid
                del chunk
                if valid < count:
                    break
        finally:
            _advise(buffer, "MADV_NORMAL")
        return cursor, last_end

    def truncate_dirty(self, phy_offset: int) -> None:
        """Spec §11.4 `truncateDirtyLogicFiles`: drop units pointing at or past `phy_offset`."""
        # The end of the last unit kept (-1: none). Not `phy_offset`: units between the last kept
        # one and the cut would then count as already dispatched and never come back (a CQ file
        # created but not flushed before a power cut leaves exactly that).
        self.max_phy_end = -1
        self.time_cache.clear()
        files = list(self.mapped_files.files)
        while files:  # bounded by the number of files
            last = files[-1]
            units = np.frombuffer(last.buffer, dtype=CQ_UNIT_DTYPE,
                                  count=last.read_position // CQ_UNIT_SIZE)
            if len(units) == 0:
                if len(files) == 1:
                    break  # an empty only file stays (RocketMQ would keep an all-zero unit 0)
                # An empty last file: the queue ends in the file before it, which may itself
                # hold units past the cut. Drop the empty one (a later put recreates it).
                self._drop_files([last])
                files.pop()
                continue
            if int(units["phy_offset"][0]) >= phy_offset:
                del units
                self._drop_files([last])
                files.pop()
                continue
            phy = units["phy_offset"]
            # Keep unit 0 whatever it is, then units while valid and below the cut.
            bad = (phy[1:] < 0) | (units["size"][1:] <= 0) | (phy[1:] >= phy_offset)
            keep = 1 + (int(bad.argmax()) if bad.any() else len(units) - 1)
            last_unit = units[keep - 1]
            self.max_phy_end = int(last_unit["phy_offset"]) + int(last_unit["size"])
            del units, phy, last_unit
            position = keep * CQ_UNIT_SIZE
            if position < last.read_position and not self.read_only:
                last.zero_from(position)  # cut units must never come back in a later recovery
            last.set_positions(position)
            break
        end = self.mapped_files.max_offset()
        self.mapped_files.set_positions(end)

    def refresh(self) -> None:
        """Map new files and take in units appended since the last look."""
        self.mapped_files.refresh()
        files = self.mapped_files.files
        if not files:
            return
        start_index = next((i for i, f in enumerate(files) if f.read_position < self.file_size_bytes),
                           len(files) - 1)
        for mapped in files[start_index:]:
            valid_units, last_end = self._scan_valid(mapped, mapped.read_position)
            if last_end >= 0:
                self.max_phy_end = last_end
            mapped.set_positions(valid_units * CQ_UNIT_SIZE)
            if valid_units * CQ_UNIT_SIZE != self.file_size_bytes:
                break
        if self.min_logic_offset < files[0].file_from_offset:
            self.correct_min_offset(self.commit_log_min_offset)
