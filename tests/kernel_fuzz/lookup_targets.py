"""The fuzz driver's lookup targets (store/kernel/c/lookup.c), kept apart so driver.py stays small.

| target            | input                                                                     | checked against        |
|-------------------|---------------------------------------------------------------------------|------------------------|
| index_select      | a small index file with random slots and entries (cycles, prev out of range, negative times), sometimes cut short; ints at their edges | `index_select_py` |
| cq_search_nearest | random CQ units over a few fake commit-log segments (records cut by the read position, IPv6 born hosts, a destroyed or unmapped segment, a short buffer) and a reader that answers like store.lookups', sometimes with its `full_segments` list (or a malformed one); the C is called twice, the second time with what it remembered | `cq_search_nearest_py` |
| cq_nearest_queue (and cq_nearest_in) | a fake file consume queue of 0-2 files over the same fake segments (unit files cut short or unmapped, read positions at and past the end, min offsets at edges), a reader with or without `segments` | `cq_nearest_queue_py` |
| cq_search_boundary | cq_search_nearest's inputs with plateaus of equal store times, a window, LOWER or UPPER | `cq_search_boundary_py` |
| read_message      | a corpus record with bytes set to edge values, at edge positions and limits | `read_message_py` (decode_message) |

When the C answers NotImplemented ("ask the twin") nothing is compared: the dispatcher runs the twin.
"""

from __future__ import annotations

import struct
import threading

from store.codec.message import MessageRecord as _MessageRecord
from store.codec.message import decode_message as _decode_message
from store.codec.properties import decode_properties as _decode_properties
from store.kernel.lookup import (cq_nearest_queue_py, cq_search_boundary_py, cq_search_nearest_py,
                                 index_select_py, read_message_py)
from store.lookups import segment_store_time_reader

_EDGES = [0, 1, -1, 2, 3, 7, 2**31 - 1, -2**31, 2**62, -2**62, 2**62 + 1, 2**63 - 1, -2**63, 2**64]


def _outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as error:
        return ("raise", type(error).__name__, str(error))


def index_select(fuzzer) -> bool:
    """One index_select input; True when it was compared with the twin."""
    rng = fuzzer.rng
    slots = rng.choice([1, 2, 3, 8, 16])
    max_index = rng.choice([2, 3, 5, 16, 40])
    buf = bytearray(40 + 4 * slots + 20 * max_index)
    index_count = rng.choice([0, 1, 2, max_index - 1, max_index, rng.randrange(max_index + 2)])
    for s in range(slots):
        struct.pack_into(">i", buf, 40 + 4 * s, rng.choice([0, 1, -1, rng.randrange(-2, max_index + 3)]))
    hashes = [rng.randrange(0, 8), rng.randrange(0, 2**31)]
    for e in range(max_index):
        struct.pack_into(">iqii", buf, 40 + 4 * slots + 20 * e, rng.choice(hashes + [-5]),
                         rng.randrange(-2**63, 2**63), rng.choice([0, 1, 5, 1000, -1, 2**31 - 1]),
                         rng.choice([0, e - 1, e, e + 1, rng.randrange(-2, max_index + 3)]))
    if rng.random() < 0.2:
        buf = buf[:rng.randrange(len(buf) + 1)]
    pick = (lambda usual: usual if rng.random() < 0.85 else rng.choice(_EDGES))
    # index_count <= max_index_num, as IndexFile guarantees (its header load refuses more): past it a
    # corrupt cycle would be walked index_count times, by the C and the twin alike.
    max_index = pick(max_index)
    if isinstance(max_index, int) and max_index < 2**62 and rng.random() < 0.1:
        index_count = max_index
    args = (bytes(buf), pick(rng.choice(hashes)), pick(slots), max_index,
            min(index_count, max_index) if max_index < 2**62 else index_count,
            pick(rng.choice([0, 1_700_000_000_000])), pick(rng.choice([1, 2, 32, 64])),
            pick(rng.choice([0, 1_700_000_001_000, 1000])), pick(rng.choice([2**63 - 1, 5000])))
    fuzzer.last_input = {"target": "index_select", "args": repr(args)[:4000]}
    native_result, twin_result = [], []
    got = _outcome(fuzzer.native.index_select, *args, native_result)
    if got == ("ok", NotImplemented):
        return False
    if got[0] == "raise":
        raise fuzzer.disagreement(f"index_select raised {got[1:]}: the C answers or asks")
    want = _outcome(index_select_py, *args, twin_result)
    if want[0] == "raise" or native_result != twin_result:
        raise fuzzer.disagreement(f"index_select: C {native_result} twin {want} {twin_result}")
    return True


