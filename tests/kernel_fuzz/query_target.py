"""The fuzz driver's `query_keys` target (store/kernel/c/query.c), also run unsanitized by
tests/test_kernel_query.py.

Input: 1-3 small index files (random slots, chains with hits, collisions, cycles, prev out of
range, negative and large times, headers with edge times, sometimes read-only, closed or cut short)
over 1-3 commit-log segments of real records (IPv4/IPv6 hosts, non-ASCII properties, some bytes
set to edge values, read positions cutting records, a destroyed segment, a gap in the segment
list), a topic and a key (ASCII or not; records of other topics, with the key as KEYS, one of
the KEYS, UNIQ_KEY or not at all: collisions), max_num and a time window at their edges.

Checked against `query_keys_py` (store.kernel.query, its index walk and record reads in Python
under RMQ_KERNEL=python): the same messages, hit count, times and offsets, or the same exception. When the C
answers NotImplemented ("ask the twin") nothing is compared: the dispatcher runs the twin.
"""

from __future__ import annotations

import struct

from store.codec import msgid
from store.codec.message import MessageRecord, decode_message, encode_message
from store.codec.properties import decode_properties, encode_properties
from store.errors import StoreClosedError
import threading

from store.api import QueryMessageResult
from store.kernel.query import index_key_hash_py, query_keys_py, query_message_py
from store.mappedfile.mapped_file_queue import MappedFileQueue

EDGES = [0, 1, -1, 2**31 - 1, -2**31, 2**62, -2**62, 2**62 + 1, 2**63 - 1, -2**63, 2**64]
BASE_MS = 1_700_000_000_000
DECODERS = (MessageRecord, decode_message, decode_properties, msgid.host_to_string)


class FakeIndexFile:
    """What query_keys reads of an IndexFile."""

    def __init__(self, buf, slots, max_index, count, begin_ms, end_ms, end_phy, read_only):
        self._map = buf
        self.max_hash_slot_num, self.max_index_num, self.index_count = slots, max_index, count
        self.begin_timestamp, self.end_timestamp, self.end_phy_offset = begin_ms, end_ms, end_phy
        self.read_only = read_only
        self.refreshes = 0
        self.refresh_fails = False

    def refresh(self):
        self.refreshes += 1
        if self.refresh_fails:
            raise OSError("index file header unreadable")

    def _require_map(self):
        if self._map is None:
            raise StoreClosedError("index file is closed")
        return self._map


class FakeSegment:
    """What query_keys reads of a commit-log MappedFile."""

    def __init__(self, buffer, file_from_offset, file_size_bytes, read_position, destroyed,
                 write_buffer=None):
        self._map, self.file_from_offset, self.file_size_bytes = buffer, file_from_offset, file_size_bytes
        self.destroyed, self.write_buffer = destroyed, write_buffer
        # MappedFile's read_position: the committed position with a write buffer (the transient
        # store pool; the wrote position is then ahead of it), else the wrote position
        if write_buffer is not None:
            self.committed_position, self.wrote_position = read_position, file_size_bytes
        else:
            self.committed_position, self.wrote_position = 0, read_position

    @property
    def buffer(self):
        return self._map

    @property
    def read_position(self):
        return self.committed_position if self.write_buffer is not None else self.wrote_position

    @property
    def file_end_offset(self):
        return self.file_from_offset + self.file_size_bytes


class FakeSegments:
    """What query_keys reads of the commit log's MappedFileQueue (its own find_file)."""

    find_file = MappedFileQueue.find_file

    def __init__(self, files, file_size_bytes):
        self.files, self.file_size_bytes = files, file_size_bytes


def _segments(rng, key: str):
    """(FakeSegments, [(phy_offset, store time)] of the records written)."""
    segment_bytes = rng.choice([2048, 4096])
    files, records = [], []
    for number in range(rng.choice([1, 1, 2, 3])):
        buf = bytearray(segment_bytes)
        position = 0
        from_offset = number * segment_bytes
        for n in range(rng.randrange(1, 12)):
            keys = rng.choice([key, f"{key} other", "other", "", f"x{key} {key}x", f"other  {key}",
                               f" {key}", f"{key}{key} {key[:1]}"])
            props = {"KEYS": keys, "UNIQ_KEY": f"U{n}"} if keys else {"UNIQ_KEY": key}
            if rng.random() < 0.15:
                props["X"] = "é" * rng.randrange(1, 4)
            store_ms = BASE_MS + rng.randrange(0, 5000)
            record = encode_message(
                topic=rng.choice(["T", "T", "Other", "Té"]), queue_id=0, body=b"b" * rng.randrange(40),
                properties_raw=encode_properties(props), queue_offset=n,
                phy_offset=from_offset + position, born_timestamp=store_ms,
                born_host=rng.choice(["127.0.0.1:1", "[::1]:5"]), store_timestamp=store_ms,
                store_host="127.0.0.1:2", version=rng.choice([1, 2]))
            if position + len(record) > segment_bytes:
                break
            if rng.random() < 0.1:
                record[rng.randrange(len(record))] = rng.choice([0, 0xFF, 0x80])
            buf[position:position + len(record)] = record
            records.append((from_offset + position, store_ms))
            position += len(record)
        read_position = rng.choice([position, position, position - 5, 0, segment_bytes])
        files.append(FakeSegment(bytes(buf), from_offset, segment_bytes, read_position,
                                 rng.random() < 0.05,
                                 bytearray(8) if rng.random() < 0.3 else None))
    if len(files) > 2 and rng.random() < 0.2:
        del files[1]                           # a gap: find_file scans (the C asks)
    return FakeSegments(files, segment_bytes), records


