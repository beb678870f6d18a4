"""`decode_columns`: the pipeline's commit-log columns of many scan rows in one call (C: c/columns.c).

`store.pipeline.commitlog_decoder` hands it the `scan` rows of a batch and the columns it wants (bits
of `want`, below) and gets every variable-length column back Arrow-style: int32 offsets (one row of
len(rows) + 1 per slot) and one value buffer per column, the properties map as per-record entry
counts plus name and value buffers with their own offsets. Values that are not UTF-8 and tagsCodes
the kernel does not compute (non-ASCII TAGS, SCHEDULE_TOPIC_XXXX records) are flagged, and the caller
builds those columns the numpy way. `_decode_columns_py` is the twin: the same outputs and the same
refusals, record by record in Python (tests/test_kernel_columns.py compares them; tests/kernel_fuzz
fuzzes the C).

`walk_headers` (C in the same file, twin `_walk_headers_py`) follows TOTALSIZE alone for
`store.pipeline.commitlog_scan.walk_records` (planning splits, streaming), 8 bytes read per record.
"""

from __future__ import annotations

import struct

import numpy as np

from store.kernel import COL, COMPILED, SCAN_FIELDS, _native, _refuse_overflow

SLOTS = ("born_host", "store_host", "msg_id", "body", "topic", "properties_raw", "tags", "keys",
         "uniq_key", "properties")
SLOT = {name: index for index, name in enumerate(SLOTS)}
N_SLOTS = len(SLOTS)
D_NAMES, D_VALUES, N_DATA = 9, 10, 11       # data buffers: slots 0-8, then map names and values
WANT_RECONSUME, WANT_TAGS_CODE = 1 << 10, 1 << 11
WANT_ALL = (1 << 12) - 1
FLAG_TAGS_ASK = 1 << 11
TAGS_ASK = -(1 << 63)
_HOST_V4_MAX, _HOST_V6_MAX = 26, 52
_UTF8_CHECKED = {SLOT["topic"], SLOT["tags"], SLOT["keys"], SLOT["uniq_key"]}
_SCHEDULE = b"SCHEDULE_TOPIC_XXXX"
_INT32_MAX = 0x7FFFFFFF
_BE32 = struct.Struct(">i")
_PORT = struct.Struct(">I")


def _flat(obj) -> memoryview:
    """A flat byte view of a buffer (as the C's y*/w* see it; an empty one of any shape too)."""
    view = memoryview(obj)
    if view.nbytes == 0:
        return memoryview(bytearray() if not view.readonly else b"")
    return view.cast("B")


def _span_ok(pos: int, n: int, size: int) -> bool:
    return pos >= 0 and n >= 0 and pos <= size and n <= size - pos


