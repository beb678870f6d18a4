"""The fuzz driver's `pull_window` target (store/kernel/c/pull_window.c) against its twin
(store/kernel/pull_window.py's `pull_window_twin`, ending in the same sanitized `pull_unfiltered`),
also run unsanitized by tests/test_kernel_pull_window.py.

Input: one to three commit-log segments (corpus seeds, some mutated, at a base near 0 or near the
int64 edge; readable ends, write buffers and `destroyed` at edge values), consume-queue segments
holding units that point at the seeds' records (sometimes at forged positions and sizes), and the
pull's queue offset, min logic offset, trusted_from, limits, form and topic at edge values. Every
execution compares the two outcomes (answers, None, or the exception raised).
"""

from __future__ import annotations

import struct
from types import SimpleNamespace

from store.codec import msgid
from store.codec.message import MessageRecord, decode_message
from store.codec.properties import decode_properties
from store.kernel.pull_window import pull_window_twin
from tests.kernel_fuzz.edges import INT64_EDGES, OUT_OF_RANGE

DECODERS = (MessageRecord, decode_message, decode_properties, msgid.host_to_string)
UNIT = struct.Struct(">qiq")
LIMIT_EDGES = [0, 1, 2, 8, 32, 64, 1000, 65536, 262144, 2**62]


def _segment(rng, data: bytes, start: int, size: int, readable: int):
    buffered = rng.random() < 0.2
    position = readable if rng.random() < 0.9 else rng.choice([0, -1, size, size + 1, 2**63] +
                                                                INT64_EDGES)
    return SimpleNamespace(
        file_from_offset=start, file_size_bytes=size if rng.random() < 0.95 else rng.choice(
            [0, 1, size - 1, size + 20, 2**63 - 1]),
        write_buffer=object() if buffered else None,
        committed_position=position if buffered else rng.choice([0, size]),
        wrote_position=rng.choice([0, size]) if buffered else position,
        destroyed=rng.random() < 0.03, _map=data)


def make_args(rng, seeds, starts, mutate) -> tuple:
    """One call's 17 arguments."""
    count = rng.choice([1, 1, 2, 3])
    size = max(len(s) for s in seeds) + rng.choice([0, 0, 7, 4096])
    base = rng.choice([0, 0, size * rng.randrange(1, 5), 2**63 - size * 4 - 1])
    cl_files, units = [], []
    for k in range(count):
        index = rng.randrange(len(seeds))
        data = mutate(index) if rng.random() < 0.3 else seeds[index]
        start = base + k * size
        cl_files.append(_segment(rng, data + bytes(size - len(data)) if len(data) < size else data,
                                 start, size, len(data) if rng.random() < 0.9 else
                                 rng.randrange(len(data) + 1)))
        positions = starts[index] + [len(seeds[index])]
        for at, stop in zip(positions, positions[1:]):
            phy, length = start + at, stop - at
            if rng.random() < 0.05:
                phy = rng.choice([phy + 1, phy - 1, base - 1, 2**63 - 1, start + size])
            if rng.random() < 0.05:
                length = rng.choice([0, -1, 1, length + 1, 0x7FFFFFFF])
            units.append(UNIT.pack(phy, length, 0))
    units = units[:rng.choice([1, 5, 40, 200])] or [UNIT.pack(base, 100, 0)]
    per_file = rng.choice([1, 3, 50, 100])
    cq_size = per_file * UNIT.size
    cq_files = []
    first_index = rng.choice([0, 0, 1, 7])
    for k in range(0, len(units), per_file):
        chunk = b"".join(units[k:k + per_file])
        cq_files.append(_segment(rng, chunk + bytes(cq_size - len(chunk)),
                                 (first_index + k // per_file) * cq_size, cq_size, len(chunk)))
    if rng.random() < 0.03:
        cq_files = rng.choice([[], (), None])
    total = first_index * per_file + len(units)
    common = rng.random() < 0.7      # mostly a pull the C answers, else edges everywhere
    queue_offset = rng.randrange(first_index * per_file, total) if common else rng.choice(
        [first_index * per_file, total, total - 1, -1, 2**62] + INT64_EDGES + OUT_OF_RANGE[:1])
    min_logic = first_index * cq_size if common else rng.choice(
        [0, queue_offset * UNIT.size, queue_offset * UNIT.size + 1, -1, 2**63])
    trusted_from = 0 if common else rng.choice([2**62, queue_offset, queue_offset + 1])
    form = rng.choice([0, 1, 2] if common else [3, -1, True, 2**64])
    return (cq_files, cq_size if rng.random() < 0.95 else rng.choice([0, -20, 2**63]),
            min_logic, trusted_from, queue_offset, rng.choice([0, 1, -1, 2**31]),
            rng.choice([b"TopicTest", b"", None, b"x" * 200]), cl_files,
            size if rng.random() < 0.95 else rng.choice([0, 1, 2**63 - 1]),
            rng.choice([1, 2, 31, 32, 63] if common else [64, 0, -1]),
            *([1 << 30, 64, 1 << 30, 64, 1 << 40] if common and rng.random() < 0.7 else
              [rng.choice(LIMIT_EDGES) for _ in range(5)]), form,
            DECODERS if rng.random() < 0.97 else (1, 2))


def comparable(result):
    """An outcome with memoryviews as bytes and decoded records as their repr."""
    if result[0] != "ok" or result[1] is None:
        return result
    answer = list(result[1])
    answer[4] = [bytes(r) if isinstance(r, memoryview) else r if isinstance(r, bytes) else repr(r)
                 for r in answer[4]]
    return ("ok", tuple(answer))


def check(native, args, outcome) -> tuple[str | None, bool]:
    """(disagreement or None, whether the C answered) for one call."""
    got = comparable(outcome(native.pull_window, *args))
    twin = comparable(outcome(lambda *a: pull_window_twin(*a, unfiltered=native.pull_unfiltered),
                              *args))
    if got != twin:
        return f"C {got!r:.300} != twin {twin!r:.300}", got[0] == "ok" and got[1] is not None
    return None, got[0] == "ok" and got[1] is not None


def pull_window(fuzzer, outcome, disagreement) -> None:
    """The driver's step for this target (every execution is compared)."""
    args = make_args(fuzzer.rng, fuzzer.seeds, [s or [0] for s in fuzzer.starts], fuzzer.mutate)
    problem, _ = check(fuzzer.native, args, outcome)
    for counts in (fuzzer.executions, fuzzer.compared):
        counts["pull_window"] = counts.get("pull_window", 0) + 1
    fuzzer.last_input = {"target": "pull_window", "rest": repr(args[1:7] + args[8:16])}
    if problem is not None:
        raise disagreement(f"pull_window: {problem}")
