"""`view_columns`: the pipeline's byte and text columns of scan rows as Arrow views (C: c/views.c).

`store.pipeline.columns_native.views` asks it for the body, topic, properties_raw, tags, keys and
uniq_key of a batch (`SegmentReader(views=True)`): 16 bytes per value in Arrow's BinaryView /
StringView layout pointing into the segment's map, instead of the value copied into a column's
buffer. Values of up to 12 bytes are held inline; a longer one points at buffer `pos >> 30`, offset
`pos & (2**30 - 1)`, the caller's buffers being the slices `buf[k << 30:(k + 2) << 30]`. A text
value that is not UTF-8 (or any value longer than 2**30 bytes) flags its column, and the caller
builds that column the copying way. `_view_columns_py` is the twin: the same outputs and refusals,
record by record (tests/test_kernel_views.py compares them; tests/kernel_fuzz fuzzes the C).
"""

from __future__ import annotations

import struct

import numpy as np

from store.kernel import COL, COMPILED, SCAN_FIELDS, _native, _refuse_overflow
from store.kernel.columns import SLOT, _aligned, _flat, _utf8_ok

VIEW_SLOTS = ("body", "topic", "properties_raw", "tags", "keys", "uniq_key")   # slot order
VIEW_WANT = {name: 1 << SLOT[name] for name in VIEW_SLOTS}
_ALL = sum(VIEW_WANT.values())
_TEXT = {SLOT["topic"], SLOT["tags"], SLOT["keys"], SLOT["uniq_key"]}
_NULLABLE = {SLOT["tags"], SLOT["keys"], SLOT["uniq_key"]}
_FIELD = {SLOT["body"]: "body", SLOT["topic"]: "topic", SLOT["properties_raw"]: "props",
          SLOT["tags"]: "tags", SLOT["keys"]: "keys", SLOT["uniq_key"]: "uniq"}
VIEW_SHIFT = 30
_MAX_LENGTH = 1 << VIEW_SHIFT
_LONG = struct.Struct("<i4sii")
_SHORT = struct.Struct("<i12s")


def buffer_slices(size: int) -> list[tuple[int, int]]:
    """(start, stop) of the data buffers the views point into, for a buffer of `size` bytes."""
    return [(k << VIEW_SHIFT, min(size, (k + 2) << VIEW_SHIFT))
            for k in range(max(1, -(-size // _MAX_LENGTH)))]


def _view_columns_py(buf, rows, want, out):
    _refuse_overflow((want, "i"))
    view = _flat(buf)
    rows_view = _flat(rows)
    target = _flat(out)
    if target.readonly:        # as the C's argument parsing, before any other check
        raise TypeError("view_columns() argument 4 must be read-write bytes-like object, not "
                        f"{type(out).__name__}")
    if rows_view.nbytes % (SCAN_FIELDS * 8) or (rows_view.nbytes and not _aligned(rows)):
        raise ValueError("rows must be an aligned whole number of scan rows")
    if want < 0 or want & ~_ALL:
        raise ValueError("want holds bits of no view column")
    table = np.frombuffer(rows_view, dtype=np.int64).reshape(-1, SCAN_FIELDS).tolist()
    n, size = len(table), len(view)
    slots = [s for s in sorted(_FIELD) if want & (1 << s)]
    if target.nbytes != len(slots) * n * 16:
        raise ValueError("out must hold 16 bytes per row and wanted column")
    flags = 0
    at = 0
    for s in slots:
        pos_at, len_at = COL[_FIELD[s] + "_pos"], COL[_FIELD[s] + "_len"]
        for r in table:
            pos, length = r[pos_at], r[len_at]
            entry = bytes(16)
            if pos < 0 and s in _NULLABLE:
                pass
            elif pos < 0 or length < 0 or pos > size or length > size - pos:
                raise ValueError("a row points outside the buffer")
            elif length > _MAX_LENGTH:
                flags |= 1 << s
            else:
                value = bytes(view[pos:pos + length])
                if s in _TEXT and not flags & (1 << s) and not _utf8_ok(value):
                    flags |= 1 << s
                entry = _SHORT.pack(length, value) if length <= 12 else \
                    _LONG.pack(length, value[:4], pos >> VIEW_SHIFT, pos & (_MAX_LENGTH - 1))
            target[at:at + 16] = entry
            at += 16
    return flags


view_columns = _native.view_columns if COMPILED else _view_columns_py
