"""A power-loss model built from the sync calls the engine really makes (used by test_power_loss.py).

`SyncRecorder.install` wraps, for paths under one store root, `os.fsync`, `os.fdatasync`, the
`flush` of every `mmap.mmap` created while installed (msync), the `sync_range` the segments'
`MappedFile.flush` calls (an msync from C), `os.replace`, `os.rename`, `os.unlink` and
`os.remove`, and gives SYNC_FLUSH's group commit (which syncs from C) the wrapped
`os.fdatasync`. Nothing the engine says about itself (flushed positions, checkpoint
fields) is trusted. What survives a cut (`SyncRecorder.image`), the usual POSIX rules on Linux:

* A file's bytes are those of its last sync (fsync, fdatasync or msync of that file), per 4 KiB
  page: a synced page keeps its synced content. The content is taken when the sync call starts
  and becomes durable when it returns, so a write racing a sync is never assumed durable.
* Pages written since (or never synced) are dirty: a random prefix of them, in page order, is
  written back too (none, all, or some); the others keep their durable content (zeros for a file
  never synced). A file's length is its length at its last sync, or (randomly) its current one;
  a file never synced comes back empty or at its current length.
* A directory entry (a new file, a new directory, the new name of a rename, and the removal of a
  name) survives only if its directory was fsynced after it: a directory's durable entries are
  its listing at its last fsync (the whole tree as it was at install time before that). A name
  whose file was replaced keeps the old file's durable bytes until the directory fsync.
* Files are told apart by identity, not name: `os.replace` moves the identity to the new name,
  unlink forgets it, a name seen for the first time gets a new one.

Not modelled: RocksDB's own files. rocksdict writes them from C++ (no Python call to record), so
the RocksDB consume queue's directory counts as RocksDB's own WAL-protected state and is copied as
it is at the cut (a crash of the process, not of the machine, for that directory). Writes are not
recorded one by one: dirty pages are found by comparing the file now with its durable bytes.
"""

from __future__ import annotations

import mmap
import os
import random
import shutil
import stat
import threading
from collections import Counter

from store.kernel.group_commit import GroupCommit
from store.mappedfile import mapped_file as mapped_file_module
from store.services import flush as flush_module

PAGE = 4096
_DIR = "<dir>"


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, IsADirectoryError):
        return None


def _copy_as_is(source: str, target: str) -> None:
    """Copy a directory some library writes itself, skipping files deleted meanwhile."""
    for directory, _, filenames in os.walk(source):
        destination = os.path.join(target, os.path.relpath(directory, source))
        os.makedirs(destination, exist_ok=True)
        for name in filenames:
            try:
                shutil.copy2(os.path.join(directory, name), os.path.join(destination, name))
            except FileNotFoundError:
                pass


