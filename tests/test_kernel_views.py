"""kernel.view_columns (c/views.c) against its twin (store.kernel.views), and the pipeline's view
columns (`SegmentReader(views=True)`) against the copied ones, on the real fixtures, damaged copies
and synthetic records with the odd cases; a value past 2 GiB in a sparse segment."""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from store import kernel
from store.kernel import views
from store.pipeline.commitlog_decoder import COMMITLOG_COLUMNS, VIEW_TYPES, RecordDecoder, ScanLayout
from store.pipeline.commitlog_scan import RecordScanner
from store.pipeline.frames import commitlog_table, read_commitlog
from store.pipeline.segment_reader import map_file
from store.pipeline.synthetic import SyntheticMessage, encode
from tests.pipeline_util import fixture_dirs, fixture_id
from tests.test_kernel_columns import ODD, _records, _rows, _segments

native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
FIXTURES = fixture_dirs()
EVERY = sum(views.VIEW_WANT.values())
WANTS = [EVERY] + list(views.VIEW_WANT.values()) + [views.VIEW_WANT["body"] | views.VIEW_WANT["uniq_key"]]


def _both(buf, rows, want, size=None):
    size = 16 * len(rows) * bin(want & EVERY).count("1") if size is None else size

    def run(function):
        out = bytearray(b"\xa5" * size)
        try:
            return ("ok", function(buf, rows, want, out), bytes(out))
        except Exception as error:          # both must refuse alike
            return ("raise", type(error).__name__, str(error))
    return run(kernel._native.view_columns), run(views._view_columns_py)


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
def test_c_equals_twin_on_odd_and_damaged_records():
    buf = _records(ODD * 2)
    rows = _rows(buf)
    for want in WANTS:
        c, py = _both(buf, rows, want)
        assert c == py and c[0] == "ok", want
    assert _both(buf, rows, EVERY)[0][1] == views.VIEW_WANT["keys"]       # KEYS "\xff\xfe bad"
    rng = random.Random(5)
    damaged = bytearray(buf)
    for _ in range(60):                       # text, separators and high bytes inside the records
        damaged[rng.randrange(len(damaged))] = rng.choice([0x01, 0x02, 0x80, 0xC3, 0xFF, 0x00, 0x41])
    c, py = _both(np.frombuffer(bytes(damaged), np.uint8), rows, EVERY)
    assert c == py and c[0] == "ok"


@native
def test_refusals_are_the_twins():
    buf = _records(ODD[:3])
    rows = _rows(buf)
    cases = []
    for column, value in (("body_pos", -1), ("body_len", len(buf)), ("topic_pos", len(buf) + 1),
                          ("props_len", 2**62), ("uniq_len", -1), ("tags_pos", len(buf))):
        forged = rows.copy()
        forged[2, kernel.COL[column]] = value          # row 2 has TAGS, KEYS and UNIQ_KEY
        cases.append((buf, forged, EVERY, None))
    cases += [(buf, rows, 1 << 2, None), (buf, rows, -1, None), (buf, rows, EVERY | (1 << 9), None),
              (buf, rows.reshape(-1)[1:], EVERY, None), (buf, rows, EVERY, 16), (buf, rows, EVERY, 0)]
    for case in cases:
        c, py = _both(*case)
        assert c == py and c[0] == "raise", (case[2:], c, py)
    forged = rows.copy()
    forged[2, kernel.COL["tags_pos"]] = len(buf)       # an empty value at the end: no refusal
    forged[2, kernel.COL["tags_len"]] = 0
    assert _both(buf, forged, EVERY)[0][0] == "ok"


def test_twin_alone_builds_the_layout():
    # The twin alone (RMQ_KERNEL=python): inline short values, prefix + buffer + offset for long ones.
    buf = _records([SyntheticMessage(topic="T", body=b"0123456789abcdefXYZ", properties_raw=b"TAGS\x01t")])
    rows = _rows(buf)
    out = bytearray(16 * 3)
    want = views.VIEW_WANT["body"] | views.VIEW_WANT["topic"] | views.VIEW_WANT["tags"]
    assert views._view_columns_py(buf, rows, want, out) == 0
    body_at = int(rows[0, kernel.COL["body_pos"]])
    assert bytes(out[:16]) == (19).to_bytes(4, "little") + b"0123" + bytes(4) + body_at.to_bytes(4, "little")
    assert bytes(out[16:32]) == (1).to_bytes(4, "little") + b"T" + bytes(11)
    assert bytes(out[32:]) == (1).to_bytes(4, "little") + b"t" + bytes(11)


