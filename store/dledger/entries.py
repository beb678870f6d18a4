"""Walking DLedger entries with `DLedgerMmapFileStore.recover`'s rules, and reading index units.

The walk reads files in order from a file start. At each position (rules of `recover()`, each
`PreConditions.check` failing ends the log there):

- magic `BLANK_MAGIC_CODE` (-1): the rest of the file is filler; go on with the next file;
- size 0: the log ends (zeros);
- otherwise the header must hold: `pos` = the entry's own offset, `bodySize + 48 = size`, the entry
  inside the file, magic 1, `index` = previous + 1, `term` >= previous term, `size` > 44.

It works on any list of files given as `(file_from_offset, buffer, size_bytes, path)` (the engine's
mapped files, the checker's read-only maps) and yields what it finds; nothing is written.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from store.dledger.entry_codec import (BLANK_MAGIC, ENTRY_HEADER_BYTES, ENTRY_MAGIC_1,
                                       INDEX_UNIT_BYTES, EntryHeader, IndexUnit,
                                       decode_index_unit)
from store.mappedfile.mapped_file import parse_file_name

_HEADER = struct.Struct(">iiqqqiiii")
_HEADER_SIZE_MIN = 44                   # DLedgerEntry.HEADER_SIZE: `size` must be larger

ENTRY, BLANK, STOP = "entry", "blank", "stop"


@dataclass(slots=True)
class WalkStop:
    """Where and why the walk ended. `clean`: zeros or the end of the files, not damage."""

    phy_offset: int
    reason: str
    clean: bool


def file_tuple(mapped) -> tuple:
    """(file_from_offset, buffer, size_bytes, path) of an engine `MappedFile`."""
    return (mapped.file_from_offset, mapped.buffer, mapped.file_size_bytes, mapped.path)


def check_entry_at(buffer, position: int, file_from_offset: int, size_bytes: int,
                   last_index: int = -1, last_term: int = -1) -> tuple[EntryHeader | None, str]:
    """(header, "") for a valid entry at `position`, else (None, why not). BLANK and zeros are
    reported by `walk_entries`, not here."""
    if position + ENTRY_HEADER_BYTES > size_bytes:
        return None, f"{size_bytes - position} bytes left in the file: no room for an entry header"
    header = EntryHeader(*_HEADER.unpack_from(buffer, position))
    absolute = file_from_offset + position
    if header.pos != absolute:
        return None, f"entry pos field {header.pos} != its offset {absolute}"
    if header.body_size + ENTRY_HEADER_BYTES != header.size:
        return None, f"size {header.size} != bodySize {header.body_size} + {ENTRY_HEADER_BYTES}"
    if position + header.size > size_bytes:
        return None, f"entry of {header.size} bytes runs past the end of the file"
    if header.magic != ENTRY_MAGIC_1:
        return None, f"unknown entry magic {header.magic}"
    if last_index != -1 and header.index != last_index + 1:
        return None, f"entry index {header.index} does not follow {last_index}"
    if header.term < last_term:
        return None, f"entry term {header.term} is lower than the previous term {last_term}"
    if header.size <= _HEADER_SIZE_MIN:
        return None, f"size {header.size} should be > {_HEADER_SIZE_MIN}"
    return header, ""


def walk_entries(files: list[tuple], start_file: int = 0, *, max_entries: int | None = None,
                 start_position: int = 0):
    """Yield (ENTRY, file_number, position, header), (BLANK, file_number, position, free_bytes)
    and last (STOP, file_number, position, WalkStop), from `start_position` (an entry start) of
    file `start_file`. Bounded: every step moves forward."""
    last_index = last_term = -1
    count = 0
    number = start_file
    position = start_position
    while number < len(files):
        base, buffer, size_bytes, _path = files[number]
        if position + 4 > size_bytes:
            yield STOP, number, position, WalkStop(base + position, "end of the file without a "
                                                   "BLANK", False)
            return
        magic = int.from_bytes(buffer[position:position + 4], "big", signed=True)
        if magic == BLANK_MAGIC:
            yield BLANK, number, position, size_bytes - position
            number += 1
            position = 0
            continue
        size = int.from_bytes(buffer[position + 4:position + 8], "big", signed=True) \
            if position + 8 <= size_bytes else -1
        if size == 0:
            yield STOP, number, position, WalkStop(base + position, "zeros: the end of the log",
                                                   True)
            return
        header, why = check_entry_at(buffer, position, base, size_bytes, last_index, last_term)
        if header is None:
            yield STOP, number, position, WalkStop(base + position, why, False)
            return
        yield ENTRY, number, position, header
        last_index, last_term = header.index, header.term
        position += header.size
        count += 1
        if max_entries is not None and count >= max_entries:
            yield STOP, number, position, WalkStop(base + position, f"max_entries={max_entries}",
                                                   True)
            return
    end = files[-1][0] + files[-1][2] if files else 0
    yield STOP, len(files) - 1, files[-1][2] if files else 0, WalkStop(
        end, "end of the data files", True)


class IndexFiles:
    """DLedger's index files (`dledger-<id>/index`), read with plain reads; absent is allowed."""

    def __init__(self, directory: str):
        self.directory = directory
        self.files: list[tuple[int, str, int]] = []     # (file_from_offset, path, size_bytes)
        self._handles: dict[str, object] = {}
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            names = []
        for name in names:
            start = parse_file_name(name)
            path = os.path.join(directory, name)
            if start is not None and os.path.isfile(path):
                self.files.append((start, path, os.path.getsize(path)))

    @property
    def present(self) -> bool:
        return bool(self.files)

    def unit(self, entry_index: int) -> IndexUnit | None:
        """Unit `entry_index` (at byte 32 x index of the file set), None where no file holds it."""
        offset = entry_index * INDEX_UNIT_BYTES
        for start, path, size in self.files:
            if start <= offset and offset + INDEX_UNIT_BYTES <= start + size:
                handle = self._handles.get(path)
                if handle is None:
                    handle = self._handles[path] = open(path, "rb")   # noqa: SIM115 (close())
                handle.seek(offset - start)
                data = handle.read(INDEX_UNIT_BYTES)
                if len(data) < INDEX_UNIT_BYTES:
                    return None
                return decode_index_unit(data, 0, path=path)
        return None

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    def matches(self, header: EntryHeader) -> bool:
        unit = self.unit(header.index)
        return unit is not None and (unit.magic, unit.pos, unit.size, unit.index, unit.term) == (
            header.magic, header.pos, header.size, header.index, header.term)