def _slow_reader(answer):
    """The live commit log's `store_timestamp_at` for fake segments: `answer()` for a record the
    first time it is asked, the same afterwards (the C and the twin must hear the same)."""
    answers = {}

    def slow(phy_offset, size):
        if phy_offset not in answers:
            answers[phy_offset] = answer()
        return answers[phy_offset]
    return slow


class _Segment:
    """What cq_search_nearest reads of a MappedFile."""

    def __init__(self, buffer, file_from_offset, read_position, destroyed):
        self.buffer = buffer
        self.file_from_offset = file_from_offset
        self.read_position = read_position
        self.destroyed = destroyed


def cq_search_nearest(fuzzer) -> bool:
    """One cq_search_nearest input; True when it was compared with the twin."""
    rng = fuzzer.rng
    segment_bytes = rng.choice([128, 256, 512])
    first_from = rng.choice([0, segment_bytes, 3 * segment_bytes])
    files = []
    for k in range(rng.choice([1, 2, 3, 4])):
        buffer = bytearray(rng.randbytes(segment_bytes))
        for position in range(0, segment_bytes - 80, rng.choice([40, 80, 100])):
            struct.pack_into(">i", buffer, position + 36, rng.choice([0, 0x10, 0x30, -1]))
        read_position = rng.choice([segment_bytes, rng.randrange(segment_bytes + 1), 0])
        if rng.random() < 0.05:
            read_position = segment_bytes + 8            # past the buffer: the reader decides
        files.append(_Segment(bytes(buffer) if rng.random() > 0.05 else None,
                              first_from + k * segment_bytes + rng.choice([0, 0, 0, 4]),
                              read_position, rng.random() < 0.05))
    count = rng.choice([len(files), len(files), max(0, len(files) - 1)])
    slow = _slow_reader(lambda: rng.choice([-1, None, 5, 1000, rng.randrange(2**40)]))

    n = rng.choice([1, 2, 5, 17, 60])
    units = bytearray()
    base_time = rng.choice([0, 1000])
    for i in range(n):
        phy = rng.choice([first_from + rng.randrange(len(files) * segment_bytes + 64),
                          first_from - 1, rng.randrange(-2**63, 2**63)])
        if rng.random() < 0.6 and files[0].buffer is not None:
            phy = first_from + rng.randrange(0, min(segment_bytes, 200))
        units += struct.pack(">qiq", phy, rng.randrange(0, 300), 0)
        base_time += rng.choice([0, 1, 7])
    if rng.random() < 0.1:
        units = units[:rng.randrange(len(units) + 1)]
    pick = (lambda usual: usual if rng.random() < 0.9 else rng.choice(_EDGES))
    # The reader and the C see the same segments (store.lookups builds both from one snapshot).
    first_from, segment_bytes, count = pick(first_from), pick(segment_bytes), pick(count)
    reader = segment_store_time_reader(files, first_from, segment_bytes, count, slow)
    _full_segments(rng, reader, len(files))
    args = (bytes(units), pick(rng.choice([0, 1])), pick(rng.choice([n - 1, n, n + 3])),
            pick(rng.randrange(-2**63, 2**63) if rng.random() < 0.5 else rng.randrange(0, 2**40)),
            pick(rng.choice([0, first_from, -2**63])), files, first_from, segment_bytes, count)
    fuzzer.last_input = {"target": "cq_search_nearest", "args": repr(args[:5] + args[6:])[:4000]}
    got = _outcome(fuzzer.native.cq_search_nearest, *args, reader)
    if got == ("ok", NotImplemented):
        return False
    want = _outcome(cq_search_nearest_py, *args, reader)
    again = _outcome(fuzzer.native.cq_search_nearest, *args, reader)   # with what it remembered
    if got != want or again != want:
        raise fuzzer.disagreement(f"cq_search_nearest: C {got} then {again} twin {want}")
    return True


