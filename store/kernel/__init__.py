"""The store's hottest loops: compiled when possible, in plain Python otherwise.

`pip install -e .` builds the C extension `store.kernel._kernel` from `store/kernel/c/*.c` (pyproject.toml's
`ext-modules`; it needs gcc and the Python headers, which a fresh machine has). Where it could not be built, every function here falls back to its pure-Python twin,
which gives the same answers, only slower, and refuses the same inputs with the same exception and
message: tests/test_kernel.py and tests/test_kernel_bounds.py run both on the same inputs, and
tests/test_kernel_fuzz.py fuzzes the C (built with ASan + UBSan) against them.
`RMQ_KERNEL=python` in the environment forces the fallback; `COMPILED` says which one is in use.

The package holds the C sources (`c/*.c`, `c/kernel.h` has their table), the built extension and these
twins (`scan_groups` groups scan rows by queue). May import: nothing of the store, so that the codecs,
which use it, stay at the bottom of the import graph.

| function        | what                                                                 |
|-----------------|----------------------------------------------------------------------|
| encode_record   | one commit-log record with its BODYCRC (spec §2.1)                   |
| place           | copy a record into a segment with its offsets and time, header last  |
| encode_put      | `store.commitlog.put_path.encode_for_put`'s common case (no Python twin: None = ask) |
| scan            | walk records like `checkMessageAndReturnSize` into rows of int64s (check_crc 0 / 1 BODYCRC / 2 `__CRC32#`) |
| index_hashes    | the Java hashes of the index keys of scan rows (ASCII only; -1: ask) |
| java_hashes     | Java `String.hashCode` of many strings (numpy int64 of int32 values) |
| index_select, cq_search_nearest, cq_nearest_queue, cq_nearest_in, cq_search_boundary, read_message | lookups: an index chain walk, the 4.9.7 nearest time search (in one file; of a one-file queue), the 5.x lower/upper one, one record read+decoded (twins in `store.kernel.lookup`) |
| decode_records  | a pull's records -> MessageRecords in one call (`decode.py`; the caller's Python decodes the odd ones) |
| pull_unfiltered | plan, slice, check (and decode) an unfiltered pull in one call (`pull.py`; no twin: None = ask) |
| pull_window     | an unfiltered pull from a mapped consume queue's segments through the commit log's, then pull_unfiltered (twin in `pull_window.py`) |
| found_result    | a pull's GetMessageResult built without its __init__ frame (twin in `result.py`) |
| query_keys      | a key query's index rounds and record reads in one call (twin in `store.kernel.query`) |
| query_message   | query_keys under the index service's lock, its QueryMessageResult built (twin in `store.kernel.query`) |
| (query_hints.c) | the slot, entry and records of a key query prefetched a step early; no answer depends on it (no twin) |
| tags_codes      | the tagsCode of each scan row (ASCII TAGS; TAGS_CODE_ASK: ask), twin in `dispatch_twins` |
| unit_runs       | consume-queue units of scan rows grouped by queue, twin in `dispatch_twins` |
| index_put       | `IndexFile.put_keys` into the map (entries, chains, slots), twin in `dispatch_twins` |
| decode_columns  | the pipeline's commit-log columns of scan rows as Arrow-style buffers (`columns.py`, GIL released) |
| walk_headers    | record starts by TOTALSIZE and magic alone, for planning splits (`columns.py`) |
| fixed_columns   | the pipeline's fixed-width columns of scan rows in one pass, GIL released (`fixed.py`) |
| view_columns    | the pipeline's byte and text columns of scan rows as Arrow views into the map, GIL released (`views.py`, twin there) |
| crc32           | zlib's CRC-32 as scan and encode_record compute it (`crc_clmul.c`: PCLMULQDQ), twin `zlib.crc32` |
| encode_batch, place_batch | a put's records encoded in one call (None: ask), placed with offsets, time and msgIds in one (`put_batch.py`, twins there) |
| put_fast        | a single put's common case in one call: checks, clocks, encode, lock, place, result (`put_fast.py`, twin there) |
| prefault        | madvise(MADV_POPULATE_WRITE) over whole pages of a writable mmap, GIL released (`prefault.py`, twin there) |
| GroupCommit     | SYNC_FLUSH's group commit loop: syncs and producer wake-ups with the GIL released (`group_commit.py`, twin `GroupCommitPy` there) |
| span_groups     | distinct byte spans (+ an int64 tag) numbered in np.unique's order: queues of scan rows, TAGS values (`scan_groups.py`, twin there; GIL released) |
| cq_keys         | the RocksDB consume queue's unit and `max` keys of a dispatch pass in one call (`cq_keys.py`, twin there) |

The loops over many records (scan, index_hashes, tags_codes, unit_runs, index_put) release the GIL in C when
they have 1,024 records or more (RELEASE_MIN_WORK), so that big work (a check, a dispatch pass) runs beside other
threads; below that, taking the GIL back (up to the switch interval while a producer runs Python) costs more than
the work (c/kernel.h says why releasing is safe, and KERNEL_RELEASE_IF when it is done).
"""

