"""Commit-log segment -> Arrow record batches, vectorised (spec §2): building the columns.

The records of a segment or split are found by `store.pipeline.commitlog_scan` (`RecordScanner`: one
`kernel.scan` row of int64s per record). `RecordDecoder` builds the requested columns of a batch of rows
(`ScanLayout`): fixed fields straight from the rows; the variable ones, reconsume_times and tags_code
from one `kernel.decode_columns` call in C (`columns_native`) when the kernel is compiled, otherwise
(and for the odd column it flags) as Arrow arrays cut from the mapped file in C++ (`arrowkit.ragged_*`),
the property map parsed for all records at once (`properties_vec`).
`RowFilter` keeps the rows of some topics and a store-time range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import kernel
from store.pipeline import columns_native
from store.pipeline.arrowkit import (
    binary_array, gather_int, java_hashes, ragged_binary, ragged_slices, ragged_string, string_array,
)
from store.pipeline.commitlog_scan import (
    MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6,
)
from store.pipeline.hosts import host_text, offset_message_ids
from store.pipeline.properties_vec import parse_properties

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# messageDelayLevel default "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", in ms
DELAY_LEVELS_MS = np.array([1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200],
                           dtype=np.int64) * 1000

# Columns in schema order: name -> Arrow type.
COMMITLOG_COLUMNS: dict[str, pa.DataType] = {
    "phy_offset": pa.int64(),  # where the record is: file_from_offset + position
    "file_name": pa.string(),
    "position": pa.int32(),
    "store_size": pa.int32(),
    "magic": pa.int32(),
    "body_crc": pa.int32(),
    "queue_id": pa.int32(),
    "flag": pa.int32(),
    "queue_offset": pa.int64(),
    "commit_log_offset": pa.int64(),  # the PHYSICALOFFSET field as stored
    "sys_flag": pa.int32(),
    "born_timestamp": pa.int64(),
    "born_host": pa.string(),
    "store_timestamp": pa.int64(),
    "store_host": pa.string(),
    "reconsume_times": pa.int32(),
    "prepared_transaction_offset": pa.int64(),
    "body": pa.binary(),
    "topic": pa.string(),
    "properties": pa.map_(pa.string(), pa.string()),
    "properties_raw": pa.binary(),
    "msg_id": pa.string(),
    "tags": pa.string(),
    "keys": pa.string(),
    "uniq_key": pa.string(),
    "tags_code": pa.int64(),  # what dispatch puts in the consume queue (spec §4.3)
}
COMMITLOG_SCHEMA = pa.schema(list(COMMITLOG_COLUMNS.items()))
# With views (`SegmentReader(views=True)`): these columns as Arrow views into the segment's map.
VIEW_TYPES = columns_native.VIEW_TYPES


def commitlog_schema(columns: list[str], views: bool = False) -> pa.Schema:
    """The schema of `columns` (in that order), with the view types when `views`."""
    return pa.schema([(name, VIEW_TYPES[name] if views and name in VIEW_TYPES else COMMITLOG_COLUMNS[name])
                      for name in columns])


_C = kernel.COL
# Fixed header fields that `kernel.scan` rows carry: column -> row field.
_ROW_FIELDS = {
    "store_size": "size", "body_crc": "body_crc", "queue_id": "queue_id", "flag": "flag",
    "queue_offset": "queue_offset", "commit_log_offset": "phy_offset", "sys_flag": "sys_flag",
    "born_timestamp": "born_ts", "store_timestamp": "store_ts", "prepared_transaction_offset": "prepared",
}
_PROPERTY_VALUES = {"tags": "tags", "keys": "keys", "uniq_key": "uniq"}


class ScanLayout:
    """The `kernel.scan` rows of a batch (n x SCAN_FIELDS int64) and the columns cut from them."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.cache: dict = {}

    def __len__(self) -> int:
        return self.rows.shape[0]

    def field(self, name: str) -> np.ndarray:
        """One row field as a contiguous int64 array."""
        key = ("field", name)
        if key not in self.cache:
            self.cache[key] = np.ascontiguousarray(self.rows[:, _C[name]])
        return self.cache[key]

    def take(self, rows: np.ndarray) -> "ScanLayout":
        return ScanLayout(self.rows[rows])

    @property
    def position(self) -> np.ndarray:
        return self.field("pos")

    @property
    def born_v6(self) -> np.ndarray:
        return (self.field("sys_flag") & SYSFLAG_BORNHOST_V6) != 0

    @property
    def store_v6(self) -> np.ndarray:
        return (self.field("sys_flag") & SYSFLAG_STOREHOST_V6) != 0

    @property
    def store_host_at(self) -> np.ndarray:
        return self.position + np.where(self.born_v6, 76, 64)   # pos + 56 + born host width


