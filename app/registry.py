"""The open stores of one dashboard process: `StoreRegistry` (held in st.cache_resource) and
`StoreHandle` (one open `MessageStore` plus what the pages keep about it).

Modes:
- "read-only": the engine maps the files read-only and never writes (a live broker's directory);
  a watchdog observer and `MessageStore.refresh()` follow what the writer appends.
- "hosted": our engine owns the directory (lock, abort file, flush, dispatch).

The checked-in sample store is never opened writable: the default store is a hosted copy of it in the
registry's scratch directory. Scratch copies are deleted when the registry is closed.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass

from app.paths import InputError
from app.store_config import resolve_config
from app.watch import StoreWatcher
from store.message_store import MessageStore

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_STORE = os.path.join(REPO_ROOT, "sample_store")
MODES = ("read-only", "hosted")
MAX_SAMPLES = 600
MAX_OPEN_STORES = 16


@dataclass(frozen=True)
class Sample:
    at_s: float            # time.monotonic()
    wall_ms: int
    max_phy_offset: int
    reput_offset: int
    messages: int


class StoreHandle:
    """One open store and the dashboard's state about it (rate samples, file events, caches)."""

    def __init__(self, key: str, label: str, root: str, mode: str, store: MessageStore,
                 config_source: str, *, scratch: bool, source_root: str | None = None):
        self.key, self.label, self.root, self.mode = key, label, root, mode
        self.store = store
        self.config_source = config_source
        self.scratch = scratch
        self.source_root = source_root
        self.lock = threading.RLock()
        self.samples: collections.deque[Sample] = collections.deque(maxlen=MAX_SAMPLES)
        self.segment_cache: dict = {}
        self.load_generator = None
        self.pipeline_run = None
        self.watcher = StoreWatcher(root) if mode == "read-only" else None
        self.refresh_error: str | None = None
        self.named = False   # True when `label` was given (a scratch copy), not the folder name

    @property
    def read_only(self) -> bool:
        return self.mode == "read-only"

    def refresh(self) -> int:
        """Read-only: pick up appended records and reload rewritten config files. Returns new bytes."""
        if not self.read_only or self.store.closed:
            return 0
        with self.lock:
            grown = self.store.refresh()
            if self.watcher is not None:
                _files, config_changed = self.watcher.take_flags()
                if config_changed:
                    self.store.consumer_offsets.load()
                    self.store.topics.load()
            return grown

    def sample(self, min_interval_s: float = 0.5) -> list[Sample]:
        """Record the current pointers (at most every `min_interval_s`); return the samples."""
        now = time.monotonic()
        if not self.samples or now - self.samples[-1].at_s >= min_interval_s:
            store = self.store
            pointers = store.pointers()
            queues = store.queues()
            messages = store.total_messages() if len(queues) <= 5000 else -1
            self.samples.append(Sample(now, int(time.time() * 1000), pointers["max_phy_offset"],
                                       pointers["reput"], messages))
        return list(self.samples)

    def close(self) -> None:
        if self.load_generator is not None:
            self.load_generator.stop()
        if self.watcher is not None:
            self.watcher.stop()
        self.store.close()
        if self.scratch:
            shutil.rmtree(self.root, ignore_errors=True)


