"""The set of index files under `<root>/index` (RocketMQ's `IndexService`, spec §5.5-§5.8, §11.1, §12.3).

Files are named by their creation time, `yyyyMMddHHmmssSSS` in local time, taken from an injectable
clock; they are kept in ascending name order, the last one is the one being written. The file layout is
in `store.index.index_file` / `store.codec.index_codec`.

| operation                         | spec   | what it does                                                  |
|-----------------------------------|--------|---------------------------------------------------------------|
| load(last_exit_ok, index_msg_ts)  | §11.1  | map all files; after a crash delete those newer than the ckpt |
| build_index(requests)             | §5.6   | index UNIQ_KEY and KEYS tokens of a batch of dispatch requests|
| query_offsets(topic, key, ...)    | §5.8   | phy offsets of (possibly colliding) hits, newest file first   |
| delete_expired(min_phy_offset)    | §12.3  | delete old files (never the last) below the commit log start  |
| refresh()                         |        | read-only: pick up files another process created or deleted   |
"""

from __future__ import annotations

import operator
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from store.codec.index_codec import IndexHeader, build_key
from store.codec.javahash import index_key_hashes_of
from store.errors import CorruptDataError, ReadOnlyStoreError, StoreError
from store.index.index_file import IndexFile
from store.index.index_query import ChainStep, query_key_hash
from store.kernel import java_hashes
from store.kernel.lookup import index_select_fast, index_select_py
from store.mappedfile.mapped_file import make_directories_durable

DEFAULT_MAX_MSGS_NUM_BATCH = 64
TRANSACTION_TYPE_MASK = 0x0C
TRANSACTION_ROLLBACK_TYPE = 0x0C
KEY_SEPARATOR = " "
FILE_NAME_LENGTH = 17
MAX_NAME_BUMPS = 100_000       # ms tried past the clock when names are taken (a fixed test clock)


@dataclass(frozen=True, slots=True)
class IndexQueryResult:
    """Raw index hits (hash collisions included), newest first per file, and the newest file's ends."""

    phy_offsets: list[int]
    last_update_timestamp: int
    last_update_phy_offset: int


