"""The store's `checkpoint` file as a mutable object (spec §6.1; byte layout in store.codec.checkpoint_codec).

`CheckpointFile(path, read_only=..., style="4.9"|"5.x")`. `load()` reads the file; a missing file reads as
zeros and, when writable, is created zero-filled (the broker does the same). A file shorter than a page is
read zero-padded, as the broker's one-page mmap sees it. `flush()` rewrites all 4096 bytes atomically
(temporary file, fsync, os.replace, directory fsync): 24 used bytes for "4.9", 40 for "5.x", zeros after.
"""

from __future__ import annotations

import os

from store.codec.checkpoint_codec import (CHECKPOINT_FILE_SIZE_BYTES, Checkpoint, decode_checkpoint,
                                          encode_checkpoint, min_timestamp, min_timestamp_index,
                                          used_bytes)
from store.errors import ReadOnlyStoreError
from store.meta.config_files import atomic_write_bytes

_FIELDS = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
           "master_flushed_offset", "confirm_phy_offset")


class CheckpointFile:
    """Load, change and flush the checkpoint of one store.

    The five fields are plain attributes (`physic_msg_timestamp`, `logics_msg_timestamp`,
    `index_msg_timestamp`, `master_flushed_offset`, `confirm_phy_offset`). With style "4.9" the last two
    are kept in memory but not written, as in a 4.9.7 broker.
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool, style: str = "4.9"):
        used_bytes(style)  # validates the style
        self.path = os.fspath(path)
        self.read_only = read_only
        self.style = style
        self.file_size_bytes: int | None = None   # size found on disk by load(); None if missing
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0

    def load(self) -> Checkpoint:
        """Read the file into the fields and return them as a `Checkpoint`."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read(CHECKPOINT_FILE_SIZE_BYTES)
                self.file_size_bytes = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            self.file_size_bytes = None
            raw = b""
        cp = decode_checkpoint(raw.ljust(CHECKPOINT_FILE_SIZE_BYTES, b"\0"))
        self.set(cp)
        if self.file_size_bytes is None and not self.read_only:
            self.flush()
        return cp

    @property
    def checkpoint(self) -> Checkpoint:
        """A frozen snapshot of the current fields."""
        return Checkpoint(*(getattr(self, name) for name in _FIELDS))

    def set(self, cp: Checkpoint) -> None:
        """Replace every field with those of `cp` (in memory; call flush() to persist)."""
        for name in _FIELDS:
            setattr(self, name, getattr(cp, name))

    @property
    def min_timestamp(self) -> int:
        """Where abnormal recovery starts looking, in ms (spec §6.1)."""
        return min_timestamp(self.checkpoint)

    @property
    def min_timestamp_index(self) -> int:
        """min(min_timestamp, index_msg_timestamp), in ms (spec §6.1)."""
        return min_timestamp_index(self.checkpoint)

    def encode(self) -> bytes:
        """The 4096 bytes flush() would write."""
        return encode_checkpoint(self.checkpoint, self.style)

    def flush(self) -> None:
        """Write the whole page atomically. Raises ReadOnlyStoreError when opened read-only."""
        if self.read_only:
            raise ReadOnlyStoreError(f"checkpoint {self.path} is read-only")
        data = self.encode()
        atomic_write_bytes(self.path, data)
        self.file_size_bytes = len(data)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)}" for name in _FIELDS)
        return f"CheckpointFile({self.path!r}, style={self.style!r}, {fields})"