from __future__ import annotations

import operator
import os
import struct
import zlib

import numpy as np

try:
    if os.environ.get("RMQ_KERNEL", "") == "python":
        raise ImportError("RMQ_KERNEL=python")
    from store.kernel import _kernel as _native
except ImportError:
    _native = None

COMPILED = _native is not None

# Columns of a scan row, in the C enum's order.
SCAN_COLUMNS = (
    "pos", "size", "queue_id", "flag", "queue_offset", "phy_offset", "sys_flag", "born_ts",
    "store_ts", "prepared", "body_pos", "body_len", "topic_pos", "topic_len", "props_pos",
    "props_len", "tags_pos", "tags_len", "keys_pos", "keys_len", "uniq_pos", "uniq_len",
    "delay_pos", "delay_len", "version", "body_crc")
SCAN_FIELDS = len(SCAN_COLUMNS)
COL = {name: index for index, name in enumerate(SCAN_COLUMNS)}
STOP_END, STOP_BLANK, STOP_INVALID, STOP_FULL = 0, 1, 2, 3
if COMPILED:
    assert _native.SCAN_FIELDS == SCAN_FIELDS and _native.STOP_FULL == STOP_FULL

_MAGIC_V1 = -626843481
_MAGIC_V2 = -626843477
_MAGIC_BLANK = -875286124
# The longest TOPIC and PROPERTIES a record holds (RMQ_MAX_* in c/kernel.h): the reader takes their
# lengths as a signed byte (v1 topic) or short (v2 topic, properties).
_MAX_TOPIC_V1, _MAX_TOPIC_V2, _MAX_PROPERTIES = 127, 32767, 32767
_SIZE_MAGIC = struct.Struct(">ii")
_FIXED = {(b, s): struct.Struct(f">iiiiiqqiq{b}sq{s}siqi") for b in (8, 20) for s in (8, 20)}
_PROPERTY_FIELDS = {b"TAGS": COL["tags_pos"], b"KEYS": COL["keys_pos"],
                    b"UNIQ_KEY": COL["uniq_pos"], b"DELAY": COL["delay_pos"]}


# -- refusing what the C argument parser refuses ---------------------------------------------------

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# CPython's messages for an int out of range of a PyArg_ParseTuple format: "i" (int32), "L" (long
# long), "n" (Py_ssize_t). The twins raise the same OverflowError, before any other refusal, as C does.
_OVERFLOW_MESSAGES = {"L": "int too big to convert",
                      "n": "Python int too large to convert to C ssize_t"}


def _overflow_message(value, kind: str) -> str | None:
    """What the C argument parser says of `value` for format `kind`, or None when it fits."""
    if not isinstance(value, int):
        return None                      # not an int: the twin's own code raises its error
    if not _INT64_MIN <= value <= _INT64_MAX:
        return "Python int too large to convert to C long" if kind == "i" else _OVERFLOW_MESSAGES[kind]
    if kind == "i" and value > 0x7FFFFFFF:
        return "signed integer is greater than maximum"
    if kind == "i" and value < -0x80000000:
        return "signed integer is less than minimum"
    return None


def _refuse_overflow(*values_and_kinds) -> None:
    """Raise the C parser's OverflowError for the first (value, kind) out of range, if any."""
    for value, kind in values_and_kinds:
        message = _overflow_message(value, kind)
        if message is not None:
            raise OverflowError(message)


def scan_buffer(rows: int) -> np.ndarray:
    """An output array for `scan` with room for `rows` records."""
    return np.empty((rows, SCAN_FIELDS), dtype=np.int64)


# -- encode_record ------------------------------------------------------------------------------