class SyncRecorder:
    """The durable state of the files under `root`, from the sync calls made (module docstring)."""

    def __init__(self, root: str, *, own_state_dirs=()):
        self.root = os.path.realpath(root)
        # Directories (relative names) whose files are some library's own business: copied as is.
        self.own_state_dirs = tuple(own_state_dirs)
        self.lock = threading.RLock()
        self.calls: Counter = Counter()
        self._ids: dict[str, int] = {}                 # live path -> file identity
        self._next_id = 0
        self._durable: dict[int, bytes] = {}           # identity -> bytes at its last sync
        self._durable_dirs: dict[str, dict] = {}       # dir path -> {name: identity or _DIR}
        os.makedirs(self.root, exist_ok=True)
        for directory, dirnames, filenames in os.walk(self.root):
            self._durable_dirs[directory] = self._listing(directory)
            for name in filenames:
                path = os.path.join(directory, name)
                data = _read(path)
                if data is not None:
                    self._durable[self._id(path)] = data

    # -- identities and listings -------------------------------------------------------------

    def _inside(self, path) -> str | None:
        if path is None:
            return None
        real = os.path.realpath(os.fspath(path))
        if real != self.root and not real.startswith(self.root + os.sep):
            return None
        relative = os.path.relpath(real, self.root)
        if any(relative == d or relative.startswith(d + os.sep) for d in self.own_state_dirs):
            return None
        return real

    def _id(self, path: str) -> int:
        ident = self._ids.get(path)
        if ident is None:
            self._next_id += 1
            ident = self._ids[path] = self._next_id
        return ident

    def _listing(self, directory: str) -> dict:
        listing = {}
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            listing[name] = _DIR if os.path.isdir(path) else self._id(path)
        return listing

    # -- the wrapped calls -----------------------------------------------------------------------

    def install(self, monkeypatch) -> None:
        recorder = self
        real_fsync, real_fdatasync = os.fsync, os.fdatasync
        real_replace, real_rename = os.replace, os.rename
        real_unlink, real_remove = os.unlink, os.remove
        real_mmap = mmap.mmap

        def synced(kind: str, fd: int, real) -> None:
            path = recorder._inside(_fd_path(fd))
            if path is None:
                return real(fd)
            with recorder.lock:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    listing = recorder._listing(path)
                    real(fd)
                    recorder._durable_dirs[path] = listing
                    recorder.calls["directory fsync"] += 1
                    return None
                data = _read(path)
                real(fd)
                if data is not None:
                    recorder._durable[recorder._id(path)] = data
                recorder.calls[kind] += 1
                return None

        def fsync(fd):
            return synced("fsync", fd, real_fsync)

        def fdatasync(fd):
            return synced("fdatasync", fd, real_fdatasync)

        def moved(real):
            def move(src, dst, *args, **kwargs):
                with recorder.lock:
                    result = real(src, dst, *args, **kwargs)
                    source, target = recorder._inside(src), recorder._inside(dst)
                    if target is not None:
                        ident = recorder._ids.pop(source, None) if source else None
                        if ident is None:
                            recorder._next_id += 1
                            ident = recorder._next_id
                        recorder._ids[target] = ident
                        recorder.calls["rename"] += 1
                    return result
            return move

        def forgotten(real):
            def forget(path, *args, **kwargs):
                with recorder.lock:
                    result = real(path, *args, **kwargs)
                    inside = recorder._inside(path)
                    if inside is not None:
                        recorder._ids.pop(inside, None)
                        recorder.calls["unlink"] += 1
                    return result
            return forget

        class RecordingMmap(real_mmap):
            def __new__(cls, fileno, length, *args, **kwargs):
                instance = super().__new__(cls, fileno, length, *args, **kwargs)
                instance.recorded_path = recorder._inside(_fd_path(fileno)) if fileno >= 0 \
                    else None
                return instance

            def flush(self, *args):
                path = self.recorded_path
                if path is None:
                    return super().flush(*args)
                with recorder.lock:
                    data = _read(path)
                    result = super().flush(*args)
                    if data is not None:
                        if args:   # a range: only its pages are forced
                            offset, size = args[0], args[1] if len(args) > 1 else len(data)
                            old = bytearray(recorder._durable.get(recorder._id(path), b""))
                            old[offset:offset + size] = data[offset:offset + size]
                            data = bytes(old)
                        recorder._durable[recorder._id(path)] = data
                    recorder.calls["msync"] += 1
                    return result

        real_sync_range = mapped_file_module.sync_range

        def sync_range(map_, start, end, drop):
            # MappedFile.flush's msync from C: [start's page, end) durable, as a ranged flush.
            path = getattr(map_, "recorded_path", None)
            if path is None:
                return real_sync_range(map_, start, end, drop)
            with recorder.lock:
                data = _read(path)
                result = real_sync_range(map_, start, end, drop)
                if data is not None:
                    first = start - start % PAGE
                    old = bytearray(recorder._durable.get(recorder._id(path), b""))
                    old[first:end] = data[first:end]
                    recorder._durable[recorder._id(path)] = bytes(old)
                recorder.calls["msync"] += 1
                return result

        monkeypatch.setattr(mapped_file_module, "sync_range", sync_range)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        monkeypatch.setattr(os, "replace", moved(real_replace))
        monkeypatch.setattr(os, "rename", moved(real_rename))
        monkeypatch.setattr(os, "unlink", forgotten(real_unlink))
        monkeypatch.setattr(os, "remove", forgotten(real_remove))
        monkeypatch.setattr(mmap, "mmap", RecordingMmap)
        # SYNC_FLUSH's group commit syncs from C (store/kernel/c/group_commit.c): give it the
        # recorded fdatasync, called at the same point of its loop as its own.
        monkeypatch.setattr(flush_module, "GroupCommit",
                            lambda: GroupCommit(sync=lambda fd: os.fdatasync(fd)))

    # -- the image after a cut -------------------------------------------------------------------

    def durable_bytes(self, path: str) -> bytes | None:
        """The durable bytes of the file now at `path` (None if never synced)."""
        with self.lock:
            ident = self._ids.get(os.path.realpath(path))
            return None if ident is None else self._durable.get(ident)

    def entry_is_durable(self, path: str) -> bool:
        """True if `path`'s current file is named in its directory's durable listing (and so on
        up to the root)."""
        with self.lock:
            path = os.path.realpath(path)
            ident = self._ids.get(path, _DIR if os.path.isdir(path) else None)
            while path != self.root:
                directory, name = os.path.split(path)
                if self._durable_dirs.get(directory, {}).get(name) != ident:
                    return False
                path, ident = directory, _DIR
            return True

    def image(self, target: str, rng: random.Random) -> None:
        """Write what the disk would hold after a power cut now into `target` (hold the engine
        still around the call: see test_power_loss.py)."""
        with self.lock:
            live = {ident: path for path, ident in self._ids.items()}
            self._image_dir(self.root, target, rng, live)
            for relative in self.own_state_dirs:
                _copy_as_is(os.path.join(self.root, relative), os.path.join(target, relative))

    def _image_dir(self, directory: str, target: str, rng: random.Random, live: dict) -> None:
        os.makedirs(target, exist_ok=True)
        for name, entry in self._durable_dirs.get(directory, {}).items():
            relative = os.path.relpath(os.path.join(directory, name), self.root)
            if any(relative == d for d in self.own_state_dirs):
                continue
            if entry == _DIR:
                self._image_dir(os.path.join(directory, name), os.path.join(target, name), rng,
                                live)
                continue
            data = self._file_image(entry, live.get(entry), rng)
            with open(os.path.join(target, name), "wb") as handle:
                handle.write(data)

    def _file_image(self, ident: int, live_path: str | None, rng: random.Random) -> bytes:
        durable = self._durable.get(ident)
        current = _read(live_path) if live_path is not None else None
        if current is None:
            return durable or b""
        if durable is None:
            if rng.random() < 0.5:
                return b""
            durable = b""
        size = len(durable) if rng.random() < 0.5 else len(current)
        base = bytearray(durable[:size].ljust(size, b"\0"))
        dirty = [page for page in range(0, min(size, len(current)), PAGE)
                 if base[page:page + PAGE] != current[page:page + PAGE]]
        choice = rng.random()
        kept = 0 if choice < 0.3 else len(dirty) if choice < 0.5 else rng.randint(0, len(dirty))
        for page in dirty[:kept]:   # in-order writeback of a prefix of the dirty pages
            end = min(page + PAGE, size)
            base[page:end] = current[page:end]
        return bytes(base)
