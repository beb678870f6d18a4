"""store.pipeline.segment_reader: the windows scanned in the decode threads (`_scanned_in_threads`)
give the sequential reader's batches and end.

Each case writes a segment of records of random sizes, damages it in one way, and reads it with
`decode_threads` 1 (`RecordScanner` on the reader's thread, the reference), 2 and 3, at window sizes
from smaller than a record to larger than the segment, whole and split. The damages are the ways a
hand-over can stop: a BLANK, a record the scan refuses (bad magic, a length that does not add up, a
body CRC when checked), a record larger than a window, zeros, a split's stop inside a record, and a
topic filter that leaves windows empty. Also: closing the generator early returns, and a failing
decode raises after the batches before it.
"""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from store import kernel
from store.pipeline.commitlog_decoder import RecordDecoder, RowFilter
from store.pipeline.layout import SegmentFile
from store.pipeline.segment_reader import SegmentReader, SegmentSplit, plan_splits
from store.pipeline.synthetic import SyntheticMessage, encode

pytestmark = pytest.mark.skipif(not kernel.COMPILED, reason="decode threads need the compiled kernel")

BLANK_MAGIC = struct.pack(">i", -875286124)
FROM_OFFSET = 1 << 30


def _segment(tmp_path, damage: str, seed: int) -> tuple[str, list[int]]:
    """A segment file with ~120 records (and their starts), damaged as `damage` says."""
    rng = random.Random(seed)
    data = bytearray()
    starts = []
    for n in range(120):
        body = bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 40, 300, 900))))
        if damage == "huge" and n == 60:
            body = bytes(9000)
        message = SyntheticMessage(topic=("TopicA", "TopicB", "TopicC")[n % 3], queue_id=n % 4, body=body,
                                   queue_offset=n, properties_raw=b"TAGS\x01t%d\x02KEYS\x01k%d" % (n, n))
        starts.append(len(data))
        data += encode(message, FROM_OFFSET + len(data))
    hit = starts[rng.randrange(10, 110)]
    if damage == "blank":
        data[hit:] = struct.pack(">i", len(data) - hit) + BLANK_MAGIC + bytes(len(data) - hit - 8)
    elif damage == "magic":
        data[hit + 4:hit + 8] = b"\x12\x34\x56\x78"
    elif damage == "length":        # TOTALSIZE one short: the layout no longer adds up
        size = struct.unpack_from(">i", data, hit)[0]
        struct.pack_into(">i", data, hit, size - 1)
    elif damage == "crc":           # a body byte changed: BODYCRC fails when checked
        body_at = hit + 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4
        data[body_at:body_at + 4] = b"\xde\xad\xbe\xef"
    elif damage == "zeros":
        data[hit:] = bytes(len(data) - hit)
    path = tmp_path / f"{FROM_OFFSET:020d}"
    path.write_bytes(bytes(data) + bytes(rng.choice((0, 100, 4096))))
    return str(path), starts


def _read(split: SegmentSplit, threads: int, batch_bytes: int, **options):
    reader = SegmentReader(split, batch_bytes=batch_bytes, decode_threads=threads, **options)
    return list(reader.batches()), reader.end, reader.windows_in_threads


def _same(split: SegmentSplit, batch_bytes: int, **options) -> tuple[int, int]:
    """(batches, windows the threads scanned) of a read, which must be the sequential read's."""
    sequential, end, _ = _read(split, 1, batch_bytes, **options)
    in_threads = []
    for threads in (2, 3):
        batches, other_end, windows = _read(split, threads, batch_bytes, **options)
        assert len(batches) == len(sequential), (threads, batch_bytes)
        assert all(a.equals(b) for a, b in zip(sequential, batches)), (threads, batch_bytes)
        assert other_end == end, (threads, batch_bytes, other_end, end)
        in_threads.append(windows)
    return len(sequential), min(in_threads)


@pytest.mark.parametrize("damage", ["none", "blank", "magic", "length", "crc", "huge", "zeros"])
@pytest.mark.parametrize("seed", range(3))
def test_threads_give_the_sequential_batches_and_end(tmp_path, damage, seed):
    path, _ = _segment(tmp_path, damage, seed)
    whole = SegmentSplit(path, FROM_OFFSET)
    batches = 0
    for batch_bytes in (100, 1500, 4096, 20_000, 1 << 30):
        for check_crc in (False, True):
            count, in_threads = _same(whole, batch_bytes, check_crc=check_crc)
            batches += count
            if damage == "none" and batch_bytes >= 1500:    # every record fits a window:
                assert in_threads >= count                   # all scanned in the threads
        batches += _same(whole, batch_bytes, views=True)[0]
    assert batches > 30               # many windows, so many hand-overs


@pytest.mark.parametrize("seed", range(3))
def test_splits_and_a_topic_filter_give_the_sequential_batches(tmp_path, seed):
    path, starts = _segment(tmp_path, ("none", "blank", "magic")[seed], seed)
    segment = SegmentFile(path, FROM_OFFSET, len(open(path, "rb").read()))
    splits = plan_splits([segment], 4000)
    assert len(splits) >= 2
    only_b = RowFilter(topics=frozenset({"TopicB"}))
    late = RowFilter(store_timestamp_min_ms=1_800_000_000_000)      # keeps nothing
    for split in splits:
        for batch_bytes in (100, 2500):
            _same(split, batch_bytes)
            _same(split, batch_bytes, row_filter=only_b)
            _same(split, batch_bytes, row_filter=late)
    # A split that stops inside a record: the record belongs to the split it starts in.
    middle = starts[50] + 10
    _same(SegmentSplit(path, FROM_OFFSET, 0, middle), 1000)
    _same(SegmentSplit(path, FROM_OFFSET, middle - 10, None), 1000)


@pytest.mark.timeout(60)
def test_closing_early_returns(tmp_path):
    path, _ = _segment(tmp_path, "none", 0)
    for taken in (0, 1, 3):
        reader = SegmentReader(SegmentSplit(path, FROM_OFFSET), batch_bytes=500, decode_threads=2)
        batches = reader.batches()
        for _ in range(taken):
            next(batches)
        batches.close()


def test_a_failing_decode_comes_after_the_batches_before_it(tmp_path, monkeypatch):
    path, _ = _segment(tmp_path, "none", 1)
    sequential = _read(SegmentSplit(path, FROM_OFFSET), 1, 1500)[0]
    real = RecordDecoder.batch
    calls = []

    def failing(self, part, columns):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("decode failed at offset 4321")
        return real(self, part, columns)

    monkeypatch.setattr(RecordDecoder, "batch", failing)
    got = []
    reader = SegmentReader(SegmentSplit(path, FROM_OFFSET), batch_bytes=1500, decode_threads=2)
    with pytest.raises(RuntimeError, match="offset 4321"):
        for batch in reader.batches():
            got.append(batch)
    assert len(got) == 3 and all(a.equals(b) for a, b in zip(sequential, got))