def _encode_record_py(topic: bytes, queue_id: int, flag: int, sys_flag: int, queue_offset: int,
                      phy_offset: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
                      store_host: bytes, reconsume_times: int, prepared_offset: int, body,
                      properties, version: int) -> bytearray:
    def refuse_ints():       # the C parser refuses an out-of-range int before anything else
        _refuse_overflow((queue_id, "i"), (flag, "i"), (sys_flag, "i"), (queue_offset, "L"),
                         (phy_offset, "L"), (born_timestamp, "L"), (store_timestamp, "L"),
                         (reconsume_times, "i"), (prepared_offset, "L"), (version, "i"))

    b, s = len(born_host), len(store_host)
    if b not in (8, 20) or s not in (8, 20) or version not in (1, 2):
        refuse_ints()
        raise ValueError("hosts are 8 or 20 bytes and the version is 1 or 2")
    # The reader takes TOPICLENGTH as a signed byte (v1) or short (v2) and PROPERTIESLENGTH as a
    # signed short (spec §2.1): a longer field could never be read back.
    topic_length = len(topic)
    if topic_length > (_MAX_TOPIC_V1 if version == 1 else _MAX_TOPIC_V2):
        refuse_ints()
        raise ValueError(f"topic of {topic_length} bytes does not fit a v{version} record")
    properties_length = len(properties)
    if properties_length > _MAX_PROPERTIES:
        refuse_ints()
        raise ValueError(f"properties of {properties_length} bytes exceed {_MAX_PROPERTIES}")
    body_length = len(body)
    total = 72 + b + s + body_length + version + topic_length + 2 + properties_length
    try:
        record = bytearray(_FIXED[b, s].pack(
            total, _MAGIC_V2 if version == 2 else _MAGIC_V1, zlib.crc32(body) & 0x7FFFFFFF,
            queue_id, flag, queue_offset, phy_offset, sys_flag, born_timestamp, born_host,
            store_timestamp, store_host, reconsume_times, prepared_offset, body_length))
    except struct.error as error:
        refuse_ints()
        if total > 0x7FFFFFFF:
            raise OverflowError("TOTALSIZE does not fit a signed 32-bit field") from None
        raise OverflowError(str(error)) from None
    record += body
    record += topic_length.to_bytes(version, "big")
    record += topic
    record += properties_length.to_bytes(2, "big")
    record += properties
    return record


# -- place --------------------------------------------------------------------------------------

_OFFSETS = struct.Struct(">qq")
_LONG = struct.Struct(">q")


def _place_py(target, position: int, record, queue_offset: int, phy_offset: int,
              timestamp_position: int, store_timestamp: int) -> None:
    if not (_INT64_MIN <= position <= _INT64_MAX and _INT64_MIN <= queue_offset <= _INT64_MAX and
            _INT64_MIN <= phy_offset <= _INT64_MAX and
            _INT64_MIN <= timestamp_position <= _INT64_MAX and
            _INT64_MIN <= store_timestamp <= _INT64_MAX):
        _refuse_overflow((position, "n"), (queue_offset, "L"), (phy_offset, "L"),
                         (timestamp_position, "n"), (store_timestamp, "L"))
    size = len(record)
    if position < 0 or size < 36 or timestamp_position < 36 or timestamp_position > size - 8 or \
            position > len(target) - size:
        raise ValueError("the record does not fit the target at that position")
    view = memoryview(record)
    target[position + 8:position + size] = view[8:]
    _OFFSETS.pack_into(target, position + 20, queue_offset, phy_offset)
    _LONG.pack_into(target, position + timestamp_position, store_timestamp)
    target[position:position + 8] = view[:8]


# -- scan ---------------------------------------------------------------------------------------

def _find_properties_py(buf, props_pos: int, props_len: int, row: list[int]) -> None:
    for column in _PROPERTY_FIELDS.values():
        row[column], row[column + 1] = -1, 0
    data = bytes(buf[props_pos:props_pos + props_len])
    start = 0
    for segment in data.split(b"\x02"):
        separator = segment.find(b"\x01")
        if separator > 0 and separator < len(segment) - 1:
            column = _PROPERTY_FIELDS.get(segment[:separator])
            if column is not None:
                row[column] = props_pos + start + separator + 1
                row[column + 1] = len(segment) - separator - 1
        start += len(segment) + 1


def _property_crc_ok_py(buf, props_pos: int, props_len: int, total: int) -> bool:
    value = None
    for segment in bytes(buf[props_pos:props_pos + props_len]).split(b"\x02"):
        separator = segment.find(b"\x01")
        if separator == 8 and segment[:8] == b"__CRC32#" and len(segment) > 9:
            value = segment[9:]
    if value is None or not value.isascii():
        return False
    expected = 0
    for byte in reversed(value):
        expected = (expected * 10 + byte - 48) & 0xFFFFFFFF
    crc_start = props_pos + props_len - total
    if expected & 0x80000000 or total < 20 or crc_start < 0:
        return False
    return zlib.crc32(buf[crc_start:crc_start + total - 20]) & 0x7FFFFFFF == expected


