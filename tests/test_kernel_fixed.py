"""kernel.fixed_columns (c/fixed.c) against its twin (store.kernel.fixed): random and extreme scan
rows, every code, bases at the int64 edges, the refusals; and the pipeline's fixed columns built with
it (tests/test_kernel_columns.py compares whole batches with the numpy path on the fixtures)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from store import kernel
from store.kernel import fixed
from store.pipeline import columns_native

native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
CODES = [f for f in range(kernel.SCAN_FIELDS)] + [f | fixed.FX_INT32 for f in range(kernel.SCAN_FIELDS)] \
    + [fixed.FX_MAGIC, fixed.FX_BASED]
EDGES = [0, 1, -1, 2, 2**31 - 1, -2**31, 2**31, 2**32 + 5, 2**63 - 1, -2**63]


def _run(fn, rows, base, codes, out):
    try:
        written = fn(rows, base, codes, out)
        return "ok", written, bytes(memoryview(out).cast("B"))
    except Exception as error:
        return "raise", type(error).__name__, str(error)


def _both(rows, base, codes, size=None, make=bytearray):
    n = np.asarray(rows).nbytes // (kernel.SCAN_FIELDS * 8)
    size = sum(fixed.block_bytes(c, n) for c in codes) if size is None else size
    outs = []
    for _ in range(2):
        array = np.full(size + 8, 0x5A, np.uint8)   # 8-byte aligned storage, filled
        outs.append(make(array[:size]) if make is not bytearray else array[:size])
    return _run(kernel._native.fixed_columns, rows, base, codes, outs[0]), \
        _run(fixed._fixed_columns_py, rows, base, codes, outs[1])


def _random_rows(rng: random.Random, n: int) -> np.ndarray:
    rows = np.array([[rng.choice(EDGES) if rng.random() < 0.3 else rng.randrange(-2**63, 2**63)
                      for _ in range(kernel.SCAN_FIELDS)] for _ in range(n)], dtype=np.int64).reshape(n, kernel.SCAN_FIELDS)
    rows[:, kernel.COL["version"]] = [rng.choice([1, 2, 0, 3, -2]) for _ in range(n)]
    return rows


@native
@pytest.mark.parametrize("seed", range(6))
def test_fixed_columns_c_equals_twin(seed):
    rng = random.Random(seed)
    for n in (0, 1, 3, 7, 64):
        rows = _random_rows(rng, n)
        for _ in range(6):
            codes = bytes(rng.choice(CODES) for _ in range(rng.randrange(0, 12)))
            base = rng.choice(EDGES + [rng.randrange(-2**63, 2**63)])
            c, py = _both(rows, base, codes)
            assert c == py and c[0] == "ok", (seed, n, codes, base)


@native
def test_fixed_columns_values():
    rows = np.zeros((3, kernel.SCAN_FIELDS), np.int64)
    rows[:, kernel.COL["pos"]] = [0, 100, 2**33 + 7]
    rows[:, kernel.COL["version"]] = [1, 2, 1]
    codes = bytes([fixed.FX_BASED, kernel.COL["pos"] | fixed.FX_INT32, fixed.FX_MAGIC])
    for fn in (kernel._native.fixed_columns, fixed._fixed_columns_py):
        out = np.zeros(3 * 8 + 16 + 16, np.uint8)
        assert fn(rows, 2**63 - 50, codes, out) == 56
        assert np.frombuffer(out[:24], np.int64).tolist() == [2**63 - 50, 2**63 + 50 - 2**64, 2**63 + 2**33 - 43 - 2**64]
        assert np.frombuffer(out[24:36], np.int32).tolist() == [0, 100, 7]
        assert np.frombuffer(out[40:52], np.int32).tolist() == [-626843481, -626843477, -626843481]
        assert out[36:40].tolist() == [0] * 4 and out[52:].tolist() == [0] * 4


@native
def test_fixed_columns_refuse_alike():
    rows = _random_rows(random.Random(9), 4)
    good = bytes([fixed.FX_MAGIC, 3])
    cases = [
        (rows.reshape(-1)[1:], 0, good, None, bytearray),            # not whole rows
        (rows.reshape(-1).view(np.uint8)[4:4 + 3 * 8 * kernel.SCAN_FIELDS], 0, good, None, bytearray),  # unaligned
        (rows, 0, bytes([0x82]), None, bytearray),                   # unknown codes
        (rows, 0, bytes([kernel.SCAN_FIELDS]), None, bytearray),
        (rows, 0, bytes([0x3F | fixed.FX_INT32]), None, bytearray),
        (rows, 0, good, 16 + 31, bytearray),                         # out too small
        (rows, 0, good, None, bytes),                                # read-only out
        (rows, 2**63, good, None, bytearray),                        # base past int64
        (rows, -2**63 - 1, good, None, bytearray),
    ]
    for rows_in, base, codes, size, make in cases:
        c, py = _both(rows_in, base, codes, size, make)
        assert c == py and c[0] == "raise", (c, py)
    out = np.zeros(64, np.uint8)
    for fn in (kernel._native.fixed_columns, fixed._fixed_columns_py):
        with pytest.raises(ValueError, match="aligned buffer"):
            fn(rows, 0, good, out[1:57])
    assert _both(rows, 0, b"")[0] == ("ok", 0, b"")


def test_pipeline_fixed_columns_are_the_numpy_ones(monkeypatch):
    """columns_native.fixed with the compiled kernel or the twin gives RecordDecoder.column's arrays."""
    from store.pipeline.commitlog_decoder import RecordDecoder, ScanLayout
    rows = _random_rows(random.Random(3), 50)
    rows[:, kernel.COL["pos"]] = np.arange(50) * 1000
    layout = ScanLayout(rows)
    decoder = RecordDecoder(np.zeros(0, np.uint8), 3 << 30, "x", native=False)
    names = list(columns_native.FIXED_CODES)
    for fn in ([kernel._native.fixed_columns] if kernel.COMPILED else []) + [fixed._fixed_columns_py]:
        monkeypatch.setattr(fixed, "fixed_columns", fn)
        built = columns_native.fixed(layout, names + ["topic"], 3 << 30)
        assert list(built) == names
        for name in names:
            assert built[name].equals(decoder.column(name, layout)), name