def _index_file(rng, key_hash: int, records, read_only: bool):
    slots = rng.choice([1, 2, 4, 8])
    max_index = rng.choice([4, 8, 16])
    buf = bytearray(40 + 4 * slots + 20 * max_index)
    count = rng.choice([max_index - 1, max_index, rng.randrange(0, max_index + 1)])
    count = max(count, 1)
    begin_ms = rng.choice([BASE_MS, BASE_MS + 1000, 0])
    for entry in range(1, max_index):
        phy, _ms = rng.choice(records) if records and rng.random() < 0.8 else (rng.randrange(-5, 9000), 0)
        struct.pack_into(">iqii", buf, 40 + 4 * slots + 20 * entry,
                         rng.choice([key_hash, key_hash, rng.randrange(0, 2**31)]), phy,
                         rng.choice([0, 1, 2, 4, -1, 2**31 - 1]),
                         rng.choice([entry - 1, entry - 1, entry, entry + 1, rng.randrange(-2, max_index + 2)]))
    for slot in range(slots):
        struct.pack_into(">i", buf, 40 + 4 * slot, rng.choice([count - 1, rng.randrange(-1, max_index + 2)]))
    if rng.random() < 0.1:
        buf = buf[:rng.randrange(len(buf) + 1)]
    end_ms = rng.choice([begin_ms + 5000, begin_ms, BASE_MS + 3000])
    return FakeIndexFile(bytes(buf), slots, max_index, count, begin_ms, end_ms,
                         rng.randrange(0, 9000), read_only)


def make_args(rng) -> tuple:
    """One query_keys input (the arguments of both functions)."""
    key = rng.choice(["k", "key-1", "ké", "\U0001F600", "", "k k", "\U0001F600é"])
    topic = rng.choice(["T", "T", "Té"])
    key_hash = index_key_hash_py(topic + "#" + key)
    segments, records = _segments(rng, key)
    files = [_index_file(rng, key_hash, records, rng.random() < 0.1)
             for _ in range(rng.choice([0, 1, 1, 2, 3]))]
    if files and rng.random() < 0.05:
        rng.choice(files)._map = None
    if files and rng.random() < 0.03:
        rng.choice(files).refresh_fails = True     # raised only by a read-only file's refresh()
    if files and rng.random() < 0.05:
        setattr(rng.choice(files), rng.choice(["begin_timestamp", "end_timestamp", "index_count"]),
                rng.choice(EDGES))
    pick = (lambda usual: usual if rng.random() < 0.85 else rng.choice(EDGES))
    return (files, topic, key, pick(rng.choice([1, 2, 5, 32])),
            pick(rng.choice([0, 0, BASE_MS + 1000, BASE_MS + 2500])),
            pick(rng.choice([2**63 - 1, BASE_MS + 3000, BASE_MS + 6000])), segments, DECODERS)


def outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as error:
        return ("raise", type(error).__name__, str(error))


def query_keys(fuzzer) -> bool:
    """One query_keys input; True when it was compared with the twin."""
    args = make_args(fuzzer.rng)
    fuzzer.last_input = {"target": "query_keys", "args": repr(args[1:6])}
    got = outcome(fuzzer.native.query_keys, *args)
    if got == ("ok", NotImplemented):
        return False
    want = outcome(query_keys_py, *args)
    if got != want:
        raise fuzzer.disagreement(f"query_keys: C {got!r:.2000} twin {want!r:.2000}")
    return True


class FakeIndexService:
    """What query_message reads of an IndexService: its lock and its live file list."""

    def __init__(self, files):
        self.lock = threading.RLock()
        self.live_files = files


class DecoyIndexService:
    """An IndexService whose file list read without its lock (query_message's slot hint, see
    c/query_hints.c) is another one: the answer must be that of the list read under the lock."""

    def __init__(self, files, decoy):
        self.lock = threading.RLock()
        self.files, self.decoy = files, decoy

    @property
    def live_files(self):
        return self.files if self.lock._is_owned() else self.decoy


def _fields(answer):
    """An outcome with its result object as (type, its instance dict's items in order)."""
    if answer[0] == "ok" and answer[1] is not NotImplemented:
        return ("ok", type(answer[1]), list(vars(answer[1]).items()))
    return answer


def query_message(fuzzer) -> bool:
    """One query_message input (query_keys' under a fake index service, a truncate_at); True when
    it was compared with the twin. The lock must be free again after both, raised or not."""
    args = make_args(fuzzer.rng)
    service = FakeIndexService(args[0])
    if fuzzer.rng.random() < 0.2:
        service = DecoyIndexService(args[0], make_args(fuzzer.rng)[0])
    truncate_at = fuzzer.rng.choice([args[3], 1, 2**63])
    full = (service,) + args[1:] + (QueryMessageResult, truncate_at)
    fuzzer.last_input = {"target": "query_message", "args": repr(args[1:6] + (truncate_at,))}
    got = _fields(outcome(fuzzer.native.query_message, *full))
    if service.lock._is_owned():
        raise fuzzer.disagreement("query_message: the C left the index lock held")
    if got == ("ok", NotImplemented):
        return False
    want = _fields(outcome(query_message_py, *full))
    if got != want:
        raise fuzzer.disagreement(f"query_message: C {got!r:.2000} twin {want!r:.2000}")
    return True