def _scan_py(buf, start: int, limit: int, check_crc: int, out: np.ndarray):
    if not (_INT64_MIN <= start <= _INT64_MAX and _INT64_MIN <= limit <= _INT64_MAX):
        _refuse_overflow((start, "n"), (limit, "n"))
    try:                                  # the C parser's "i": any object with __index__
        check_crc = operator.index(check_crc)
    except TypeError:
        raise TypeError(f"'{type(check_crc).__name__}' object cannot be interpreted as an integer") \
            from None
    _refuse_overflow((check_crc, "i"))
    end = max(0, min(limit, len(buf)))
    capacity = out.shape[0]
    count = 0
    pos = start
    if start < 0:
        return 0, start, STOP_INVALID, -1
    while True:
        if pos + 8 > end:
            return count, pos, (STOP_END if pos >= end else STOP_INVALID), -1
        total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
        if magic == _MAGIC_BLANK:
            return count, pos, STOP_BLANK, 0
        if count == capacity:
            return count, pos, STOP_FULL, 0
        version = 1 if magic == _MAGIC_V1 else 2 if magic == _MAGIC_V2 else 0
        invalid = (count, pos, STOP_INVALID, -1)
        if version == 0 or total > end - pos or pos + 40 > end:
            return invalid
        sys_flag = int.from_bytes(buf[pos + 36:pos + 40], "big", signed=True)
        born_len = 20 if sys_flag & 0x10 else 8
        store_len = 20 if sys_flag & 0x20 else 8
        body_len_pos = pos + 68 + born_len + store_len
        if body_len_pos + 4 > end:
            return invalid
        n = int.from_bytes(buf[body_len_pos:body_len_pos + 4], "big", signed=True)
        body_len = n if n > 0 else 0
        topic_len_pos = body_len_pos + 4 + body_len
        if topic_len_pos + version > end:
            return invalid
        topic_len = int.from_bytes(buf[topic_len_pos:topic_len_pos + version], "big", signed=True)
        if topic_len < 0:
            return invalid
        topic_pos = topic_len_pos + version
        props_pos = topic_pos + topic_len + 2
        if props_pos > end:
            return invalid
        pl = int.from_bytes(buf[props_pos - 2:props_pos], "big", signed=True)
        props_len = pl if pl > 0 else 0
        if props_pos + props_len > end:
            return invalid
        (_, _, body_crc, queue_id, flag, queue_offset, phy_offset, _, born_ts, _, store_ts, _, _,
         prepared, _) = _FIXED[born_len, store_len].unpack_from(buf, pos)
        if check_crc and check_crc != 2 and body_len and \
                zlib.crc32(buf[body_len_pos + 4:body_len_pos + 4 + body_len]) & 0x7FFFFFFF != body_crc:
            return invalid
        if check_crc == 2 and not _property_crc_ok_py(buf, props_pos, props_len, total):
            return invalid
        if props_pos + props_len - pos != total:
            return count, pos, STOP_INVALID, (total if total > 0 else -1)
        row = [pos, total, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts, store_ts,
               prepared, body_len_pos + 4, body_len, topic_pos, topic_len, props_pos, props_len,
               -1, 0, -1, 0, -1, 0, -1, 0, version, body_crc]
        _find_properties_py(buf, props_pos, props_len, row)
        out[count] = row
        count += 1
        pos += total


# -- index_hashes -------------------------------------------------------------------------------

def _java_string_hash(text: str) -> int:
    """Java's `String.hashCode` (signed int32): the twin of `store.codec.javahash.java_string_hash`.

    Written again here so that the kernel imports nothing of the store (the codecs import the kernel);
    tests/test_kernel.py checks the two agree.
    """
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _index_hashes_py(buf, rows: np.ndarray, out_hashes: np.ndarray, out_rows: np.ndarray) -> int:
    if rows.dtype != np.int64 or rows.size % SCAN_FIELDS or out_hashes.dtype != np.int64 or \
            out_rows.dtype != np.int64 or out_rows.size != out_hashes.size:
        raise ValueError("rows, out_hashes and out_rows must be aligned int64 arrays")
    # The same checks in the same order as the C loop, so that both give the same answer (-1, -2 or
    # the count) and refuse the same forged rows.
    count = 0
    capacity = len(out_hashes)
    size = len(buf)
    for number, row in enumerate(rows.reshape(-1, SCAN_FIELDS).tolist()):
        if row[COL["sys_flag"]] & 0x0C == 0x0C:
            continue
        spans = [(row[COL["uniq_pos"]], row[COL["uniq_len"]], False),
                 (row[COL["keys_pos"]], row[COL["keys_len"]], True)]
        if spans[0][0] < 0 and spans[1][0] < 0:
            continue
        topic_pos, topic_len = row[COL["topic_pos"]], row[COL["topic_len"]]
        if topic_pos < 0 or topic_len < 0 or topic_pos > size or topic_len > size - topic_pos:
            raise ValueError("a row points outside the buffer")
        topic = bytes(buf[topic_pos:topic_pos + topic_len])
        if not topic.isascii():
            return -1
        for position, length, split in spans:
            if position < 0:
                continue
            if length < 0 or position > size or length > size - position:
                raise ValueError("a row points outside the buffer")
            value = bytes(buf[position:position + length])
            for token in (value.split(b" ") if split else [value]):
                if token:
                    if not token.isascii():
                        return -1
                    if count == capacity:
                        return -2
                    out_hashes[count] = _java_string_hash((topic + b"#" + token).decode("ascii"))
                    out_rows[count] = number
                    count += 1
    return count


