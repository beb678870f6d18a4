"""Checking what a user types before the app touches the file system.

Every path from a form goes through `resolve_store_dir` (or `resolve_file`): it is expanded, resolved
with realpath (so `..` and symlinks cannot point somewhere the user did not see), and checked. Failures
raise `InputError`, whose message is a sentence the page shows as is.
"""

from __future__ import annotations

import os

MAX_PATH_CHARS = 4096
STORE_MARKERS = ("commitlog", "consumequeue", "index", "checkpoint", "config")


class InputError(ValueError):
    """Bad input from a form; the message is shown to the user verbatim."""


def _clean(text: str | None) -> str:
    if text is None or not str(text).strip():
        raise InputError("Please enter a path.")
    text = str(text).strip()
    if len(text) > MAX_PATH_CHARS:
        raise InputError(f"The path is longer than {MAX_PATH_CHARS} characters.")
    if "\x00" in text:
        raise InputError("The path contains a NUL character.")
    return os.path.realpath(os.path.expanduser(text))


def looks_like_store(path: str) -> bool:
    """True if `path` holds at least one of a store's well-known entries."""
    return any(os.path.exists(os.path.join(path, marker)) for marker in STORE_MARKERS)


def resolve_store_dir(text: str | None, *, must_exist: bool = True) -> str:
    """Realpath of a store root the user typed; InputError unless it is a readable store directory."""
    path = _clean(text)
    if not must_exist:
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            raise InputError(f"The parent directory {parent} does not exist.")
        if os.path.exists(path) and not os.path.isdir(path):
            raise InputError(f"{path} exists and is not a directory.")
        return path
    if not os.path.isdir(path):
        raise InputError(f"{path} is not a directory.")
    if not os.access(path, os.R_OK | os.X_OK):
        raise InputError(f"{path} is not readable.")
    if not looks_like_store(path):
        # A fixture folder keeps the store one level down, in store/.
        nested = os.path.join(path, "store")
        if os.path.isdir(nested) and looks_like_store(nested):
            return nested
        raise InputError(f"{path} does not look like a RocketMQ store (no commitlog/, consumequeue/, "
                         "index/, checkpoint or config/).")
    return path


def resolve_file(text: str | None) -> str:
    """Realpath of an existing regular file the user typed (for example a store.properties)."""
    path = _clean(text)
    if not os.path.isfile(path):
        raise InputError(f"{path} is not a file.")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path} is not readable.")
    return path


def parse_int(text, what: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer from a form field, with a sentence for the user when it is not one."""
    try:
        value = int(str(text).strip(), 0) if isinstance(text, str) else int(text)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be an integer, not {str(text)[:40]!r}.") from None
    if minimum is not None and value < minimum:
        raise InputError(f"{what} must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise InputError(f"{what} must be at most {maximum}.")
    return value
