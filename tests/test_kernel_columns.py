"""kernel.decode_columns (c/columns.c) against its twin (store.kernel.columns), and the pipeline's
columns built with it against the numpy path, on the real fixtures, damaged copies of them and
synthetic records with the odd cases (IPv6 hosts, repeated property names, text that is not UTF-8,
non-ASCII TAGS, SCHEDULE_TOPIC_XXXX)."""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pytest

from store import kernel
from store.kernel import columns
from store.pipeline.commitlog_decoder import COMMITLOG_COLUMNS, RecordDecoder, ScanLayout
from store.pipeline.commitlog_scan import RecordScanner
from store.pipeline.dledger_scan import DLedgerScanner
from store.pipeline.layout import list_commit_log
from store.pipeline.segment_reader import map_file
from store.pipeline.synthetic import SyntheticMessage, encode
from tests.kernel_fuzz.columns_target import _filled
from tests.pipeline_util import fixture_dirs, fixture_id

native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
FIXTURES = fixture_dirs()
WANTS = [columns.WANT_ALL, 0] + [1 << bit for bit in range(12)] + [0b101010101010, 0b010101010101]


def _segments(fixture) -> list[tuple[np.ndarray, str, object]]:
    """(bytes, path, scanner factory) of every commit-log file (DLedger data files too)."""
    found = []
    for segment in list_commit_log(str(fixture / "store")):
        if segment.size_bytes:
            buf = map_file(segment.path)
            scanner = (lambda b, s=segment: DLedgerScanner(b, s.file_from_offset, s.path)) if segment.dledger \
                else RecordScanner
            found.append((buf, segment.path, scanner))
    return found


def _rows(buf, scanner=RecordScanner) -> np.ndarray:
    parts = list(scanner(buf).batches())
    return np.concatenate(parts) if parts else kernel.scan_buffer(0)


def _both(buf, rows, want, alloc=bytearray):
    def run(function):
        try:
            return ("ok", _filled(function(buf, rows, want, alloc)))
        except Exception as error:          # both must refuse alike
            return ("raise", type(error).__name__, str(error))
    return run(kernel._native.decode_columns), run(columns._decode_columns_py)


def _records(messages: list[SyntheticMessage]) -> np.ndarray:
    data = bytearray()
    for message in messages:
        data += encode(message, len(data))
    return np.frombuffer(bytes(data), dtype=np.uint8)


ODD = [
    SyntheticMessage(born_host="[2001:db8::1]:1234", store_host="[::ffff:1.2.3.4]:65535", version=2),
    SyntheticMessage(store_host="[fe80:0:0:0:1:22:333:4444]:0", properties_raw=b"A\x011\x02B\x012\x02A\x013"),
    SyntheticMessage(properties_raw=b"TAGS\x01x\x02TAGS\x01y\x02\x01v\x02n\x01\x02\x02KEYS\x01a b\x02UNIQ_KEY\x01u"),
    SyntheticMessage(topic="T\u00e9", properties_raw=b"TAGS\x01\xc3\xa9t\xc3\xa9\x02KEYS\x01k"),
    SyntheticMessage(topic="SCHEDULE_TOPIC_XXXX", properties_raw=b"DELAY\x013\x02TAGS\x01t\x02REAL_TOPIC\x01x"),
    SyntheticMessage(properties_raw=b"KEYS\x01\xff\xfe bad\x02N\xe9\x01\x80"),
    SyntheticMessage(properties_raw=b"", body=b""),
    SyntheticMessage(properties_raw=b"\x02\x02\x01\x01\x02", reconsume_times=-7),
    SyntheticMessage(born_host="255.255.255.255:2147483647", store_host="0.0.0.0:1"),
]


@native
@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_c_equals_twin_on_fixtures(fixture):
    compared = 0
    for buf, _, scanner in _segments(fixture):
        rows = _rows(buf, scanner)
        for want in WANTS:
            c, py = _both(buf, rows, want)
            assert c == py and c[0] == "ok", want
            compared += len(rows)
    assert compared


@native
def test_a_dropped_repeated_entry_that_is_not_utf8_flags_the_map_in_both():
    """Found by the fuzz driver: a repeated name whose first (dropped) value is not UTF-8. The C
    checks each entry as it reads it, so the map column is flagged (the numpy path then builds it,
    with the same answer); the twin flags it alike."""
    buf = _records([SyntheticMessage(properties_raw=b"A\x01\xd1x\x02B\x012\x02A\x01ok")])
    rows = _rows(buf)
    c, py = _both(buf, rows, columns.WANT_ALL)
    assert c == py and c[0] == "ok"
    assert c[1][-1] & (1 << columns.SLOT["properties"])
    fast, = _batches(buf, "00000000001073741824", True)
    slow, = _batches(buf, "00000000001073741824", False)
    assert fast.column("properties").equals(slow.column("properties"))
    assert fast.column("properties")[0].as_py() == [("B", "2"), ("A", "ok")]


