"""Typed errors of the store.

Expected failures (bad input, corrupt bytes, a store owned by someone else) raise a subclass of
`StoreError`. Bugs are `assert`s. Corrupt bytes always name the file and the byte position, so an
operator can find them with a hex viewer.
"""

from __future__ import annotations

import os


class StoreError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(StoreError):
    """A configuration value or file is wrong (unknown enum value, bad number, missing directory)."""


class CorruptDataError(StoreError):
    """Bytes on disk (or handed to a decoder) do not follow the format.

    `path` is the file (None for an in-memory buffer), `position` the byte position inside that file or
    buffer, `reason` a sentence saying what is wrong.
    """

    def __init__(self, path: str | os.PathLike | None, position: int, reason: str):
        self.path = None if path is None else os.fspath(path)
        self.position = position
        self.reason = reason
        where = f"{self.path} at byte {position}" if self.path else f"byte {position}"
        super().__init__(f"corrupt data in {where}: {reason}")


class InvalidTopicError(StoreError):
    """A topic name breaks RocketMQ's rules (characters, length, reserved names)."""


class StoreLockedError(StoreError):
    """Another process (a broker or another engine) holds the store's lock file."""


class ReadOnlyStoreError(StoreError):
    """A write was attempted on a store opened read-only."""


class StoreClosedError(StoreError):
    """The store was used after close()."""


class MessageNotFoundError(StoreError):
    """No record at the given physical offset or message id."""


class EarliestTimeUnavailable(StoreError):
    """RocketMQ cannot answer the store-wide earliest message time here, and we answer as it does.

    5.3.3's `DefaultMessageStore.getEarliestMessageTime` reads 64 bytes of the first record (76 when
    brokerIP1 is IPv6) and throws IndexOutOfBoundsException when the record's born host is IPv6: its
    store time then sits at bytes 68..75. `first_store_timestamp_ms` is that record's real store time.
    """

    def __init__(self, message: str, first_store_timestamp_ms: int):
        super().__init__(message)
        self.first_store_timestamp_ms = first_store_timestamp_ms
