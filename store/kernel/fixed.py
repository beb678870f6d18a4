"""`fixed_columns`: the pipeline's fixed-width commit-log columns of many scan rows in one pass (C: c/fixed.c).

`store.pipeline.commitlog_decoder` hands it the `scan` rows of a batch, the file's first offset and
one code per column; every column comes back in its own block of one output buffer (blocks padded to
8 bytes), which the decoder wraps as Arrow arrays without a copy. A code is a scan-row field (int64),
the field | FX_INT32 (its low 32 bits, as numpy's astype(np.int32)), FX_MAGIC (the record's magic
from its version) or FX_BASED (`pos` + base, int64, wrapping). `_fixed_columns_py` is the twin: the
same outputs and the same refusals, in numpy (tests/test_kernel_fixed.py compares them;
tests/kernel_fuzz/fixed_target.py fuzzes the C).
"""

from __future__ import annotations

import numpy as np

from store.kernel import COL, COMPILED, SCAN_FIELDS, _native, _refuse_overflow
from store.kernel.columns import _aligned, _flat

FX_INT32, FX_MAGIC, FX_BASED = 0x40, 0x80, 0x81
MAGIC_V1, MAGIC_V2 = -626843481, -626843477


def width(code: int) -> int:
    """Bytes per row of a code's column (0: not a code)."""
    if code == FX_MAGIC:
        return 4
    if code == FX_BASED:
        return 8
    if code & 0x80:
        return 0
    return (4 if code & FX_INT32 else 8) if (code & 0x3F) < SCAN_FIELDS else 0


def block_bytes(code: int, n: int) -> int:
    """The bytes a column of n rows takes in `out` (padded to 8)."""
    return (width(code) * n + 7) & ~7


def _fixed_columns_py(rows, base, codes, out):
    _refuse_overflow((base, "L"))
    rows_view = _flat(rows)
    codes_view = bytes(_flat(codes))
    out_view = _flat(out)
    if out_view.readonly:          # the C parser's w* refusal
        kind = type(out)
        name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        raise TypeError(f"fixed_columns() argument 4 must be read-write bytes-like object, not {name}")
    if rows_view.nbytes % (SCAN_FIELDS * 8) or (rows_view.nbytes and not _aligned(rows)):
        raise ValueError("rows must be an aligned whole number of scan rows")
    n = rows_view.nbytes // (SCAN_FIELDS * 8)
    if any(width(code) == 0 for code in codes_view):
        raise ValueError("codes holds an unknown column code")
    need = sum(block_bytes(code, n) for code in codes_view)
    if out_view.nbytes < need or (need and not _aligned(out)):
        raise ValueError("out must be an aligned buffer of the columns' size")
    table = np.frombuffer(rows_view, dtype=np.int64).reshape(-1, SCAN_FIELDS) if n else np.zeros((0, SCAN_FIELDS), np.int64)
    target = np.frombuffer(out_view, dtype=np.uint8) if out_view.nbytes else np.zeros(0, np.uint8)
    at = 0
    for code in codes_view:
        if code == FX_MAGIC:
            values = np.where(table[:, COL["version"]] == 2, MAGIC_V2, MAGIC_V1).astype(np.int32)
        elif code == FX_BASED:
            values = (table[:, COL["pos"]].astype(np.uint64) + np.uint64(base & (2**64 - 1))).view(np.int64)
        elif code & FX_INT32:
            values = table[:, code & 0x3F].astype(np.int32)
        else:
            values = table[:, code].copy()
        block = block_bytes(code, n)
        raw = values.tobytes()
        target[at:at + len(raw)] = np.frombuffer(raw, np.uint8)
        target[at + len(raw):at + block] = 0
        at += block
    return need


fixed_columns = _native.fixed_columns if COMPILED else _fixed_columns_py