def _pairs(buf, name, scanner=RecordScanner, use_native=True):
    copied = RecordDecoder(buf, 1 << 30, name, native=use_native)
    viewed = RecordDecoder(buf, 1 << 30, name, native=use_native, views=True)
    for rows in scanner(buf).batches():
        yield (copied.batch(ScanLayout(rows), list(COMMITLOG_COLUMNS)),
               viewed.batch(ScanLayout(rows), list(COMMITLOG_COLUMNS)))


def _same_values(copied: pa.RecordBatch, viewed: pa.RecordBatch) -> None:
    viewed.validate(full=True)
    for name in COMMITLOG_COLUMNS:
        column = viewed.column(name)
        if name in VIEW_TYPES:
            assert column.type == VIEW_TYPES[name], name
            column = pc.cast(column, COMMITLOG_COLUMNS[name])
        assert column.equals(copied.column(name)), name


@pytest.mark.parametrize("use_native", [pytest.param(True, marks=native), False])
@pytest.mark.parametrize("fixture", FIXTURES, ids=[fixture_id(f) for f in FIXTURES])
def test_view_columns_hold_the_copied_values_on_fixtures(fixture, use_native):
    for buf, path, scanner in _segments(fixture):
        for copied, viewed in _pairs(buf, os.path.basename(path), scanner, use_native):
            _same_values(copied, viewed)


@pytest.mark.parametrize("use_native", [pytest.param(True, marks=native), False])
def test_view_columns_of_odd_records_hold_the_copied_values(use_native):
    # Text that is not UTF-8 (KEYS here) is built the copying way, then cast: the same values.
    buf = _records(ODD * 3)
    (copied, viewed), = _pairs(buf, "00000000001073741824", use_native=use_native)
    _same_values(copied, viewed)
    assert viewed.column("keys").type == pa.string_view()
    assert viewed.column("tags")[3].as_py() == "\u00e9t\u00e9"


def test_views_keep_the_map_alive_and_frames_take_them(tmp_path):
    data = bytearray()
    for i in range(40):
        data += encode(SyntheticMessage(topic=f"Topic{i % 3}", body=bytes([65 + i % 26]) * (i * 7),
                                        properties_raw=b"TAGS\x01t%d\x02KEYS\x01k%d" % (i, i)), len(data))
    os.makedirs(tmp_path / "commitlog")
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(data) + bytes(4096))
    viewed = commitlog_table(tmp_path, views=True)
    copied = commitlog_table(tmp_path)
    assert viewed.schema.field("body").type == pa.binary_view()
    for batch_v, batch_c in zip(viewed.to_batches(), copied.to_batches(), strict=True):
        _same_values(batch_c, batch_v)
    frame = read_commitlog(tmp_path, columns=["body", "keys"], views=True)
    assert frame["body"][39] == bytes([65 + 39 % 26]) * (39 * 7) and frame["keys"][5] == "k5"


@native
def test_a_value_past_two_gib_points_into_the_second_buffer(tmp_path):
    # A sparse segment (nothing written but one record): the record at 2 GiB + 100 is buffer 2 of
    # the slices [k << 30, (k + 2) << 30), at offset 100.
    record = encode(SyntheticMessage(topic="FarTopic", body=b"far body " * 5, properties_raw=b"KEYS\x01far"), 0)
    path = tmp_path / f"{0:020d}"
    at = (2 << 30) + 100
    with open(path, "wb") as handle:
        handle.truncate(at + len(record) + 4096)
        handle.seek(at)
        handle.write(record)
    buf = map_file(str(path))
    rows = kernel.scan_buffer(1)
    assert kernel.scan(buf, at, len(buf), 0, rows)[0] == 1
    assert views.buffer_slices(len(buf))[2] == (2 << 30, len(buf))
    c, py = _both(buf, rows, EVERY)
    assert c == py and c[0] == "ok"
    decoder = RecordDecoder(buf, 0, path.name, views=True)
    batch = decoder.batch(ScanLayout(rows), ["body", "topic", "keys"])
    batch.validate(full=True)
    assert batch.column("body")[0].as_py() == b"far body " * 5
    assert batch.column("topic")[0].as_py() == "FarTopic" and batch.column("keys")[0].as_py() == "far"


