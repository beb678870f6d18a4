"""Vectorised parse of many PROPERTIES strings at once (spec §2.3), into an Arrow `map<string,string>`.

The rule, per record: split the text on `\\x02`; in each piece the first `\\x01` separates the name from
the value; pieces with an empty name or an empty value are dropped; a later duplicate name overwrites an
earlier one. Both separators are ASCII control bytes that never occur inside a multi-byte UTF-8
sequence, so the split can be done on bytes with numpy before any text is decoded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store.pipeline.arrowkit import ragged_slices, string_array, take_or_null

NAME_VALUE_SEPARATOR_BYTE = 1
PROPERTY_SEPARATOR_BYTE = 2
PROPERTIES_MAP_TYPE = pa.map_(pa.string(), pa.string())


@dataclass(frozen=True)
class ParsedProperties:
    """Entries of every record: `record` (which row), `names`, `values` (Arrow strings), in stored order."""

    record_count: int
    record: np.ndarray
    names: pa.Array
    values: pa.Array

    def to_map(self) -> pa.Array:
        counts = np.bincount(self.record, minlength=self.record_count)
        offsets = np.zeros(self.record_count + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        return pa.MapArray.from_arrays(pa.array(offsets, type=pa.int32()), self.names, self.values)

    def lookup(self, name: str) -> pa.Array:
        """The value of property `name` for every record (null when absent)."""
        hit = np.asarray(pc.equal(self.names, name).to_numpy(zero_copy_only=False), dtype=bool)
        index = np.full(self.record_count, -1, dtype=np.int64)
        index[self.record[hit]] = np.flatnonzero(hit)
        return take_or_null(self.values, index, pa.string())


def parse_properties(data: np.ndarray, offsets: np.ndarray) -> ParsedProperties:
    """Parse the concatenated properties bytes `data` of records delimited by `offsets` (n+1 int64)."""
    record_count = offsets.shape[0] - 1
    piece_start, piece_end, piece_record = _pieces(data, offsets)
    separators = np.flatnonzero(data == NAME_VALUE_SEPARATOR_BYTE)
    if separators.shape[0] == 0:
        separators = np.array([data.shape[0]], dtype=np.int64)  # a sentinel no piece can use
    first = np.searchsorted(separators, piece_start, side="left")
    found = first < separators.shape[0]
    split = separators[np.minimum(first, separators.shape[0] - 1)]
    valid = found & (split > piece_start) & (split < piece_end - 1)
    start, split, end, record = piece_start[valid], split[valid], piece_end[valid], piece_record[valid]
    name_offsets, name_bytes = ragged_slices(data, start, split - start)
    value_offsets, value_bytes = ragged_slices(data, split + 1, end - split - 1)
    names = string_array(name_offsets, name_bytes)
    values = string_array(value_offsets, value_bytes)
    keep = _last_of_duplicates(record, names)
    if keep is not None:
        record = record[keep]
        names = names.filter(pa.array(keep))
        values = values.filter(pa.array(keep))
    return ParsedProperties(record_count, record, names, values)


def _pieces(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, end and record of every `\\x02`-delimited piece (pieces never span two records)."""
    record_count = offsets.shape[0] - 1
    separators = np.flatnonzero(data == PROPERTY_SEPARATOR_BYTE).astype(np.int64)
    separator_record = np.searchsorted(offsets, separators, side="right") - 1
    # Every piece ends at a separator or at its record's end; sort the two kinds of ends by record.
    end = np.concatenate([separators, offsets[1:]])
    record = np.concatenate([separator_record, np.arange(record_count, dtype=np.int64)])
    is_record_end = np.concatenate([np.zeros(separators.shape[0], bool), np.ones(record_count, bool)])
    order = np.lexsort((is_record_end, end, record))
    end, record = end[order], record[order]
    first_in_record = np.ones(end.shape[0], dtype=bool)
    first_in_record[1:] = record[1:] != record[:-1]
    start = np.empty_like(end)
    start[first_in_record] = offsets[:-1][record[first_in_record]]
    start[~first_in_record] = end[:-1][~first_in_record[1:]] + 1
    return start, end, record


def _last_of_duplicates(record: np.ndarray, names: pa.Array) -> np.ndarray | None:
    """Mask keeping only the last entry of each (record, name), or None when there is no duplicate."""
    if record.shape[0] < 2:
        return None
    encoded = pc.dictionary_encode(names)
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    key = record * (len(encoded.dictionary) + 1) + codes
    ordered = np.sort(key)  # a plain sort is ~3x cheaper than np.unique's hashing here (decode_bench)
    if not bool((ordered[1:] == ordered[:-1]).any()):
        return None
    _, last_reversed = np.unique(key[::-1], return_index=True)
    keep = np.zeros(key.shape[0], dtype=bool)
    keep[key.shape[0] - 1 - last_reversed] = True
    return keep
