"""The fuzz driver's `fixed_columns` target (store/kernel/c/fixed.c) against its twin
(store.kernel.fixed._fixed_columns_py), also run unsanitized by tests/test_kernel_fixed.py.

Input: scan rows of int64 edges and noise (sometimes none, sometimes not whole rows or unaligned),
codes of every kind and some unknown, a base at the int64 edges or past them, an output of the exact
size, a few bytes short or long, unaligned, or read-only. Every input is compared with the twin: the
same refusal, or the same bytes written and the same count.
"""

from __future__ import annotations

import numpy as np

from store.kernel import SCAN_FIELDS
from store.kernel.fixed import FX_BASED, FX_INT32, FX_MAGIC, _fixed_columns_py, block_bytes, width
from tests.kernel_fuzz.edges import INT64_EDGES


def fixed_columns(fuzzer, outcome, disagreement) -> None:
    rng = fuzzer.rng
    n = rng.choice([0, 1, 2, 5, rng.randrange(0, 200)])
    values = [rng.choice(INT64_EDGES + [0, 1, 2, 3]) if rng.random() < 0.4 else rng.randrange(-2**63, 2**63)
              for _ in range(n * SCAN_FIELDS + 2)]
    storage = np.array(values, dtype=np.int64)
    rows = storage[:n * SCAN_FIELDS]
    shape = rng.random()
    if shape < 0.05:
        rows = storage[1:n * SCAN_FIELDS + 1].view(np.uint8)[3:3 + n * SCAN_FIELDS * 8]   # unaligned
    elif shape < 0.1:
        rows = storage[:n * SCAN_FIELDS + 1]                                               # not whole rows
    codes = bytes(rng.randrange(256) if rng.random() < 0.02 else
                  rng.choice([rng.randrange(SCAN_FIELDS), rng.randrange(SCAN_FIELDS) | FX_INT32, FX_MAGIC, FX_BASED])
                  for _ in range(rng.randrange(0, 16)))
    base = rng.choice(INT64_EDGES + [0, 1 << 30, 2**63, -2**63 - 1, rng.randrange(-2**63, 2**63)])
    need = sum(block_bytes(code, n) for code in codes if width(code))
    size = max(0, need + rng.choice([0, 0, 0, -1, -8, 5, 8]))
    offset = 1 if rng.random() < 0.05 else 0
    readonly = rng.random() < 0.03
    outs = []
    for _ in range(2):       # numpy's storage is 16-byte aligned: both outputs alike
        array = np.full(size + 16, 0x5A, np.uint8)[offset:offset + size]
        array.flags.writeable = not readonly
        outs.append(array)
    fuzzer.last_input = {"target": "fixed_columns", "n": n, "codes": codes.hex(), "base": base, "size": size,
                         "offset": offset, "shape": shape, "rows": storage.tolist()[:2000]}
    got_c = outcome(fuzzer.native.fixed_columns, rows, base, codes, outs[0])
    fuzzer.executions["fixed_columns"] += 1
    if not fuzzer._compare():
        return
    got_py = outcome(_fixed_columns_py, rows, base, codes, outs[1])
    fuzzer.compared["fixed_columns"] += 1
    if (got_c != got_py or (got_c[0] == "ok" and outs[0].tobytes() != outs[1].tobytes())):
        raise disagreement(f"fixed_columns: C {got_c} != twin {got_py}")