class StoreRegistry:
    """Every store the dashboard has open, by key; shared by all sessions."""

    def __init__(self, scratch_root: str | None = None, sample_root: str = SAMPLE_STORE):
        self.scratch_root = scratch_root or tempfile.mkdtemp(prefix="rmq-inspector-")
        self.sample_root = sample_root
        self._handles: dict[str, StoreHandle] = {}
        self._lock = threading.RLock()
        self._counter = 0
        self.closed = False

    # -- opening ---------------------------------------------------------------------------------

    def open(self, root: str, mode: str, *, properties_path: str | None = None,
             label: str | None = None, scratch: bool = False,
             source_root: str | None = None) -> StoreHandle:
        """Open `root` (already resolved by app.paths) or return the handle already open."""
        if mode not in MODES:
            raise InputError(f"mode must be one of {MODES}")
        key = f"{mode}:{root}"
        with self._lock:
            if key in self._handles:
                return self._handles[key]
            other = f"{'hosted' if mode == 'read-only' else 'read-only'}:{root}"
            if mode == "hosted" and other in self._handles:
                raise InputError(f"{root} is already open read-only here; close it before hosting it.")
            if mode == "hosted" and os.path.realpath(root) == os.path.realpath(self.sample_root):
                raise InputError("The checked-in sample store is never opened writable; "
                                 "use the scratch copy (the default store) instead.")
            if len(self._handles) >= MAX_OPEN_STORES:
                raise InputError(f"At most {MAX_OPEN_STORES} stores can be open; close one first.")
            resolved = resolve_config(root, properties_path)
            store = MessageStore.open(resolved.config, read_only=(mode == "read-only"))
            handle = StoreHandle(key, label or os.path.basename(root.rstrip("/")) or root, root, mode,
                                 store, resolved.source, scratch=scratch, source_root=source_root)
            handle.named = label is not None
            self._handles[key] = handle
            return handle

    def scratch_dir(self, name: str) -> str:
        with self._lock:
            self._counter += 1
            return os.path.join(self.scratch_root, f"{self._counter:03d}-{name}")

    def copy_to_scratch(self, source_root: str, name: str) -> str:
        """Copy a store directory into the scratch area (lock and abort files included)."""
        target = self.scratch_dir(name)
        shutil.copytree(source_root, target, ignore=shutil.ignore_patterns("lock"))
        for dirpath, _dirs, files in os.walk(target):
            os.chmod(dirpath, 0o755)
            for file_name in files:
                os.chmod(os.path.join(dirpath, file_name), 0o644)
        return target

    def open_copy(self, source_root: str, *, label: str,
                  properties_path: str | None = None) -> StoreHandle:
        """Host a scratch copy of `source_root` (the original is only read)."""
        props = properties_path or _properties_near(source_root)
        target = self.copy_to_scratch(source_root, os.path.basename(source_root.rstrip("/")))
        return self.open(target, "hosted", properties_path=props, label=label, scratch=True,
                         source_root=source_root)

    def default(self) -> StoreHandle:
        """The store shown when nothing was picked: a hosted scratch copy of the sample store."""
        with self._lock:
            for handle in self._handles.values():
                if handle.source_root == self.sample_root:
                    return handle
            return self.open_copy(self.sample_root, label="sample_store (scratch copy)")

    # -- lookup / closing ------------------------------------------------------------------------

    def get(self, key: str | None) -> StoreHandle | None:
        with self._lock:
            return self._handles.get(key) if key else None

    def handles(self) -> list[StoreHandle]:
        with self._lock:
            return list(self._handles.values())

    def display_names(self) -> dict[str, str]:
        """key -> a name for the store picker that tells every open store apart: the shortest
        distinguishing tail of its real path (`distinct_names`), or a named copy's label (with that
        tail when two copies share the label), and the mode. Unique per key, because the keys are
        (mode, real path)."""
        handles = self.handles()
        names = distinct_names([h.root for h in handles])
        labels = collections.Counter(h.label for h in handles if h.named)
        return {h.key: (f"{h.label}: {names[h.root]}" if h.named and labels[h.label] > 1 else
                        h.label if h.named else names[h.root]) + f" [{h.mode}]"
                for h in handles}

    def close(self, key: str) -> None:
        with self._lock:
            handle = self._handles.pop(key, None)
        if handle is not None:
            handle.close()

    def close_all(self) -> None:
        """Clean shutdown of every store, then the scratch area."""
        with self._lock:
            handles = list(self._handles.values())
            self._handles.clear()
            self.closed = True
        for handle in handles:
            try:
                handle.close()
            except OSError:
                pass
        shutil.rmtree(self.scratch_root, ignore_errors=True)


def distinct_names(roots: list[str]) -> dict[str, str]:
    """root -> the shortest trailing part of its real path that no other root in `roots` ends with.

    RocketMQ's default folder is `store` (storePathRootDir = ~/store), so two brokers' stores often
    share their last component: `/x/crash/store` and `/x/rolled/store` become `crash/store` and
    `rolled/store`. A root that is a suffix of another (`/a/store` beside `/b/a/store`) keeps its
    whole path."""
    parts = {root: os.path.realpath(root).rstrip(os.sep).split(os.sep) for root in set(roots)}
    names = {}
    for root, components in parts.items():
        for length in range(1, len(components) + 1):
            tail = components[-length:]
            if not any(other != root and others[-length:] == tail
                       for other, others in parts.items()):
                break
        names[root] = os.sep.join(tail) or os.sep
    return names


def _properties_near(root: str) -> str | None:
    from app.store_config import find_properties
    return find_properties(root)
