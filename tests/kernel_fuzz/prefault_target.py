"""The fuzz driver's `prefault` and `sync_range` targets (store/kernel/c/prefault.c) against their
twins (store/kernel/prefault.py), also run unsanitized by tests/test_kernel_prefault.py.

Input: a map of a random size (anonymous, or of a temporary file: writable, copy-on-write,
read-only, or closed), a start and a length from the int64 edges, out-of-range ints, page
multiples and one either side, the map's size and random values, or an argument of the wrong type
or count. Each execution runs the C and the twin on the same map and compares the outcomes and the
map's bytes (unchanged: a prefault only populates pages).
"""

from __future__ import annotations

import mmap
import tempfile

from store.kernel.prefault import prefault_py, sync_range_py
from tests.kernel_fuzz.edges import INT64_EDGES, OUT_OF_RANGE

PAGE = mmap.PAGESIZE


def _map(rng):
    size = rng.choice([1, PAGE - 1, PAGE, PAGE + 1, 3 * PAGE, 16 * PAGE + 5,
                       rng.randrange(1, 40 * PAGE)])
    kind = rng.choice(["anonymous", "write", "copy", "read", "closed"])
    if kind == "anonymous":
        return mmap.mmap(-1, size), None
    handle = tempfile.TemporaryFile()
    handle.truncate(size)
    access = {"write": mmap.ACCESS_WRITE, "copy": mmap.ACCESS_COPY, "read": mmap.ACCESS_READ,
              "closed": mmap.ACCESS_WRITE}[kind]
    mapped = mmap.mmap(handle.fileno(), size, access=access)
    if kind == "closed":
        mapped.close()
    return mapped, handle


def _number(rng, size):
    pick = rng.random()
    if pick < 0.3:
        return rng.choice(INT64_EDGES + OUT_OF_RANGE)
    if pick < 0.7:
        return max(0, rng.randrange(0, 3) * PAGE * rng.randrange(0, 20) + rng.choice([-1, 0, 0, 1]))
    if pick < 0.85:
        return size + rng.choice([-PAGE, -1, 0, 1, PAGE])
    if pick < 0.95:
        return rng.randrange(0, 2 * size + 2)
    return rng.choice([1.5, "1", None, b"x"])


def prefault(fuzzer, outcome, disagreement) -> None:
    """One execution: the sanitized prefault against prefault_py (always compared)."""
    rng = fuzzer.rng
    mapped, handle = _map(rng)
    try:
        size = len(mapped) if not mapped.closed else 0
        args = [mapped if rng.random() < 0.95 else bytearray(8), _number(rng, size),
                _number(rng, size)]
        if rng.random() < 0.03:
            args = args[:rng.randrange(3)]
        fuzzer.last_input = {"target": "prefault", "size": size, "closed": mapped.closed,
                             "args": [repr(a) if not isinstance(a, mmap.mmap) else "map"
                                      for a in args]}
        before = bytes(mapped) if not mapped.closed else None
        got = outcome(fuzzer.native.prefault, *args)
        middle = bytes(mapped) if not mapped.closed else None
        want = outcome(prefault_py, *args)
        fuzzer.executions["prefault"] += 1
        fuzzer.compared["prefault"] += 1
        if got != want:
            raise disagreement(f"prefault: C {got} != twin {want}")
        if before != middle:
            raise disagreement("prefault: the map's bytes changed")
    finally:
        if not mapped.closed:
            mapped.close()
        if handle is not None:
            handle.close()


def sync_range(fuzzer, outcome, disagreement) -> None:
    """One execution: the sanitized sync_range against sync_range_py (always compared), on the
    same kinds of maps with bytes written first; a shared map's bytes must read back unchanged."""
    rng = fuzzer.rng
    mapped, handle = _map(rng)
    # drop (MADV_DONTNEED first) is for shared maps only: on a copy-on-write one it discards the
    # private changes (the caller says so; MappedFile's maps are shared), so the bytes are then
    # not compared.
    shared = handle is None or "ACCESS_COPY" not in repr(mapped)
    drop = rng.random() < 0.8 if shared else rng.random() < 0.2
    try:
        size = len(mapped) if not mapped.closed else 0
        if size and not mapped.closed and rng.random() < 0.8:
            try:
                mapped[:size] = bytes(rng.randrange(256) for _ in range(min(size, 64))) * \
                    (size // 64) + bytes(size % 64)
            except TypeError:       # a read-only map
                pass
        args = [mapped if rng.random() < 0.95 else bytearray(8), _number(rng, size),
                _number(rng, size), drop if rng.random() < 0.97 else rng.choice([0, 1, None, "x"])]
        if rng.random() < 0.03:
            args = args[:rng.randrange(4)]
        fuzzer.last_input = {"target": "sync_range", "size": size, "closed": mapped.closed,
                             "args": [repr(a) if not isinstance(a, mmap.mmap) else "map"
                                      for a in args]}
        before = bytes(mapped) if not mapped.closed else None
        got = outcome(fuzzer.native.sync_range, *args)
        middle = bytes(mapped) if not mapped.closed else None
        want = outcome(sync_range_py, *args)
        after = bytes(mapped) if not mapped.closed else None
        fuzzer.executions["sync_range"] += 1
        fuzzer.compared["sync_range"] += 1
        if got != want:
            raise disagreement(f"sync_range: C {got} != twin {want}")
        if shared and (before != middle or middle != after):
            raise disagreement("sync_range: the map's bytes changed")
    finally:
        if not mapped.closed:
            mapped.close()
        if handle is not None:
            handle.close()