class RecordDecoder:
    """Builds the requested columns of a `ScanLayout` over `buf` (the segment's bytes)."""

    def __init__(self, buf: np.ndarray, file_from_offset: int, file_name: str, *,
                 native: bool = columns_native.AVAILABLE, views: bool = False):
        self.buf = buf
        self.file_from_offset = file_from_offset
        self.file_name = file_name
        self.native = native        # variable-length columns from one kernel.decode_columns call
        self.views = views          # VIEW_TYPES' columns as views into buf (kernel.view_columns)
        self._view_buffers = columns_native.view_buffers(buf) if views and native else None
        self._file_name_column: pa.Array | None = None     # _file_names' column, to slice

    def topics(self, layout: ScanLayout) -> pa.Array:
        if "topic" not in layout.cache:
            layout.cache["topic"] = ragged_string(self.buf, layout.field("topic_pos"), layout.field("topic_len"))
        return layout.cache["topic"]

    def column(self, name: str, layout: ScanLayout) -> pa.Array:
        buf = self.buf
        if name in _ROW_FIELDS:
            values = layout.field(_ROW_FIELDS[name])
            arrow_type = COMMITLOG_COLUMNS[name]
            return pa.array(values.astype(np.int32) if arrow_type == pa.int32() else values, type=arrow_type)
        if name == "phy_offset":
            return pa.array(layout.position + self.file_from_offset, type=pa.int64())
        if name == "position":
            return pa.array(layout.position.astype(np.int32), type=pa.int32())
        if name == "magic":
            version = layout.field("version")
            return pa.array(np.where(version == 2, MESSAGE_MAGIC_V2, MESSAGE_MAGIC_V1).astype(np.int32), type=pa.int32())
        if name == "file_name":
            return self._file_names(len(layout))
        if name == "reconsume_times":  # the 4 bytes before PREPAREDTRANSACTIONOFFSET and BODYLENGTH
            return pa.array(gather_int(buf, layout.field("body_pos") - 16, 4).astype(np.int32), type=pa.int32())
        if name == "born_host":
            return host_text(buf, layout.position + 48, layout.born_v6)
        if name == "store_host":
            return host_text(buf, layout.store_host_at, layout.store_v6)
        if name == "msg_id":
            return offset_message_ids(buf, layout.store_host_at, layout.store_v6, layout.field("phy_offset"))
        if name == "body":
            return ragged_binary(buf, layout.field("body_pos"), layout.field("body_len"))
        if name == "topic":
            return self.topics(layout)
        if name == "properties_raw":
            return binary_array(*self._properties_bytes(layout))
        if name == "properties":
            return self._properties(layout).to_map()
        if name == "tags_code":
            return self._tags_code(layout)
        return self._property_value(layout, _PROPERTY_VALUES[name])

    def _file_names(self, n: int) -> pa.Array:
        """The segment's name `n` times: built once per decoder (a segment) for the largest batch
        yet, then sliced (no copy); built per batch it cost 5-7% of an all-columns decode."""
        made = self._file_name_column
        if made is None or len(made) < n:
            encoded = np.frombuffer(self.file_name.encode("utf-8"), dtype=np.uint8)
            offsets = np.arange(n + 1, dtype=np.int64) * encoded.shape[0]
            made = self._file_name_column = string_array(offsets, np.tile(encoded, n))
        return made if len(made) == n else made.slice(0, n)

    def _property_value(self, layout: ScanLayout, field_name: str) -> pa.Array:
        """TAGS / KEYS / UNIQ_KEY / DELAY (the last non-empty entry, located by the scan), null when absent."""
        key = ("value", field_name)
        if key not in layout.cache:
            at = layout.field(field_name + "_pos")
            present = at >= 0
            layout.cache[key] = ragged_string(self.buf, np.where(present, at, 0), layout.field(field_name + "_len"),
                                              None if bool(present.all()) else present)
        return layout.cache[key]

    def _tags_code(self, layout: ScanLayout) -> pa.Array:
        codes = java_hashes(self._property_value(layout, "tags")).astype(np.int64)
        scheduled = np.asarray(pc.equal(self.topics(layout), SCHEDULE_TOPIC).to_numpy(zero_copy_only=False), bool)
        if scheduled.any():
            text = self._property_value(layout, "delay")
            numeric = pc.if_else(pc.match_substring_regex(text, r"^-?[0-9]{1,9}$"), text, pa.scalar(None, pa.string()))
            levels = pc.fill_null(pc.cast(numeric, pa.int64()), 0).to_numpy(zero_copy_only=False)
            delayed = scheduled & (levels > 0)
            stamps = layout.field("store_ts")
            level = np.minimum(levels, len(DELAY_LEVELS_MS))
            codes = np.where(delayed, stamps + DELAY_LEVELS_MS[np.clip(level - 1, 0, None)], codes)
        return pa.array(codes, type=pa.int64())

    def _properties_bytes(self, layout: ScanLayout) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, bytes) of every PROPERTIES field, cut once for `properties_raw` and the parser."""
        if "properties_bytes" not in layout.cache:
            layout.cache["properties_bytes"] = ragged_slices(self.buf, layout.field("props_pos"),
                                                             layout.field("props_len"))
        return layout.cache["properties_bytes"]

    def _properties(self, layout: ScanLayout):
        if "properties" not in layout.cache:
            offsets, data = self._properties_bytes(layout)
            layout.cache["properties"] = parse_properties(data, offsets)
        return layout.cache["properties"]

    def batch(self, layout: ScanLayout, columns: list[str]) -> pa.RecordBatch:
        built = {}
        copied = columns
        if self.views:
            copied = [name for name in columns if name not in VIEW_TYPES]
            if self.native:
                built = columns_native.views(self.buf, self._view_buffers, layout, columns)
            for name in columns:            # flagged (text not UTF-8), or no kernel: copied, then cast
                if name in VIEW_TYPES and name not in built:
                    built[name] = pc.cast(self.column(name, layout), VIEW_TYPES[name])
        if self.native:
            built.update(columns_native.decode(self.buf, layout, copied, COMMITLOG_COLUMNS))
            built.update(columns_native.fixed(layout, copied, self.file_from_offset))
        arrays = [built[name] if name in built else self.column(name, layout) for name in columns]
        return pa.RecordBatch.from_arrays(arrays, schema=commitlog_schema(columns, self.views))


@dataclass(frozen=True)
class RowFilter:
    """Rows to keep: topics (None = all) and a store-timestamp range [min_ms, max_ms) (None = open)."""

    topics: frozenset[str] | None = None
    store_timestamp_min_ms: int | None = None
    store_timestamp_max_ms: int | None = None

    def mask(self, decoder: RecordDecoder, layout: ScanLayout) -> np.ndarray | None:
        keep = None
        if self.topics is not None:
            hit = pc.is_in(decoder.topics(layout), value_set=pa.array(sorted(self.topics), type=pa.string()))
            keep = np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)
        if self.store_timestamp_min_ms is not None or self.store_timestamp_max_ms is not None:
            stamps = layout.field("store_ts")
            in_range = np.ones(len(layout), dtype=bool)
            if self.store_timestamp_min_ms is not None:
                in_range &= stamps >= self.store_timestamp_min_ms
            if self.store_timestamp_max_ms is not None:
                in_range &= stamps < self.store_timestamp_max_ms
            keep = in_range if keep is None else keep & in_range
        return keep
