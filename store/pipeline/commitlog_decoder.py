"""Commit-log segment -> Arrow record batches, vectorised (spec §2).

1. `RecordScanner` walks a split with `store.kernel.scan` (C, or its Python twin with
   RMQ_KERNEL=python): each record is checked like `checkMessageAndReturnSize` (length formula, BODYCRC
   when asked) and becomes one row of int64s (header fields, body/topic/properties positions, the
   TAGS/KEYS/UNIQ_KEY/DELAY value positions). The first failing record ends the split — where
   RocketMQ's recovery ends the log — with the same END_* kinds the former Python walk gave.
2. `RecordDecoder` builds the requested columns of a batch of rows (`ScanLayout`): fixed fields straight
   from the rows, variable ones as Arrow arrays cut from the mapped file in C++ (`arrowkit.ragged_*`),
   the property map parsed for all records at once (`properties_vec`).

`walk_records` (header-only walk, for planning splits and streaming) and `layout_records` /
`crc_mismatches` (used by streaming's `advance`) keep their former results.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from store import kernel
from store.pipeline.arrowkit import (
    binary_array, gather_int, java_hashes, ragged_binary, ragged_slices, ragged_string, string_array,
)
from store.pipeline.hosts import host_text, offset_message_ids
from store.pipeline.properties_vec import parse_properties

MESSAGE_MAGIC_V1 = -626843481
MESSAGE_MAGIC_V2 = -626843477
BLANK_MAGIC = -875286124
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
MIN_RECORD_SIZE = 91  # v1, IPv4 hosts, empty body, topic and properties
_HEADER = struct.Struct(">ii")
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# messageDelayLevel default "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", in ms
DELAY_LEVELS_MS = np.array([1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200],
                           dtype=np.int64) * 1000

END_BLANK = "blank"  # a BLANK record: the rest of the segment is filler
END_INVALID = "invalid"  # unknown magic / bad size / length mismatch: recovery ends the log here
END_ZEROS = "zeros"  # size 0 and magic 0: the never-written, zero-filled tail of a segment
END_FILE = "file_end"  # the last record ends exactly at the end of the file
END_STOP = "stop"  # reached the caller's stop_position (a split boundary)

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


@dataclass(frozen=True)
class WalkResult:
    """Record starts and sizes of one walk, and why it ended (`end_kind` at `end_position`)."""

    positions: np.ndarray
    sizes: np.ndarray
    magics: np.ndarray
    end_position: int
    end_kind: str


def walk_records(buf, start_position: int = 0, stop_position: int | None = None) -> WalkResult:
    """Follow TOTALSIZE from `start_position` (a record start) through a segment buffer.

    A header-only walk: a record counts when its magic is a message magic, its size is at least
    `MIN_RECORD_SIZE` and it fits in the file; its field layout is not judged (`layout_records` does
    that). `kernel.scan` does the walking in C and also checks the layout; where it stops at a record
    whose header alone is fine, the walk takes that record and scans on after it.
    """
    limit = len(buf)
    stop = limit if stop_position is None else min(stop_position, limit)
    view = memoryview(buf)
    out = kernel.scan_buffer(_PLAN_ROWS)
    chunks: list[np.ndarray] = []
    position = start_position
    while True:
        if position >= stop:
            end_kind = END_STOP if position < limit else END_FILE
            break
        count, next_position, kind, _ = kernel.scan(view, position, stop, False, out)
        if count:
            chunks.append(out[:count, _POS].copy())
        position = next_position
        if kind == kernel.STOP_FULL or (kind == kernel.STOP_END and position >= stop):
            continue
        if kind == kernel.STOP_BLANK:
            end_kind = END_BLANK
            break
        # Invalid for scan (or cut by `stop`): judge the header alone, against the whole file.
        if position + 8 > limit:
            end_kind = END_INVALID
            break
        size, magic = _HEADER.unpack_from(view, position)
        if (magic == MESSAGE_MAGIC_V1 or magic == MESSAGE_MAGIC_V2) and size >= MIN_RECORD_SIZE \
                and position + size <= limit:
            chunks.append(np.array([position], dtype=np.int64))
            position += size
            continue
        if magic == BLANK_MAGIC:
            end_kind = END_BLANK
        else:
            end_kind = END_ZEROS if size == 0 and magic == 0 else END_INVALID
        break
    starts = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    sizes = gather_int(buf, starts, 4) if len(starts) else np.zeros(0, dtype=np.int64)
    magics = gather_int(buf, starts + 4, 4) if len(starts) else np.zeros(0, dtype=np.int64)
    return WalkResult(starts, sizes, magics, position, end_kind)


_PLAN_ROWS = 65536  # rows per kernel.scan call of a header walk (13 MiB of scratch)
_POS, _SIZE = kernel.COL["pos"], kernel.COL["size"]


def _end_kind_at(view, position: int, kind: int) -> str:
    """END_* of a scan that found no record at `position` (scanned against the whole file)."""
    if kind == kernel.STOP_BLANK:
        return END_BLANK
    if kind == kernel.STOP_END:
        return END_FILE
    if position + 8 <= len(view):
        size, magic = _HEADER.unpack_from(view, position)
        if size == 0 and magic == 0:
            return END_ZEROS
    return END_INVALID


class RecordScanner:
    """The records of one split as `kernel.scan` rows, one array per batch of at most `batch_bytes`.

    Equivalent to `walk_records` + `layout_records` (+ `crc_mismatches`) followed by cutting at the
    first failing record: a record counts when it starts before `stop_position` and passes
    `checkMessageAndReturnSize`'s checks against the whole file. A batch holds the records that end
    within `batch_bytes` of its first record (at least one record). After iteration `end_position`,
    `end_kind` and `records` say where and why the split ended.
    """

    def __init__(self, buf, start_position: int = 0, stop_position: int | None = None, *,
                 check_crc: bool = False, batch_bytes: int = 32 * 1024 * 1024):
        self.buf = buf
        self.start_position = start_position
        self.stop_position = stop_position
        self.check_crc = check_crc
        self.batch_bytes = max(1, batch_bytes)
        self.end_position = start_position
        self.end_kind = END_FILE
        self.records = 0

    def batches(self) -> Iterator[np.ndarray]:
        view = memoryview(self.buf)
        limit = len(view)
        stop = limit if self.stop_position is None else min(self.stop_position, limit)
        position = self.start_position
        rows_hint = 1024
        one = kernel.scan_buffer(1)
        while True:
            if position >= stop:
                self._finish(position, END_STOP if position < limit else END_FILE)
                return
            soft = min(position + self.batch_bytes, stop)
            out = kernel.scan_buffer(rows_hint)
            count = 0
            while True:
                got, next_position, kind, _ = kernel.scan(view, position, soft, self.check_crc, out[count:])
                count += got
                position = next_position
                if kind != kernel.STOP_FULL:
                    break
                bigger = kernel.scan_buffer(out.shape[0] * 2)
                bigger[:count] = out[:count]
                out = bigger
            if count:
                rows_hint = max(rows_hint, count + count // 8 + 1)
                self.records += count
                yield out[:count]
                if kind == kernel.STOP_BLANK:
                    self._finish(position, END_BLANK)
                    return
                continue  # a stop inside the batch window is judged again from its own start
            if kind == kernel.STOP_BLANK:
                self._finish(position, END_BLANK)
                return
            # Nothing fitted below the window (a record larger than batch_bytes, one crossing `stop`,
            # a header cut by the window, or an invalid record): judge it against the whole file.
            got, next_position, kind, _ = kernel.scan(view, position, limit, self.check_crc, one)
            if got:
                self.records += 1
                yield one.copy()
                position = int(one[0, _POS] + one[0, _SIZE])
                continue
            self._finish(position, _end_kind_at(view, position, kind))
            return

    def _finish(self, position: int, kind: str) -> None:
        self.end_position, self.end_kind = position, kind


@dataclass
class RecordLayout:
    """Per-record positions (absolute, in the buffer) of every variable-position field."""

    position: np.ndarray
    size: np.ndarray
    magic: np.ndarray
    sys_flag: np.ndarray
    born_v6: np.ndarray
    store_v6: np.ndarray
    store_timestamp_at: np.ndarray
    store_host_at: np.ndarray
    body_at: np.ndarray
    body_length: np.ndarray
    topic_at: np.ndarray
    topic_length: np.ndarray
    properties_at: np.ndarray
    properties_length: np.ndarray
    cache: dict = field(default_factory=dict)

    def take(self, rows: np.ndarray) -> "RecordLayout":
        values = {k: v[rows] for k, v in self.__dict__.items() if isinstance(v, np.ndarray)}
        return RecordLayout(**values)

    def __len__(self) -> int:
        return self.position.shape[0]


def layout_records(buf: np.ndarray, walk: WalkResult) -> tuple[RecordLayout, np.ndarray]:
    """Field positions of every walked record and a mask of records that pass the length check."""
    pos, size, magic = walk.positions, walk.sizes, walk.magics
    sys_flag = gather_int(buf, pos + 36, 4)
    born_v6 = (sys_flag & SYSFLAG_BORNHOST_V6) != 0
    store_v6 = (sys_flag & SYSFLAG_STOREHOST_V6) != 0
    born_len = np.where(born_v6, 20, 8)
    store_len = np.where(store_v6, 20, 8)
    topic_len_width = np.where(magic == MESSAGE_MAGIC_V2, 2, 1)
    end = pos + size
    last = len(buf) - 1

    def at(p, width):  # clip reads of broken records into the buffer; they are masked out below
        return np.minimum(p, last - width + 1)

    body_length_at = pos + 68 + born_len + store_len
    ok = body_length_at + 4 + topic_len_width + 2 <= end
    body_length = gather_int(buf, at(body_length_at, 4), 4)
    body_at = body_length_at + 4
    topic_length_at = body_at + np.maximum(body_length, 0)
    ok &= topic_length_at + topic_len_width + 2 <= end
    topic_length = np.where(
        topic_len_width == 2, gather_int(buf, at(topic_length_at, 2), 2), gather_int(buf, at(topic_length_at, 1), 1)
    )
    ok &= topic_length >= 0
    topic_at = topic_length_at + topic_len_width
    properties_length_at = topic_at + topic_length
    ok &= properties_length_at + 2 <= end
    properties_length = gather_int(buf, at(properties_length_at, 2), 2)
    properties_at = properties_length_at + 2
    ok &= properties_at + np.maximum(properties_length, 0) == end  # spec §2.7 step 6
    layout = RecordLayout(
        pos, size, magic, sys_flag, born_v6, store_v6, pos + 48 + born_len, pos + 56 + born_len,
        body_at, np.maximum(body_length, 0), topic_at, topic_length, properties_at, np.maximum(properties_length, 0),
    )
    return layout, ok


def crc_mismatches(buf, layout: RecordLayout, body_crc: np.ndarray) -> np.ndarray:
    """Mask of records whose BODYCRC differs from crc32(body) & 0x7FFFFFFF (one zlib call per record)."""
    view = memoryview(buf)
    computed = np.fromiter(
        (zlib.crc32(view[s : s + n]) & 0x7FFFFFFF for s, n in zip(layout.body_at.tolist(), layout.body_length.tolist())),
        dtype=np.int64, count=len(layout),
    )
    return (layout.body_length > 0) & (computed != body_crc)


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

    def __init__(self, buf: np.ndarray, file_from_offset: int, file_name: str):
        self.buf = buf
        self.file_from_offset = file_from_offset
        self.file_name = file_name

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
            encoded = np.frombuffer(self.file_name.encode("utf-8"), dtype=np.uint8)
            n = len(layout)
            offsets = np.arange(n + 1, dtype=np.int64) * encoded.shape[0]
            return string_array(offsets, np.tile(encoded, n))
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
        arrays = [self.column(name, layout) for name in columns]
        schema = pa.schema([(name, COMMITLOG_COLUMNS[name]) for name in columns])
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


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