def index_file_name(time_ms: int) -> str:
    """UtilAll.timeMillisToHumanString: `yyyyMMddHHmmssSSS` in the local time zone."""
    seconds, millis = divmod(time_ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{millis:03d}"


def _system_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class IndexService:
    """All index files of a store. Writes come from the single dispatch thread."""

    def __init__(self, index_dir: str | os.PathLike, max_hash_slot_num: int, max_index_num: int,
                 *, read_only: bool = False, clock_ms: Callable[[], int] | None = None,
                 on_file_full: Callable[[int], None] | None = None,
                 max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH):
        if max_hash_slot_num <= 0 or max_index_num <= 1:
            raise ValueError("maxHashSlotNum must be > 0 and maxIndexNum > 1")
        self.index_dir = os.fspath(index_dir)
        self.max_hash_slot_num = max_hash_slot_num
        self.max_index_num = max_index_num
        self.read_only = read_only
        self.clock_ms = clock_ms or _system_clock_ms
        self.on_file_full = on_file_full
        self.max_msgs_num_batch = max_msgs_num_batch
        self.deleted_on_load: list[str] = []   # names removed by load after an abnormal shutdown
        self.stale_files: list[str] = []       # read-only: names the broker would delete (kept here)
        self._files: list[IndexFile] = []
        self._lock = threading.RLock()

    # -- loading -----------------------------------------------------------------------------------

    def _list_names(self) -> list[str]:
        """Names of index files: regular files whose name is all digits, in ascending order."""
        try:
            entries = list(os.scandir(self.index_dir))
        except FileNotFoundError:
            return []
        if not self.read_only:
            for entry in entries:
                # Our own temporary name of an index file whose creation a crash interrupted.
                if entry.name.endswith(".creating") and entry.name[:-len(".creating")].isdigit():
                    os.remove(entry.path)
        return sorted(e.name for e in entries if e.name.isdigit() and e.is_file())

    def _open(self, name: str) -> IndexFile:
        return IndexFile(os.path.join(self.index_dir, name), self.max_hash_slot_num,
                         self.max_index_num, read_only=self.read_only)

    def load(self, last_exit_ok: bool = True, checkpoint_index_msg_timestamp: int = 0) -> None:
        """Map every index file (spec §5.7 load, §11.1 step 5).

        After an abnormal shutdown a file whose endTimestamp > the checkpoint's indexMsgTimestamp is
        deleted (recovery re-dispatch rebuilds it). Read-only, such files are kept and listed in
        `stale_files`: nothing can rebuild them, and their entries are still the best information.
        Raises CorruptDataError naming the file for a wrong size or indexCount > maxIndexNum.
        """
        with self._lock:
            assert not self._files, "load() called twice"
            try:
                for name in self._list_names():
                    index_file = self._open(name)
                    # A header with no end time and no entries was never flushed (a power cut
                    # right after the file was created): it holds nothing durable, and left in
                    # place its endPhyOffset 0 would make re-dispatch index everything again.
                    never_flushed = index_file.end_timestamp <= 0 and index_file.index_count <= 1
                    if not last_exit_ok and (never_flushed or index_file.end_timestamp >
                                             checkpoint_index_msg_timestamp):
                        if self.read_only:
                            self.stale_files.append(name)
                        else:
                            index_file.destroy()
                            self.deleted_on_load.append(name)
                            continue
                    self._files.append(index_file)
            except StoreError:
                self.close()
                raise

    def refresh(self) -> None:
        """Read-only: follow a writer in another process (new files, deleted files, new headers).

        A newest file whose size is still wrong is skipped until the next refresh (it may be being
        created); a wrong size anywhere else raises CorruptDataError.
        """
        if not self.read_only:
            return
        with self._lock:
            names = self._list_names()
            known = {f.name: f for f in self._files}
            refreshed: list[IndexFile] = []
            for position, name in enumerate(names):
                index_file = known.pop(name, None)
                if index_file is None:
                    try:
                        index_file = self._open(name)
                    except CorruptDataError:
                        if position == len(names) - 1:
                            break
                        raise
                else:
                    index_file.refresh()
                refreshed.append(index_file)
            for gone in known.values():
                gone.close()
            self._files = refreshed

    # -- writing -----------------------------------------------------------------------------------

    def _new_file_name(self) -> str:
        time_ms = self.clock_ms()
        taken = {f.name for f in self._files}
        for bump_ms in range(MAX_NAME_BUMPS):
            name = index_file_name(time_ms + bump_ms)
            if name not in taken and not os.path.exists(os.path.join(self.index_dir, name)):
                return name
        raise StoreError(f"no free index file name near {time_ms} in {self.index_dir}")

    def _create_file(self) -> IndexFile:
        """getAndCreateLastIndexFile when the last file is full (or there is none), spec §5.7."""
        with self._lock:
            previous = self._files[-1] if self._files else None
            make_directories_durable(self.index_dir)   # a new index/ survives a power cut
            index_file = IndexFile(
                os.path.join(self.index_dir, self._new_file_name()), self.max_hash_slot_num,
                self.max_index_num, create=True,
                prev_end_phy_offset=previous.end_phy_offset if previous else 0,
                prev_end_timestamp=previous.end_timestamp if previous else 0)
            self._files.append(index_file)
        if previous is not None:
            # IndexService.flush(prev): force the full file, then the checkpoint learns its end time.
            previous.flush()
            if previous.is_full() and previous.end_timestamp > 0 and self.on_file_full is not None:
                self.on_file_full(previous.end_timestamp)
        return index_file

    def _current_file(self) -> IndexFile:
        if self._files and not self._files[-1].is_full():
            return self._files[-1]
        return self._create_file()

    def build_index(self, requests: Sequence) -> None:
        """buildIndex (spec §5.6) for each request, in order.

        Uses only `topic`, `commit_log_offset`, `store_timestamp`, `sys_flag`, `uniq_key` and `keys`.
        The whole batch is indexed with numpy (`IndexFile.put_keys`), which gives the same bytes as
        RocketMQ's key-by-key inserts. As in the broker, a file that is full is followed by a new
        one even when the next record has no keys.
        """
        if self.read_only:
            raise ReadOnlyStoreError(f"index {self.index_dir} is read-only")
        if not requests:
            return
        index_file = self._current_file()
        # endPhyOffset as it moves with each put (a new file inherits it): records below it are
        # already indexed.
        end_phy_offset = index_file.end_phy_offset
        key_strings: list[str] = []
        phy_offsets: list[int] = []
        timestamps: list[int] = []
        add_key = key_strings.append
        add_phy = phy_offsets.append
        add_time = timestamps.append
        for request in requests:
            phy_offset = request.commit_log_offset
            if phy_offset < end_phy_offset:
                continue   # already indexed (re-dispatch after recovery)
            if request.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_ROLLBACK_TYPE:
                continue
            uniq_key = request.uniq_key
            keys = request.keys
            if uniq_key is None and not keys:
                continue
            prefix = request.topic + "#"
            store_ts = request.store_timestamp
            if uniq_key is not None:
                add_key(prefix + uniq_key)
                add_phy(phy_offset)
                add_time(store_ts)
            if keys:
                for token in keys.split(KEY_SEPARATOR):
                    if token:
                        add_key(prefix + token)
                        add_phy(phy_offset)
                        add_time(store_ts)
            if phy_offsets and phy_offsets[-1] == phy_offset:
                end_phy_offset = phy_offset
        if not key_strings:
            return
        self._insert(index_file, java_hashes(key_strings), np.array(phy_offsets, dtype=np.int64),
                     np.array(timestamps, dtype=np.int64))

    @property
    def end_phy_offset(self) -> int:
        """endPhyOffset of the newest file (0 without files): records below it are indexed."""
        with self._lock:
            return self._files[-1].end_phy_offset if self._files else 0

    def build_index_hashed(self, key_hashes, phys, times) -> None:
        """`build_index` for keys already made and hashed (Java String.hashCode of each
        `topic#key`, in log order, see `store.kernel.index_hashes`), of records at or above
        `end_phy_offset` that are not ROLLBACKs: the same bytes as build_index of their requests."""
        if self.read_only:
            raise ReadOnlyStoreError(f"index {self.index_dir} is read-only")
        index_file = self._current_file()
        if len(key_hashes):
            self._insert(index_file, key_hashes, phys, times)

    def _insert(self, index_file: IndexFile, key_hashes, phys, times) -> None:
        hashes = index_key_hashes_of(key_hashes)
        done = 0
        total = len(hashes)
        for _ in range(total + 1):   # bounded: each pass inserts at least one key
            written = index_file.put_keys(hashes[done:], phys[done:], times[done:])
            done += written
            index_file.write_header()
            if done >= total:
                break
            index_file = self._current_file()
        if index_file.is_full():
            # The broker creates the next file on the next put; creating it now keeps the
            # on-file-full callback (checkpoint indexMsgTimestamp) timely.
            self._current_file()

    def delete_expired(self, commit_log_min_offset: int) -> int:
        """deleteExpiredFile (spec §12.3): delete old files (never the last) whose endPhyOffset is
        below the commit log's min offset. Returns the number of files deleted."""
        if self.read_only:
            raise ReadOnlyStoreError(f"index {self.index_dir} is read-only")
        with self._lock:
            if not self._files or self._files[0].end_phy_offset >= commit_log_min_offset:
                return 0
            expired = []
            for index_file in self._files[:-1]:
                if index_file.end_phy_offset >= commit_log_min_offset:
                    break
                expired.append(index_file)
            for index_file in expired:
                index_file.destroy()
            self._files = self._files[len(expired):]
            return len(expired)

    def flush(self) -> None:
        """Write every header and force every file (what 5.x does at shutdown)."""
        with self._lock:
            for index_file in self._files:
                index_file.flush()

    def close(self) -> None:
        """Unmap every file (no flush; call flush() first to force headers)."""
        with self._lock:
            for index_file in self._files:
                index_file.close()
            self._files = []

    # -- queries -----------------------------------------------------------------------------------

    # Properties over attrgetter rather than defs: a key query reads both, and a Python getter is
    # a frame each (store.lookups.query_message).
    lock = property(operator.attrgetter("_lock"),
                    doc="The lock that guards the file list (held by a whole key query, see "
                        "`live_files`).")
    live_files = property(operator.attrgetter("_files"),
                          doc="The file list itself, oldest first (not a copy: read it only while "
                              "holding `lock`).")

    def query_offsets(self, topic: str, key: str, max_num: int, begin_ms: int,
                      end_ms: int) -> IndexQueryResult:
        """queryOffset (spec §5.8): raw hits, collisions included, max_num capped at the batch max."""
        max_num = min(max_num, self.max_msgs_num_batch)
        key_string = build_key(topic, key)
        key_hash = query_key_hash(key_string, len(topic) + 1)   # once, not once per file
        phy_offsets: list[int] = []
        last_ts = last_phy = 0
        read_only = self.read_only
        with self._lock:
            files = self._files
            last_position = len(files) - 1
            for position in range(last_position, -1, -1):
                index_file = files[position]
                if read_only:
                    index_file.refresh()
                if position == last_position:
                    last_ts, last_phy = index_file.end_timestamp, index_file.end_phy_offset
                # is_time_matched, inline
                first, last = index_file.begin_timestamp, index_file.end_timestamp
                if ((begin_ms < first and end_ms > last) or (first <= begin_ms <= last)
                        or (first <= end_ms <= last)):
                    # IndexFile.select, inline (its header is fresh, the hash is known)
                    args = (index_file._require_map(), key_hash, index_file.max_hash_slot_num,
                            index_file.max_index_num, index_file.index_count, first, max_num,
                            begin_ms, end_ms, phy_offsets)
                    if index_select_fast(*args) is NotImplemented:   # the C asks its twin
                        index_select_py(*args)
                if first < begin_ms or len(phy_offsets) >= max_num:
                    break
        return IndexQueryResult(phy_offsets, last_ts, last_phy)

    # -- dashboard helpers -------------------------------------------------------------------------

    @property
    def files(self) -> list[IndexFile]:
        """The index files, oldest first (a copy of the list)."""
        with self._lock:
            return list(self._files)

    def headers(self) -> list[tuple[str, IndexHeader]]:
        """(file name, header as stored) for every file, oldest first."""
        return [(f.name, f.header()) for f in self.files]

    def _file_named(self, name: str | None) -> IndexFile:
        files = self.files
        if not files:
            raise StoreError(f"no index files in {self.index_dir}")
        if name is None:
            return files[-1]
        for index_file in files:
            if index_file.name == name:
                return index_file
        raise StoreError(f"no index file named {name!r} in {self.index_dir}")

    def slot_table(self, name: str | None = None) -> np.ndarray:
        """Slot table of the named file (the newest by default) as native int32."""
        return self._file_named(name).slot_table()

    def entries(self, name: str | None = None) -> np.ndarray:
        """Entries of the named file (the newest by default), row number = entry number."""
        return self._file_named(name).entries()

    def walk_chain(self, topic: str, key: str) -> list[tuple[str, list[ChainStep]]]:
        """The chain `topic#key` hashes to in every file, newest file first: (name, steps)."""
        key_string = build_key(topic, key)
        return [(f.name, f.walk_chain(key_string)) for f in reversed(self.files)]