def _utf8_ok(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def host_text(host: bytes, v6: bool) -> bytes:
    """`a.b.c.d:port` / `[x:x:x:x:x:x:x:x]:port` (store.pipeline.hosts' rule)."""
    if v6:
        groups = ":".join(format(int.from_bytes(host[i:i + 2], "big"), "x") for i in range(0, 16, 2))
        return f"[{groups}]:{_PORT.unpack_from(host, 16)[0]}".encode()
    return (".".join(str(octet) for octet in host[:4]) + f":{_PORT.unpack_from(host, 4)[0]}").encode()


def _map_pieces(props: bytes) -> list[tuple[bytes, bytes]]:
    """Every (name, value) entry of PROPERTIES in order, repeated names included: pieces split on
    \x02, the name before the first \x01, neither empty."""
    pieces = []
    for piece in props.split(b"\x02"):
        separator = piece.find(b"\x01")
        if 0 < separator < len(piece) - 1:
            pieces.append((piece[:separator], piece[separator + 1:]))
    return pieces


def _map_entries(props: bytes) -> list[tuple[bytes, bytes]]:
    entries: dict[bytes, bytes] = {}
    for name, value in _map_pieces(props):
        entries.pop(name, None)       # the last of a name, in its place
        entries[name] = value
    return list(entries.items())


def _row_needs(r: list[int], size: int) -> list[int] | None:
    """The bytes each data buffer takes for row r (and its most map entries), None when a span of
    the row is outside the buffer."""
    born_w = 20 if r[COL["sys_flag"]] & 0x10 else 8
    store_w = 20 if r[COL["sys_flag"]] & 0x20 else 8
    ok = (_span_ok(r[COL["pos"]], 56 + born_w + store_w, size) and r[COL["body_pos"]] >= 16
          and _span_ok(r[COL["body_pos"]] - 16, 4, size)
          and _span_ok(r[COL["body_pos"]], r[COL["body_len"]], size)
          and _span_ok(r[COL["topic_pos"]], r[COL["topic_len"]], size)
          and _span_ok(r[COL["props_pos"]], r[COL["props_len"]], size))
    for name in ("tags", "keys", "uniq"):
        if ok and r[COL[name + "_pos"]] >= 0:
            ok = _span_ok(r[COL[name + "_pos"]], r[COL[name + "_len"]], size)
    if not ok:
        return None
    props = r[COL["props_len"]]
    return ([_HOST_V6_MAX if born_w == 20 else _HOST_V4_MAX, _HOST_V6_MAX if store_w == 20 else _HOST_V4_MAX,
             56 if store_w == 20 else 32, r[COL["body_len"]], r[COL["topic_len"]], props]
            + [r[COL[name + "_len"]] if r[COL[name + "_pos"]] >= 0 else 0 for name in ("tags", "keys", "uniq")]
            + [props, props, (props + 1) // 4])


def _wants_data(want: int, d: int) -> bool:
    return bool(want & (1 << (d if d < SLOT["properties"] else SLOT["properties"])))


def _outputs(alloc, sizes: list[int]) -> list[tuple[object, memoryview]]:
    """alloc(size) for every output, judged as the C judges them."""
    out = []
    for size in sizes:
        obj = alloc(size)
        view = _flat(obj)
        if view.readonly:
            raise BufferError("Object is not writable.")
        if view.nbytes < size or (size and np.frombuffer(view, np.uint8).ctypes.data % 8):
            raise ValueError("alloc must give a writable, aligned buffer of the size asked")
        out.append((obj, view))
    return out


def _decode_columns_py(buf, rows, want, alloc):
    _refuse_overflow((want, "i"))
    view = _flat(buf)
    rows_view = _flat(rows)
    if rows_view.nbytes % (SCAN_FIELDS * 8) or (rows_view.nbytes and not _aligned(rows)):
        raise ValueError("rows must be an aligned whole number of scan rows")
    if want < 0 or want > WANT_ALL:
        raise ValueError("want holds unknown column bits")
    table = np.frombuffer(rows_view, dtype=np.int64).reshape(-1, SCAN_FIELDS).tolist()
    size = len(view)
    n = len(table)
    need = [0] * N_DATA
    entries_bound = 0
    for r in table:
        add = _row_needs(r, size)
        if add is None:
            raise ValueError("a row points outside the buffer")
        for d in range(N_DATA):
            if _wants_data(want, d):
                need[d] += add[d]
                if need[d] > _INT32_MAX:
                    raise ValueError("a column of the batch exceeds 2 GiB")
        if want & (1 << SLOT["properties"]):
            entries_bound += add[N_DATA]
    map_wanted = bool(want & (1 << SLOT["properties"]))
    sizes = ([N_SLOTS * (n + 1) * 4] + [need[d] if _wants_data(want, d) else 0 for d in range(N_DATA)]
             + [(entries_bound + 1) * 4 if map_wanted else 0] * 2
             + [n * 4 if want & WANT_RECONSUME else 0, n * 8 if want & WANT_TAGS_CODE else 0])
    outputs = _outputs(alloc, sizes)
    offsets = np.zeros((N_SLOTS, n + 1), dtype=np.int32)
    data = [bytearray() for _ in range(N_DATA)]
    names_off, values_off = [0], [0]
    reconsume = np.zeros(n, dtype=np.int32)
    tags = np.zeros(n, dtype=np.int64)
    flags = 0
    entries = 0
    for i, r in enumerate(table):
        pos, sys_flag = r[COL["pos"]], r[COL["sys_flag"]]
        born_w = 20 if sys_flag & 0x10 else 8
        store_at = pos + 56 + born_w
        store_w = 20 if sys_flag & 0x20 else 8
        values = {
            SLOT["born_host"]: lambda: host_text(bytes(view[pos + 48:pos + 48 + born_w]), born_w == 20),
            SLOT["store_host"]: lambda: host_text(bytes(view[store_at:store_at + store_w]), store_w == 20),
            SLOT["msg_id"]: lambda: (bytes(view[store_at:store_at + store_w])
                                     + (r[COL["phy_offset"]] & (2**64 - 1)).to_bytes(8, "big")).hex().upper().encode(),
        }
        for slot, field in ((SLOT["body"], "body"), (SLOT["topic"], "topic"), (SLOT["properties_raw"], "props"),
                            (SLOT["tags"], "tags"), (SLOT["keys"], "keys"), (SLOT["uniq_key"], "uniq")):
            at, length = r[COL[field + "_pos"]], r[COL[field + "_len"]]
            values[slot] = (lambda at=at, length=length:
                            bytes(view[at:at + length]) if at >= 0 and length > 0 else b"")
        for slot in range(SLOT["properties"]):
            if want & (1 << slot):
                value = values[slot]()
                if slot in _UTF8_CHECKED and not _utf8_ok(value):
                    flags |= 1 << slot
                data[slot] += value
                offsets[slot, i + 1] = len(data[slot])
        if map_wanted:
            at, length = r[COL["props_pos"]], r[COL["props_len"]]
            props = bytes(view[at:at + length])
            # Flagged when any entry of the record is not UTF-8, a dropped (repeated) name's too,
            # as the C checks each entry when it reads it: the flag only sends the column to the
            # numpy path, whose answer is the same either way.
            if not _utf8_ok(props) and not all(
                    _utf8_ok(name) and _utf8_ok(value) for name, value in _map_pieces(props)):
                flags |= 1 << SLOT["properties"]
            for name, value in _map_entries(props):
                data[D_NAMES] += name
                data[D_VALUES] += value
                names_off.append(len(data[D_NAMES]))
                values_off.append(len(data[D_VALUES]))
                entries += 1
            offsets[SLOT["properties"], i + 1] = entries
        if want & WANT_RECONSUME:
            reconsume[i] = _BE32.unpack_from(view, r[COL["body_pos"]] - 16)[0]
        if want & WANT_TAGS_CODE:
            topic_at = r[COL["topic_pos"]]
            if r[COL["topic_len"]] == len(_SCHEDULE) and bytes(view[topic_at:topic_at + len(_SCHEDULE)]) == _SCHEDULE:
                flags |= FLAG_TAGS_ASK
            tags[i], ask = _tags_code(view, r[COL["tags_pos"]], r[COL["tags_len"]])
            flags |= FLAG_TAGS_ASK if ask else 0
    filled = [offsets.tobytes(), *data]
    if map_wanted:
        filled += [np.array(names_off, np.int32).tobytes(), np.array(values_off, np.int32).tobytes()]
    else:
        filled += [b"", b""]
    filled += [reconsume.tobytes() if want & WANT_RECONSUME else b"", tags.tobytes() if want & WANT_TAGS_CODE else b""]
    for (_, out), content in zip(outputs, filled):
        out[:len(content)] = content
    objects = [obj for obj, _ in outputs]
    return (objects[0], tuple(objects[1:1 + N_DATA]), *objects[1 + N_DATA:],
            tuple(len(d) for d in data) + (entries,), flags)


def _tags_code(view, at: int, length: int) -> tuple[int, bool]:
    """(tagsCode, asked) of one TAGS span: Java's hash of ASCII, TAGS_ASK otherwise, 0 without TAGS."""
    if at < 0:
        return 0, False
    value = bytes(view[at:at + length])
    if not value.isascii():
        return TAGS_ASK, True
    h = 0
    for byte in value:
        h = (31 * h + byte) & 0xFFFFFFFF
    return (h - (1 << 32) if h & 0x80000000 else h), False


WALK_STOP, WALK_FILE, WALK_BLANK, WALK_ZEROS, WALK_INVALID, WALK_FULL = range(6)
_MAGICS = (-626843481, -626843477)
_BLANK = -875286124
_HEADER = struct.Struct(">ii")


def _walk_headers_py(buf, start: int, stop: int, out):
    _refuse_overflow((start, "n"), (stop, "n"))
    view = _flat(buf)
    out_view = _flat(out)
    if out_view.nbytes % 8 or (out_view.nbytes and not _aligned(out)):
        raise ValueError("out must be an aligned int64 array")
    if start < 0:
        raise ValueError("start must not be negative")
    positions = np.frombuffer(out_view, dtype=np.int64) if out_view.nbytes else np.zeros(0, np.int64)
    size = len(view)
    count, pos = 0, start
    while True:
        if pos >= stop:
            return count, pos, WALK_STOP if pos < size else WALK_FILE
        if pos > size - 8:
            return count, pos, WALK_INVALID
        total, magic = _HEADER.unpack_from(view, pos)
        if magic in _MAGICS and total >= 91 and total <= size - pos:
            if count == positions.shape[0]:
                return count, pos, WALK_FULL
            positions[count] = pos
            count += 1
            pos += total
            continue
        kind = WALK_BLANK if magic == _BLANK else WALK_ZEROS if total == 0 and magic == 0 else WALK_INVALID
        return count, pos, kind


def _aligned(rows) -> bool:
    """Whether the rows' buffer starts on an 8-byte boundary (as the C requires)."""
    try:
        return np.frombuffer(rows, dtype=np.uint8).ctypes.data % 8 == 0
    except (TypeError, ValueError):
        return False


decode_columns = _native.decode_columns if COMPILED else _decode_columns_py
walk_headers = _native.walk_headers if COMPILED else _walk_headers_py