@native
def test_c_equals_twin_on_odd_records():
    buf = _records(ODD)
    rows = _rows(buf)
    assert len(rows) == len(ODD)
    for want in WANTS:
        c, py = _both(buf, rows, want)
        assert c == py and c[0] == "ok", want
    flags = _both(buf, rows, columns.WANT_ALL)[0][1][-1]
    slot = columns.SLOT
    assert flags == (1 << slot["keys"]) | (1 << slot["properties"]) | columns.FLAG_TAGS_ASK


@native
@pytest.mark.parametrize("seed", range(6))
def test_c_equals_twin_on_damaged_fixture_copies(seed):
    rng = random.Random(seed)
    fixture = FIXTURES[seed % len(FIXTURES)]
    buf, _, scanner = _segments(fixture)[0]
    damaged = bytearray(buf[: min(len(buf), 1 << 20)])
    rows = _rows(np.frombuffer(bytes(damaged), np.uint8), scanner)
    for _ in range(200):                       # bytes inside records: text, hosts, properties
        damaged[rng.randrange(len(damaged))] = rng.choice([0x01, 0x02, 0x80, 0xC3, 0xFF, 0x00, 0x41])
    data = np.frombuffer(bytes(damaged), np.uint8)
    for want in (columns.WANT_ALL, 1 << columns.SLOT["properties"]):
        c, py = _both(data, rows, want)
        assert c == py and c[0] == "ok"
    rescanned = _rows(data, scanner)                    # and the rows scan finds in the damaged copy
    assert _both(data, rescanned, columns.WANT_ALL)[0] == _both(data, rescanned, columns.WANT_ALL)[1]


@native
def test_refusals_are_the_twins():
    buf = _records(ODD[:3])
    rows = _rows(buf)
    cases = []
    for column, value in (("body_pos", 10), ("body_len", len(buf)), ("topic_pos", -1), ("pos", len(buf) - 60),
                          ("tags_len", -1), ("props_len", 2**62), ("uniq_pos", len(buf) + 1)):
        forged = rows.copy()
        forged[2, kernel.COL[column]] = value          # row 2 has TAGS, KEYS and UNIQ_KEY
        cases.append((buf, forged, columns.WANT_ALL, bytearray))
    cases.append((buf, rows, 1 << 12, bytearray))
    cases.append((buf, rows, -1, bytearray))
    cases.append((buf, rows.reshape(-1)[1:], 1, bytearray))
    cases.append((buf, rows, columns.WANT_ALL, lambda size: bytearray(max(0, size - 1))))
    cases.append((buf, rows, columns.WANT_ALL, lambda size: bytes(size)))
    for case in cases:
        c, py = _both(*case[:3], alloc=case[3])
        assert c == py and c[0] == "raise", (c, py)
    assert _both(buf, rows, columns.WANT_ALL, alloc=lambda size: bytearray(size + 5))[0][0] == "ok"


def _batches(buf, name: str, use_native: bool, scanner=RecordScanner):
    decoder = RecordDecoder(buf, 1 << 30, name, native=use_native)
    return [decoder.batch(ScanLayout(rows), list(COMMITLOG_COLUMNS)) for rows in scanner(buf).batches()]


@native
@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_pipeline_columns_equal_the_numpy_path(fixture):
    for buf, path, scanner in _segments(fixture):
        name = os.path.basename(path)
        for fast, slow in zip(_batches(buf, name, True, scanner), _batches(buf, name, False, scanner),
                              strict=True):
            fast.validate(full=True)
            assert fast.schema.equals(slow.schema)
            for column in COMMITLOG_COLUMNS:
                assert fast.column(column).equals(slow.column(column)), column


@native
def test_pipeline_odd_records_equal_the_numpy_path():
    buf = _records(ODD * 3)
    fast, = _batches(buf, "00000000001073741824", True)
    slow, = _batches(buf, "00000000001073741824", False)
    fast.validate(full=True)
    for column in COMMITLOG_COLUMNS:
        assert fast.column(column).equals(slow.column(column)), column
    assert fast.column("born_host")[0].as_py() == "[2001:db8:0:0:0:0:0:1]:1234"
    assert fast.column("properties")[1].as_py() == [("B", "2"), ("A", "3")]
    assert fast.column("tags")[3].as_py() == "\u00e9t\u00e9"


