"""The store's `lock` and `abort` files (spec §6.2, §6.3).

`lock`: the broker opens `<root>/lock` read/write, takes a non-blocking exclusive POSIX record lock on
byte range [0, 1) (`FileChannel.tryLock(0, 1, false)`), writes the 4 ASCII bytes `lock` at offset 0 and
forces them. `StoreLock` does the same with `fcntl.lockf(fd, LOCK_EX | LOCK_NB, 1, 0)`.

POSIX record locks belong to the *process*: a second lock from the same process would succeed, and
closing *any* descriptor of the file drops the lock. So this module keeps a per-process registry of held
locks, refuses a second acquire of the same store, and `probe_lock` never opens a file this process locks.

`abort`: created when a store starts writing and removed on a clean shutdown; its presence at start-up
means the last run crashed. 4.9.7 writes it empty. 5.x (`MixAll.string2File`) first copies the current
content (empty for a fresh file) to `abort.bak`, then writes the process id as text; the shutdown removes
`abort` only, so `abort.bak` survives (fixtures README). A read-only user never calls these helpers.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading

from store.errors import StoreLockedError
from store.mappedfile.mapped_file import fsync_directory
from store.meta.config_files import atomic_write_bytes

LOCK_FILE = "lock"
ABORT_FILE = "abort"
ABORT_BAK_FILE = "abort.bak"
LOCK_CONTENT = b"lock"

_held: dict[str, StoreLock] = {}       # realpath of lock file -> holder, in this process
_held_guard = threading.Lock()


def _lock_path(root: str | os.PathLike) -> str:
    return os.path.realpath(os.path.join(os.fspath(root), LOCK_FILE))


class StoreLock:
    """The exclusive lock on `<root>/lock`. Use as a context manager or acquire()/release()."""

    def __init__(self, root: str | os.PathLike):
        self.root = os.fspath(root)
        self.path = os.path.join(self.root, LOCK_FILE)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> StoreLock:
        """Take the lock or raise StoreLockedError; then write `lock` at byte 0 and fsync."""
        if self._fd is not None:
            raise StoreLockedError(f"{self.path} is already held by this StoreLock")
        key = _lock_path(self.root)
        with _held_guard:
            if key in _held:
                raise StoreLockedError(f"{self.path} is already locked by this process")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    raise StoreLockedError(
                        f"{self.path} is locked by another process (a running broker?)") from None
                raise
            try:
                os.pwrite(fd, LOCK_CONTENT, 0)
                os.fsync(fd)
            except BaseException:
                os.close(fd)   # closing drops the lock
                raise
            self._fd = fd
            _held[key] = self
        return self

    def release(self) -> None:
        """Drop the lock (the file stays, as with the broker). Safe to call twice."""
        if self._fd is None:
            return
        with _held_guard:
            _held.pop(_lock_path(self.root), None)
            fd, self._fd = self._fd, None
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(fd)

    def __enter__(self) -> StoreLock:
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


# struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid.
_FLOCK = struct.Struct("hhqqi4x")


def probe_lock(root: str | os.PathLike) -> int | None:
    """The pid holding `<root>/lock`, or None if nobody does (or the file is missing).

    Uses F_GETLK, which takes no lock. For a store locked by this process it returns os.getpid()
    without opening the file (closing a descriptor would drop our own lock). Linux layout of
    `struct flock`.
    """
    key = _lock_path(root)
    with _held_guard:
        if key in _held:
            return os.getpid()
    try:
        fd = os.open(key, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        # F_GETLK with a write-lock query works on a read-only descriptor.
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
    finally:
        os.close(fd)
    l_type, _, _, _, l_pid = _FLOCK.unpack(answer)
    return None if l_type == fcntl.F_UNLCK else l_pid


# --------------------------------------------------------------------------------------------- abort

def _check_style(style: str) -> None:
    if style not in ("4.9", "5.x"):
        raise ValueError(f"abort style {style!r} is not '4.9' or '5.x'")


def abort_path(root: str | os.PathLike) -> str:
    return os.path.join(os.fspath(root), ABORT_FILE)


def abort_exists(root: str | os.PathLike) -> bool:
    """True if `<root>/abort` exists: the last run did not shut down cleanly."""
    return os.path.exists(abort_path(root))


def create_abort(root: str | os.PathLike, style: str) -> None:
    """Mark the store as running. "4.9": an empty `abort` (left alone if present). "5.x": `abort.bak`
    gets the current content of `abort` (created empty first), then `abort` gets our pid as text."""
    _check_style(style)
    path = abort_path(root)
    if style == "4.9":
        if not os.path.exists(path):
            with open(path, "xb") as f:
                os.fsync(f.fileno())
            fsync_directory(root)
        return
    try:
        with open(path, "rb") as f:
            previous = f.read()
    except FileNotFoundError:
        previous = b""   # the broker's createNewFile() makes it empty first
    bak = os.path.join(os.fspath(root), ABORT_BAK_FILE)
    atomic_write_bytes(bak, previous, bak + ".tmp")
    atomic_write_bytes(path, str(os.getpid()).encode("ascii"), path + ".tmp")


def delete_abort(root: str | os.PathLike, style: str) -> None:
    """Mark a clean shutdown: remove `abort` (5.x keeps `abort.bak`). Missing `abort` is fine."""
    _check_style(style)
    try:
        os.unlink(abort_path(root))
    except FileNotFoundError:
        return
    fsync_directory(root)


def read_abort_pid(root: str | os.PathLike) -> int | None:
    """[5.x] The pid written in `abort`, or None if the file is missing, empty (4.9.7) or not a number."""
    try:
        with open(abort_path(root), "rb") as f:
            text = f.read(64).strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None