# -- java_hashes --------------------------------------------------------------------------------

def _java_hashes_py(texts: list[str]) -> np.ndarray:
    return np.array([_java_string_hash(text) for text in texts], dtype=np.int64)


# -- the public functions -----------------------------------------------------------------------

from store.kernel.dispatch_twins import TAGS_CODE_ASK, index_put_py as _index_put_py  # noqa: E402
from store.kernel.dispatch_twins import tags_codes_py as _tags_codes_py  # noqa: E402
from store.kernel.dispatch_twins import unit_runs_py as _unit_runs_py  # noqa: E402
from store.kernel import dispatch_twins as _dispatch_twins  # noqa: E402

assert (_dispatch_twins.SCAN_FIELDS, _dispatch_twins.TAGS_POS_COLUMN, _dispatch_twins.TAGS_LEN_COLUMN,
        _dispatch_twins.QUEUE_ID_COLUMN, _dispatch_twins.QUEUE_OFFSET_COLUMN, _dispatch_twins.PHY_COLUMN,
        _dispatch_twins.SIZE_COLUMN, _dispatch_twins.TOPIC_POS_COLUMN, _dispatch_twins.TOPIC_LEN_COLUMN) \
    == (SCAN_FIELDS, COL["tags_pos"], COL["tags_len"], COL["queue_id"], COL["queue_offset"],
        COL["phy_offset"], COL["size"], COL["topic_pos"], COL["topic_len"])
RUN_FIELDS = _dispatch_twins.RUN_FIELDS

if COMPILED:
    tags_codes = _native.tags_codes
    unit_runs = _native.unit_runs
    index_put = _native.index_put
    encode_record = _native.encode_record
    # store.commitlog.put_path.encode_for_put's common case in one call (None: let the Python path decide).
    encode_put = _native.encode_put
    place = _native.place
    index_hashes = _native.index_hashes
    crc32 = _native.crc32

    def scan(buf, start: int, limit: int, check_crc: int, out: np.ndarray):
        """Walk records of `buf` from `start` (see the module table); returns (count,
        stop_position, stop_kind, stop_size) with `count` rows of `out` filled."""
        return _native.scan(buf, start, limit, check_crc, out)

    def java_hashes(texts: list[str]) -> np.ndarray:
        """Java String.hashCode of each string, as a numpy int64 array of signed int32 values."""
        if type(texts) is not list:
            texts = list(texts)
        return np.frombuffer(_native.java_hashes(texts), dtype=np.int32).astype(np.int64)
else:
    tags_codes = _tags_codes_py
    unit_runs = _unit_runs_py
    index_put = _index_put_py
    encode_record = _encode_record_py
    encode_put = None
    place = _place_py
    index_hashes = _index_hashes_py
    scan = _scan_py
    java_hashes = _java_hashes_py
    crc32 = zlib.crc32                 # the twin of crc32 (what the C's crc32_bytes computes)


def row_key_hashes(buf, rows: np.ndarray):
    """`index_hashes` with its output sized for `rows`: (hashes, row of each) of the rows' index
    keys, in row order; None when a key or topic is not ASCII (the caller's Python way decides)."""
    rows = np.ascontiguousarray(rows)
    capacity = len(rows) + int(((rows[:, COL["keys_len"]] + 1) // 2 + 1).sum())
    hashes = np.empty(capacity, dtype=np.int64)
    numbers = np.empty(capacity, dtype=np.int64)
    count = index_hashes(buf, rows, hashes, numbers)
    return None if count < 0 else (hashes[:count], numbers[:count])