def test_twin_alone_decodes_records():
    # The twin alone (RMQ_KERNEL=python: store.kernel.columns.decode_columns is the twin).
    buf = _records(ODD[:2])
    rows = _rows(buf)
    offsets, data, *_ , used, flags = columns._decode_columns_py(buf, rows, columns.WANT_ALL, bytearray)
    first_born = np.frombuffer(offsets, np.int32)[1]
    assert bytes(data[columns.SLOT["born_host"]])[:first_born] == b"[2001:db8:0:0:0:0:0:1]:1234"
    assert flags == 0 and used[columns.N_DATA] == 4          # TAGS, KEYS; B, A (the last A)


def _walks(buf, start, stop):
    from store.pipeline.commitlog_scan import _walk_by_scan, _walk_headers
    results = []
    for walk in (_walk_headers, _walk_by_scan):
        r = walk(buf, start, min(stop, len(buf)))
        results.append((r.positions.tolist(), r.sizes.tolist(), r.magics.tolist(), r.end_position, r.end_kind))
    return results


@native
@pytest.mark.parametrize("seed", range(4))
def test_walk_headers_is_the_scan_walk(seed):
    """walk_records' C header walk and its walk by scan runs agree, on fixtures and damaged copies."""
    rng = random.Random(seed)
    for fixture in FIXTURES:
        for buf, _, scanner in _segments(fixture):
            if scanner is not RecordScanner:
                continue
            data = bytearray(buf[: min(len(buf), 256 << 10)])
            for _ in range(seed * 3):                      # damaged: headers and bodies
                data[rng.randrange(len(data))] = rng.choice([0x00, 0xFF, 0xDA, 0xCB, 0x7F])
            if seed == 3:
                del data[rng.randrange(len(data)):]        # cut
            data = np.frombuffer(bytes(data), np.uint8)
            starts = [0] + list(_walks(data, 0, len(data))[0][0][1:4])
            for start in starts:
                for stop in (len(data), len(data) + 9, start + 1, rng.randrange(len(data) + 1)):
                    fast, slow = _walks(data, start, stop)
                    assert fast == slow, (fixture, start, stop)


@native
def test_walk_headers_c_equals_twin_and_refuses_alike():
    buf = np.frombuffer(bytes(_records(ODD)) + bytes(16), np.uint8)
    for start, stop, capacity in ((0, len(buf), 64), (0, len(buf), 2), (0, 10**9, 0), (5, len(buf), 4),
                                  (len(buf), len(buf) + 1, 1), (len(buf) - 3, len(buf), 1), (-1, 5, 1)):
        got = []
        for walk in (kernel._native.walk_headers, columns._walk_headers_py):
            out = np.full(capacity, -7, np.int64)
            try:
                got.append(("ok", walk(buf, start, stop, out), out.tolist()))
            except Exception as error:
                got.append(("raise", type(error).__name__, str(error)))
        assert got[0] == got[1], (start, stop, capacity)
    out = np.zeros(3, np.int64)
    for walk in (kernel._native.walk_headers, columns._walk_headers_py):
        with pytest.raises(ValueError, match="aligned int64"):
            walk(buf, 0, 10, out.view(np.uint8)[1:9])


@pytest.mark.parametrize("fixture", FIXTURES[:3], ids=[fixture_id(f) for f in FIXTURES[:3]])
def test_decode_threads_give_the_sequential_batches(fixture):
    from store.pipeline.segment_reader import SegmentReader, plan_splits
    many = False
    for split in plan_splits(list_commit_log(str(fixture / "store"))):
        readers = [SegmentReader(split, batch_bytes=2048, decode_threads=threads) for threads in (1, 2, 3)]
        batches = [list(reader.batches()) for reader in readers]
        many |= len(batches[0]) > 2
        for other in batches[1:]:
            assert len(other) == len(batches[0]) and all(a.equals(b) for a, b in zip(batches[0], other))
        assert readers[1].end == readers[0].end == readers[2].end
    assert many


def test_a_scan_error_comes_after_the_batches_before_it():
    from store.pipeline.segment_reader import SegmentReader, SegmentSplit
    buf = _records(ODD)
    rows = _rows(buf)

    def parts():
        for i in range(3):
            yield ScanLayout(rows[i:i + 1])
        raise RuntimeError("damaged at offset 123")

    reader = SegmentReader(SegmentSplit("x", 0), columns=["topic", "phy_offset"], decode_threads=2)
    got = []
    with pytest.raises(RuntimeError, match="offset 123"):
        for batch in reader._decoded_in_threads(parts(), RecordDecoder(buf, 0, "x")):
            got.append(batch.column("topic")[0].as_py())
    assert got == ["TopicA", "TopicA", "TopicA"]