@native
def test_a_high_byte_anywhere_in_text_of_any_length_is_judged_as_the_twin():
    # utf8_ok's ASCII pass reads words of eight (the last one overlapping): a byte >= 0x80 at each
    # place of topics and property values of every length up to 70 must flag as the twin flags.
    messages = []
    for length in range(1, 71):
        for at in sorted({0, length // 2, length - 1}):
            text = bytearray(b"a" * length)
            text[at] = 0xE9                    # not UTF-8 alone; "\xc3\xa9" below is
            messages.append(SyntheticMessage(topic="T" * length, properties_raw=b"KEYS\x01" + bytes(text)))
            good = b"a" * max(0, length - 2) + "\u00e9".encode()
            messages.append(SyntheticMessage(properties_raw=b"TAGS\x01" + good + b"\x02KEYS\x01" + good))
    flagged = 0
    for message in messages:                   # one record a call: a column's flag is per call
        buf = _records([message])
        rows = _rows(buf)
        c, py = _both(buf, rows, EVERY)
        assert c == py and c[0] == "ok", message
        flagged += c[1] == views.VIEW_WANT["keys"]
    assert flagged == len(messages) // 2
    buf = _records(messages)
    (copied, viewed), = _pairs(buf, "00000000001073741824")
    _same_values(copied, viewed)


def _mapped_rss_kib(path: str) -> int:
    """Resident KiB of this process's maps of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if "-" in line.split(" ", 1)[0]:          # a mapping's header line
                inside = line.rstrip().endswith(path)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_a_filtered_read_that_keeps_nothing_releases_the_pages_too(tmp_path):
    from bench.decode_bench import write_store
    from store.pipeline.commitlog_decoder import RowFilter
    from store.pipeline.segment_reader import SegmentReader, SegmentSplit

    path = write_store(str(tmp_path), 16)[0]
    reader = SegmentReader(SegmentSplit(path, 0), columns=["phy_offset"], batch_bytes=512 << 10,
                           row_filter=RowFilter(frozenset({"NoSuchTopic"})))
    peak = 0
    real_mask = reader.row_filter.mask

    def mask(decoder, part):                   # sampled as each window is filtered
        nonlocal peak
        peak = max(peak, _mapped_rss_kib(path))
        return real_mask(decoder, part)

    reader.row_filter = type("Sampled", (), {"mask": staticmethod(mask)})()
    assert list(reader.batches()) == [] and reader.end.records > 6000
    assert peak <= 4 * 1024, peak


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
@pytest.mark.parametrize("use_views", [False, True])
def test_a_reader_keeps_only_the_batches_in_flight_resident(tmp_path, use_views):
    # A whole 8 MiB segment read in 512 KiB batches: the pages behind the decoded batches are
    # released, so the segment's map never holds more than a few batches, and the values read
    # after the release (views point into released pages) are still the file's.
    from bench.decode_bench import write_store
    from store.pipeline.segment_reader import SegmentReader, SegmentSplit

    path = write_store(str(tmp_path), 16)[0]
    peak, batches = 0, []
    for batch in SegmentReader(SegmentSplit(path, 0), columns=["body", "phy_offset"], batch_bytes=512 << 10,
                               views=use_views).batches():
        peak = max(peak, _mapped_rss_kib(path))
        batches.append(batch)
    assert len(batches) >= 12 and peak <= 4 * 1024, peak
    with open(path, "rb") as handle:
        data = handle.read()
    first, last = batches[0], batches[-1]
    for batch in (first, last):
        at = batch.column("phy_offset")[0].as_py()
        body = batch.column("body")[0].as_py()
        assert data.find(body, at) > at