def cq_search_boundary(fuzzer) -> bool:
    """One cq_search_boundary input (cq_search_nearest's kind, with plateaus of equal times, a window,
    LOWER or UPPER); True when it was compared with the twin."""
    rng = fuzzer.rng
    segment_bytes = rng.choice([128, 256])
    first_from = rng.choice([0, segment_bytes])
    files = []
    for k in range(rng.choice([1, 2, 3])):
        buffer = bytearray(segment_bytes)
        for position in range(0, segment_bytes - 80, 40):
            struct.pack_into(">i", buffer, position + 36, rng.choice([0, 0, 0x10]))
            struct.pack_into(">q", buffer, position + 56,
                             rng.choice([5, 5, 7, 9, -1]) + position // 80)
        files.append(_Segment(bytes(buffer), first_from + k * segment_bytes,
                              rng.choice([segment_bytes, rng.randrange(segment_bytes + 1)]),
                              rng.random() < 0.05))
    span = len(files) * segment_bytes
    n = rng.choice([1, 2, 5, 17, 40])
    units = b"".join(struct.pack(">qiq", rng.choice([first_from + 40 * rng.randrange(span // 40),
                                                     first_from + rng.randrange(span),
                                                     rng.randrange(-2**63, 2**63)]),
                                 rng.randrange(0, 300), 0) for _ in range(n))
    if rng.random() < 0.1:
        units = units[:rng.randrange(len(units) + 1)]
    slow = _slow_reader(lambda: rng.choice([-1, None, 6, 7]))

    pick = (lambda usual: usual if rng.random() < 0.9 else rng.choice(_EDGES))
    # The reader and the C see the same segments (store.lookups builds both from one snapshot).
    first_from, segment_bytes, count = pick(first_from), pick(segment_bytes), pick(len(files))
    reader = segment_store_time_reader(files, first_from, segment_bytes, count, slow)
    _full_segments(rng, reader, len(files))
    floor = rng.choice([0, 0, rng.randrange(n)])
    ceiling = rng.choice([n - 1, rng.randrange(floor, n), n])
    args = (units, pick(floor), pick(ceiling),
            pick(rng.choice([5, 6, 7, 9, 12, rng.randrange(-3, 20)])),
            pick(rng.choice([0, first_from, -2**63])), files, first_from, segment_bytes, count,
            reader, rng.random() < 0.5, pick(rng.choice([0, 300_000])), pick(rng.choice([0, 7])))
    fuzzer.last_input = {"target": "cq_search_boundary",
                         "args": repr(args[:5] + args[6:9] + args[10:])[:4000]}
    got = _outcome(fuzzer.native.cq_search_boundary, *args)
    if got == ("ok", NotImplemented):
        return False
    want = _outcome(cq_search_boundary_py, *args)
    again = _outcome(fuzzer.native.cq_search_boundary, *args)
    if got != want or again != want:
        raise fuzzer.disagreement(f"cq_search_boundary: C {got} then {again} twin {want}")
    return True


def _full_segments(rng, reader, count: int) -> None:
    """Sometimes give the reader the list the C remembers full segments in (store.lookups does on a
    writable store), now and then too short or holding what the C never stores."""
    roll = rng.random()
    if roll < 0.5:
        reader.full_segments = [None] * count
    elif roll < 0.6:
        reader.full_segments = [rng.choice([None, (0, b""), (2**63, None), ("x", 1), (5,)])
                                for _ in range(rng.choice([0, count, count + 1]))]
    elif roll < 0.65:
        reader.full_segments = "not a list"


class _Listing:
    def __init__(self, files):
        self.files = files


class _Queue:
    """What cq_nearest_queue reads of a FileConsumeQueue."""

    def __init__(self, files, min_logic_offset, commit_log_min_offset):
        self.mapped_files = _Listing(files)
        self.min_logic_offset = min_logic_offset
        self.commit_log_min_offset = commit_log_min_offset


def cq_nearest_queue(fuzzer) -> bool:
    """One cq_nearest_queue input; True when it was compared with the twin."""
    rng = fuzzer.rng
    segment_bytes = rng.choice([128, 256])
    first_from = rng.choice([0, segment_bytes])
    segments = []
    for k in range(rng.choice([1, 2, 3])):
        buffer = bytearray(rng.randbytes(segment_bytes))
        for position in range(0, segment_bytes - 80, rng.choice([40, 80])):
            struct.pack_into(">i", buffer, position + 36, rng.choice([0, 0x10, -1]))
        segments.append(_Segment(bytes(buffer), first_from + k * segment_bytes,
                                 rng.choice([segment_bytes, rng.randrange(segment_bytes + 1)]),
                                 rng.random() < 0.05))
    slow = _slow_reader(lambda: rng.choice([-1, None, 7, rng.randrange(2**40)]))

    reader = segment_store_time_reader(segments, first_from, segment_bytes, len(segments), slow)
    reader.segments = (segments, first_from, segment_bytes, len(segments))   # as store.lookups
    _full_segments(rng, reader, len(segments))
    if rng.random() < 0.1:
        reader = (lambda phy_offset, size: 5)             # no `segments`: the caller's Python path
    pick = (lambda usual: usual if rng.random() < 0.9 else rng.choice(_EDGES))
    files = []
    for k in range(rng.choice([0, 1, 1, 1, 2])):
        n = rng.choice([0, 1, 3, 17, 40])
        units = b"".join(struct.pack(">qiq", rng.choice([first_from + rng.randrange(segment_bytes * len(segments)),
                                                         rng.randrange(-2**63, 2**63)]),
                                     rng.randrange(0, 300), 0) for _ in range(n))
        if rng.random() < 0.1:
            units = units[:rng.randrange(len(units) + 1)]
        read_position = pick(rng.choice([20 * n, 20 * rng.randrange(n + 1), 20 * n + 20, 0]))
        files.append(_Segment(units if rng.random() > 0.05 else None,
                              pick(rng.choice([0, 20 * 40, 6_000_000])), read_position, False))
    base = files[0].file_from_offset if files and isinstance(files[0].file_from_offset, int) else 0
    queue = _Queue(files, pick(base + 20 * rng.choice([0, 0, 1, 5, 60])),
                   pick(rng.choice([0, 0, first_from + rng.randrange(segment_bytes)])))
    timestamp_ms = pick(rng.choice([rng.randrange(-5, 2**40), rng.randrange(-2**63, 2**63)]))
    fuzzer.last_input = {"target": "cq_nearest_queue",
                         "args": repr((len(files), [(f.file_from_offset, f.read_position)
                                                    for f in files], queue.min_logic_offset,
                                       queue.commit_log_min_offset, timestamp_ms))[:4000]}
    got = _outcome(fuzzer.native.cq_nearest_queue, queue, timestamp_ms, reader)
    if got == ("ok", NotImplemented):
        return False
    want = _outcome(cq_nearest_queue_py, queue, timestamp_ms, reader)
    again = _outcome(fuzzer.native.cq_nearest_queue, queue, timestamp_ms, reader)
    if got != want or again != want:
        raise fuzzer.disagreement(f"cq_nearest_queue: C {got} then {again} twin {want}")
    # the same through the store's entry point: its table, lock and Python fallback
    lock = threading.RLock()
    table = {("T", 1): queue}
    keyed = _outcome(fuzzer.native.cq_nearest_in, table, lock, _never, "T", 1, timestamp_ms, reader)
    missing = _outcome(fuzzer.native.cq_nearest_in, table, lock, _never, "T", 2, timestamp_ms, reader)
    if keyed != want or missing != ("ok", 0) or lock._is_owned():
        raise fuzzer.disagreement(f"cq_nearest_in: {keyed} {missing} twin {want}")
    return True


def _never(queue, timestamp_ms, reader):
    raise AssertionError("cq_nearest_in asked the fallback where cq_nearest_queue answered")


def read_message(fuzzer) -> bool:
    """One read_message input (a corpus record, mutated, at an edge position and limit); True when
    it was compared with the twin."""
    rng = fuzzer.rng
    record = bytearray(rng.choice(fuzzer.records))
    for _ in range(rng.choice([0, 1, 1, 2, 4])):
        at = rng.randrange(len(record))
        record[at] = rng.choice([0, 0xFF, 0x80, 0x7F, 1, 2, 0xC3, record[at] ^ (1 << rng.randrange(8))])
    head = rng.randbytes(rng.choice([0, 0, 5]))
    buffer = bytes(head + record + rng.randbytes(rng.choice([0, 0, 7])))
    position = len(head) if rng.random() < 0.8 else rng.choice([0, 1, -1, len(buffer) - 8, 2**62])
    limit = rng.choice([len(buffer), len(buffer), len(buffer) - 1, position + 40, len(buffer) + 3,
                        -1, 0, 2**63 - 1, 2**64])
    fuzzer.last_input = {"target": "read_message", "buffer": buffer.hex(), "position": position,
                         "limit": limit}
    args = (buffer, position, limit, _MessageRecord, _decode_properties, _decode_message)
    got = _outcome(fuzzer.native.read_message, *args)
    if got == ("ok", NotImplemented):
        return False
    want = _outcome(read_message_py, *args)
    if got != want:
        raise fuzzer.disagreement(f"read_message: C {got} twin {want}")
    return True
