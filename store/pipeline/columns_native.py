"""The commit-log columns of a batch from one `kernel.decode_columns` call (C, GIL released).

`RecordDecoder.batch` uses this when the kernel is compiled: every variable-length column (hosts,
msg_id, body, topic, properties_raw, tags, keys, uniq_key, the properties map) and reconsume_times
and tags_code come back from one C call as Arrow buffers, wrapped here without a copy; the fixed
fields come from the scan rows as before. The output is the numpy path's, column for column:
where the kernel flags a column (a value that is not UTF-8, which the numpy path replaces the way
Java does; a tagsCode of a non-ASCII TAGS or a SCHEDULE_TOPIC_XXXX record), that column is built
the numpy way. Without the compiled kernel the numpy path builds everything (the kernel's Python
twin is exact but record by record, slower than numpy).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from store import kernel
from store.kernel import columns as native
from store.kernel import fixed as fixed_kernel
from store.kernel import views as view_kernel
from store.pipeline.buffers import RECYCLER

AVAILABLE = kernel.COMPILED
# Column -> the want bit of decode_columns.
WANT = {name: 1 << slot for slot, name in enumerate(native.SLOTS)}
WANT["reconsume_times"] = native.WANT_RECONSUME
WANT["tags_code"] = native.WANT_TAGS_CODE
_NULLABLE = {"tags": "tags", "keys": "keys", "uniq_key": "uniq"}   # column -> scan field
_MAP_TYPE = pa.map_(pa.string(), pa.string())
_F = kernel.COL
# Fixed-width column -> its fixed_columns code (store.kernel.fixed).
FIXED_CODES = {
    "phy_offset": fixed_kernel.FX_BASED, "position": _F["pos"] | fixed_kernel.FX_INT32,
    "store_size": _F["size"] | fixed_kernel.FX_INT32, "magic": fixed_kernel.FX_MAGIC,
    "body_crc": _F["body_crc"] | fixed_kernel.FX_INT32, "queue_id": _F["queue_id"] | fixed_kernel.FX_INT32,
    "flag": _F["flag"] | fixed_kernel.FX_INT32, "queue_offset": _F["queue_offset"],
    "commit_log_offset": _F["phy_offset"], "sys_flag": _F["sys_flag"] | fixed_kernel.FX_INT32,
    "born_timestamp": _F["born_ts"], "store_timestamp": _F["store_ts"], "prepared_transaction_offset": _F["prepared"],
}


def _validity(layout, name: str, n: int) -> tuple[pa.Buffer | None, int]:
    """(validity bitmap or None, null count) of column `name` over the `n` rows of `layout`: TAGS,
    KEYS and UNIQ_KEY are null where the scan found no value; every other column has none."""
    if name not in _NULLABLE:
        return None, 0
    present = layout.field(_NULLABLE[name] + "_pos") >= 0
    nulls = n - int(np.count_nonzero(present))
    return (pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None), nulls


def fixed(layout, columns: list[str], file_from_offset: int) -> dict[str, pa.Array]:
    """The fixed-width columns among `columns` from one kernel.fixed_columns pass over the rows (one
    recycled buffer, each column a slice of it) instead of a strided copy, a cast and an allocation
    each."""
    names = [name for name in columns if name in FIXED_CODES]
    if not names:
        return {}
    rows = layout.rows if layout.rows.flags.c_contiguous else np.ascontiguousarray(layout.rows)
    n = rows.shape[0]
    codes = bytes(FIXED_CODES[name] for name in names)
    out = RECYCLER(max(8, sum(fixed_kernel.block_bytes(code, n) for code in codes)))
    fixed_kernel.fixed_columns(rows, file_from_offset, codes, out)
    arrays, at = {}, 0
    for name, code in zip(names, codes):
        arrow_type = pa.int32() if fixed_kernel.width(code) == 4 else pa.int64()
        arrays[name] = pa.Array.from_buffers(arrow_type, n, [None, out.slice(at, fixed_kernel.width(code) * n)])
        at += fixed_kernel.block_bytes(code, n)
    return arrays


def decode(buf: np.ndarray, layout, columns: list[str], arrow_types: dict) -> dict[str, pa.Array]:
    """The arrays of `columns` that decode_columns builds exactly (a subset of `columns`)."""
    want = 0
    for name in columns:
        want |= WANT.get(name, 0)
    if not want:
        return {}
    rows = layout.rows if layout.rows.flags.c_contiguous else np.ascontiguousarray(layout.rows)
    # Outputs recycled (store.pipeline.buffers): a fresh buffer of a batch's size page-faults on every 4 KiB
    # it writes (3-20x slower than the copy itself on these VMs).
    (offsets, data, names_off, values_off, reconsume, tags_codes, used,
     flags) = native.decode_columns(buf, rows, want, RECYCLER)
    n = rows.shape[0]
    row_bytes = (n + 1) * 4

    def row_offsets(slot: int) -> pa.Buffer:
        return offsets.slice(slot * row_bytes, row_bytes)

    out: dict[str, pa.Array] = {}
    for name in columns:
        bit = WANT.get(name, 0)
        if not bit or flags & bit:
            continue          # not the kernel's, or flagged: the numpy path builds it
        if name == "reconsume_times":
            out[name] = pa.Array.from_buffers(pa.int32(), n, [None, reconsume])
        elif name == "tags_code":
            out[name] = pa.Array.from_buffers(pa.int64(), n, [None, tags_codes])
        elif name == "properties":
            entries = used[native.N_DATA]
            keys = pa.Array.from_buffers(pa.string(), entries, [None, names_off, data[native.D_NAMES]])
            items = pa.Array.from_buffers(pa.string(), entries, [None, values_off, data[native.D_VALUES]])
            entry_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, row_offsets(native.SLOT[name])])
            out[name] = pa.MapArray.from_arrays(entry_offsets, keys, items)
        else:
            slot = native.SLOT[name]
            validity, nulls = _validity(layout, name, n)
            out[name] = pa.Array.from_buffers(arrow_types[name], n, [validity, row_offsets(slot), data[slot]],
                                              null_count=nulls)
    return out


# Columns `SegmentReader(views=True)` gives as Arrow views into the segment's map (store.kernel.views).
VIEW_TYPES = {"body": pa.binary_view(), "topic": pa.string_view(), "properties_raw": pa.binary_view(),
              "tags": pa.string_view(), "keys": pa.string_view(), "uniq_key": pa.string_view()}


def view_buffers(buf: np.ndarray) -> list[pa.Buffer]:
    """The data buffers every view column of `buf` points into (store.kernel.views.buffer_slices),
    slices of the map itself: nothing copied, and the map stays alive while a column refers to it."""
    return [pa.py_buffer(buf[start:stop]) for start, stop in view_kernel.buffer_slices(len(buf))]


def views(buf: np.ndarray, buffers: list[pa.Buffer], layout, columns: list[str]) -> dict[str, pa.Array]:
    """The arrays of the view columns among `columns` that view_columns builds (a subset: a flagged
    column, text that is not UTF-8, is left to the caller)."""
    names = [name for name in view_kernel.VIEW_SLOTS if name in columns]
    if not names:
        return {}
    rows = layout.rows if layout.rows.flags.c_contiguous else np.ascontiguousarray(layout.rows)
    n = rows.shape[0]
    if not n:
        return {name: pa.array([], type=VIEW_TYPES[name]) for name in names}
    want = sum(view_kernel.VIEW_WANT[name] for name in names)
    out = RECYCLER(16 * n * len(names))
    flags = view_kernel.view_columns(buf, rows, want, out)
    arrays = {}
    for k, name in enumerate(names):
        if flags & view_kernel.VIEW_WANT[name]:
            continue
        validity, nulls = _validity(layout, name, n)
        arrays[name] = pa.Array.from_buffers(VIEW_TYPES[name], n, [validity, out.slice(16 * n * k, 16 * n),
                                                                   *buffers], null_count=nulls)
    return arrays
