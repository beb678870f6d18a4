"""The fuzz driver's `span_groups` target (store/kernel/c/groups.c) against its twin
(store.kernel.scan_groups._packed_groups), also run unsanitized by tests/test_kernel_groups.py.

Input: a buffer of noise, zeros or corpus records (sometimes empty), and spans over it: positions and
lengths inside it, with equal and NUL-padded spans made common, and now and then one at an edge
value (negative, past the end, near 2^63: the C must refuse those with -3 and touch nothing), tags at
int64 edges or absent. In-bounds inputs are compared with the twin: the same first rows and the same
numbering of every row.
"""

from __future__ import annotations

import numpy as np

from store.kernel.scan_groups import _packed_groups
from tests.kernel_fuzz.edges import INT64_EDGES

TAG_EDGES = INT64_EDGES + [3, 5]


def span_groups(fuzzer, disagreement) -> None:
    rng = fuzzer.rng
    kind = rng.randrange(3)
    size = rng.randrange(0, 600)
    if kind == 0:
        buf = bytes(rng.choice(b"\x00\x00ab\xff") for _ in range(size))
    elif kind == 1:
        buf = bytes(size)
    else:
        buf = (rng.choice(fuzzer.records) if fuzzer.records else b"")[:size]
    rows = rng.randrange(0, 300)
    positions, lengths = [], []
    forge_at = rng.randrange(rows) if rows and rng.random() < 0.15 else -1
    for row in range(rows):
        if row == forge_at:
            positions.append(rng.choice(INT64_EDGES + [len(buf), len(buf) + 1, -1]))
            lengths.append(rng.choice(INT64_EDGES + [1, len(buf) + 1]))
            continue
        position = rng.randrange(len(buf) + 1)
        positions.append(position)
        lengths.append(rng.randrange(min(rng.choice([3, 8, 40]), len(buf) - position) + 1))
    positions_a = np.array(positions, dtype=np.int64)
    lengths_a = np.array(lengths, dtype=np.int64)
    tags = np.array([rng.choice(TAG_EDGES) for _ in range(rows)], dtype=np.int64) \
        if rng.random() < 0.5 else None
    fuzzer.last_input = {"target": "span_groups", "buf": buf.hex()[:20000], "positions": positions,
                         "lengths": lengths, "tags": None if tags is None else tags.tolist()}
    inverse = np.full(rows, -7, dtype=np.int64)
    first = np.full(rows, -7, dtype=np.int64)
    count = fuzzer.native.span_groups(buf, positions_a, lengths_a,
                                      b"" if tags is None else tags, inverse, first)
    fuzzer.executions["span_groups"] += 1
    outside = any(p < 0 or n < 0 or p > len(buf) or n > len(buf) - p
                  for p, n in zip(positions, lengths))
    if outside:
        if count != -3:
            raise disagreement(f"span_groups: a span outside the buffer gave {count}, not -3")
        return
    if rows == 0:
        if count != 0:
            raise disagreement(f"span_groups: no rows gave {count}")
        return
    want_first, want_inverse = _packed_groups(buf, positions_a, lengths_a, tags)
    fuzzer.compared["span_groups"] += 1
    if first[:count].tolist() != want_first.tolist() or inverse.tolist() != want_inverse.tolist():
        raise disagreement(f"span_groups: C first {first[:count].tolist()[:20]} inverse "
                           f"{inverse.tolist()[:20]} != twin {want_first.tolist()[:20]} "
                           f"{want_inverse.tolist()[:20]}")
