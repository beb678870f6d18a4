"""The fuzz driver's `decode_columns` target (store/kernel/c/columns.c), kept beside driver.py.

Input: the rows `scan` found in a mutated corpus buffer (records with flipped text, separators,
hosts), sometimes with a position or length forged to an edge value, a random `want`, and outputs
allocated exactly to the size asked (numpy arrays: ASan's red zones right after them), sometimes one
byte short. Checked against `store.kernel.columns._decode_columns_py`: the same filled bytes, used
counts and flags, or the same refusal (exception type and message).
"""

from __future__ import annotations

import numpy as np

from store import kernel
from store.kernel import columns
from tests.kernel_fuzz.edges import POSITION_EDGES

_FIELDS = ["pos", "body_pos", "body_len", "topic_pos", "topic_len", "props_pos", "props_len",
           "tags_pos", "tags_len", "keys_pos", "keys_len", "uniq_pos", "uniq_len", "sys_flag"]


def _filled(result) -> tuple:
    """The meaningful bytes of a decode_columns answer (buffers may be larger than what is used)."""
    offsets, data, names_off, values_off, reconsume, tags, used, flags = result
    entries = used[columns.N_DATA]
    return (bytes(offsets), tuple(bytes(d)[:u] for d, u in zip(data, used)),
            bytes(names_off)[:4 * (entries + 1)] if len(names_off) else b"",
            bytes(values_off)[:4 * (entries + 1)] if len(values_off) else b"",
            bytes(reconsume), bytes(tags), used, flags)


def decode_columns(fuzzer, buf: bytes, rows: np.ndarray, outcome, disagreement) -> None:
    """One execution on the rows `scan` found in `buf` (`fuzzer`: the driver's Fuzzer)."""
    rng = fuzzer.rng
    if rng.random() < 0.3:                                     # a forged row
        rows[rng.randrange(len(rows)), kernel.COL[rng.choice(_FIELDS)]] = rng.choice(
            POSITION_EDGES + [len(buf), len(buf) + 1, len(buf) - 1, 15, 16, 0x30])
    want = rng.choice([columns.WANT_ALL, rng.randrange(columns.WANT_ALL + 1), 1 << rng.randrange(12),
                       rng.choice([-1, columns.WANT_ALL + 1, 0])])
    short = rng.random() < 0.05

    def alloc(size):
        return np.empty(max(0, size - 1) if short and size else size, dtype=np.uint8)

    fuzzer.last_input = {"target": "decode_columns", "buf": buf.hex(), "rows": rows.tolist(), "want": want,
                         "short": short}
    got_c = outcome(lambda: _filled(fuzzer.native.decode_columns(buf, rows, want, alloc)))
    fuzzer.executions["decode_columns"] += 1
    if fuzzer._compare():
        fuzzer.compared["decode_columns"] += 1
        got_py = outcome(lambda: _filled(columns._decode_columns_py(buf, rows, want, alloc)))
        if got_c != got_py:
            raise disagreement(f"decode_columns: C {str(got_c)[:300]} != Python {str(got_py)[:300]}")


def walk_headers(fuzzer, buf: bytes, outcome, disagreement) -> None:
    """The mutated buffer walked from an ordinary or edge start, to an edge stop, into a small out."""
    rng = fuzzer.rng
    start = rng.choice([0, 0, rng.randrange(len(buf) + 16)] + POSITION_EDGES[:8])
    stop = rng.choice([len(buf), len(buf) + 1, rng.randrange(len(buf) + 16)] + POSITION_EDGES[:8])
    capacity = rng.choice([0, 1, 2, 64])
    fuzzer.last_input = {"target": "walk_headers", "buf": buf.hex(), "start": start, "stop": stop,
                         "capacity": capacity}
    out_c = np.full(capacity, -7, np.int64)
    got_c = outcome(fuzzer.native.walk_headers, buf, start, stop, out_c)
    fuzzer.executions["walk_headers"] += 1
    if fuzzer._compare():
        fuzzer.compared["walk_headers"] += 1
        out_py = np.full(capacity, -7, np.int64)
        got_py = outcome(columns._walk_headers_py, buf, start, stop, out_py)
        if got_c != got_py or not np.array_equal(out_c, out_py):
            raise disagreement(f"walk_headers: C {got_c} != Python {got_py}")


def view_columns(fuzzer, buf: bytes, rows: np.ndarray, outcome, disagreement) -> None:
    """`view_columns` (store/kernel/c/views.c) on the rows `scan` found, sometimes forged, a random
    `want` (sometimes one with bits of no view column) and an `out` of exactly the size (a numpy
    array: ASan's red zone right after it), sometimes 16 bytes short; against
    `store.kernel.views._view_columns_py`: the same views and flags, or the same refusal."""
    from store.kernel import views

    rng = fuzzer.rng
    if rng.random() < 0.3:
        rows[rng.randrange(len(rows)), kernel.COL[rng.choice(_FIELDS)]] = rng.choice(
            POSITION_EDGES + [len(buf), len(buf) + 1, len(buf) - 1, -1, 12, 13])
    every = sum(views.VIEW_WANT.values())
    want = rng.choice([every, every, rng.randrange(every + 1) & every, rng.choice(list(views.VIEW_WANT.values())),
                       rng.choice([-1, 1, 1 << 9, every | 4])])
    size = 16 * len(rows) * bin(want & every).count("1")
    if rng.random() < 0.05 and size:
        size -= 16
    fuzzer.last_input = {"target": "view_columns", "buf": buf.hex(), "rows": rows.tolist(), "want": want,
                         "size": size}

    def run(function):
        out = np.full(size, 0xA5, np.uint8)
        return function(buf, rows, want, out), bytes(out)

    got_c = outcome(lambda: run(fuzzer.native.view_columns))
    fuzzer.executions["view_columns"] += 1
    if fuzzer._compare():
        fuzzer.compared["view_columns"] += 1
        got_py = outcome(lambda: run(views._view_columns_py))
        if got_c != got_py:
            raise disagreement(f"view_columns: C {str(got_c)[:300]} != Python {str(got_py)[:300]}")
