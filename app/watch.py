"""Watching a store directory that another process writes (read-only stores).

watchdog reports files created and deleted (a commit log rolling, a new index file, the `abort` file
coming and going, expiry) and rewrites of the config JSON files. Appends inside an existing segment
are not file events worth reporting; the tail poll (`MessageStore.refresh()`) picks those up.
"""

from __future__ import annotations

import collections
import os
import threading
import time

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

MAX_EVENTS = 200


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: "StoreWatcher"):
        self.watcher = watcher

    def on_created(self, event):
        self.watcher.note("created", event.src_path, event.is_directory)

    def on_deleted(self, event):
        self.watcher.note("deleted", event.src_path, event.is_directory)

    def on_moved(self, event):
        # The broker's JSON files are written to .tmp and renamed into place.
        self.watcher.note("replaced", event.dest_path, event.is_directory)

    def on_modified(self, event):
        if not event.is_directory and event.src_path.endswith(".json"):
            self.watcher.note("rewritten", event.src_path, False)


class StoreWatcher:
    """File events under one store root, kept in a bounded list; flags say what needs reloading."""

    def __init__(self, root: str):
        self.root = root
        self.events: collections.deque = collections.deque(maxlen=MAX_EVENTS)
        self._lock = threading.Lock()
        self.files_changed = False
        self.config_changed = False
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.schedule(_Handler(self), root, recursive=True)
        self._observer.start()

    def note(self, kind: str, path, is_directory: bool) -> None:
        path = os.fsdecode(path)
        relative = os.path.relpath(path, self.root)
        with self._lock:
            self.events.append((int(time.time() * 1000), kind, relative + ("/" if is_directory else "")))
            if relative.startswith("config") or relative.endswith(".json"):
                self.config_changed = True
            else:
                self.files_changed = True

    def take_flags(self) -> tuple[bool, bool]:
        """(files changed, config changed) since the last call; resets both."""
        with self._lock:
            flags = (self.files_changed, self.config_changed)
            self.files_changed = self.config_changed = False
            return flags

    def recent(self, limit: int = 20) -> list[tuple[int, str, str]]:
        with self._lock:
            return list(self.events)[-limit:][::-1]

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=2)
