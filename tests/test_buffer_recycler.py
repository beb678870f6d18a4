"""store.pipeline.buffers.BufferRecycler: decode_columns' outputs and scan rows come back only when unused."""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pytest

from store import kernel
from store.pipeline import buffers, columns_native
from store.pipeline.commitlog_decoder import COMMITLOG_COLUMNS, RecordDecoder, ScanLayout
from store.pipeline.commitlog_scan import RecordScanner
from store.pipeline.synthetic import SyntheticMessage, encode


def _address(buffer: pa.Buffer) -> int:
    return buffer.address


def test_a_buffer_is_given_again_only_after_its_users_are_gone():
    recycler = buffers.BufferRecycler(keep_bytes=1 << 20)
    recycler.SMALL = 16
    first = recycler(100)
    second = recycler(100)
    assert first.size == second.size == 100 and first.is_mutable
    assert _address(first) != _address(second)             # the first is still held
    held = pa.Array.from_buffers(pa.uint8(), 100, [None, first])
    first_address = _address(first)
    del first
    gc.collect()
    third = recycler(90)
    assert _address(third) != first_address                # an array still refers to it
    del held
    gc.collect()
    again = recycler(90)
    assert _address(again) == first_address and again.size == 90
    assert _address(again) % 8 == 0


def test_past_keep_bytes_and_small_sizes_come_from_the_pool():
    recycler = buffers.BufferRecycler(keep_bytes=1 << 16)
    kept = recycler(1 << 16)
    extra = recycler(1 << 16)                               # over keep_bytes: not kept
    small = recycler(10)
    assert len(recycler._arrays) == 1 and recycler._kept == 1 << 16
    assert extra.size == 1 << 16 and small.size == 10 and kept.size == 1 << 16


@pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
def test_batches_kept_while_later_ones_decode_keep_their_values(monkeypatch):
    recycler = buffers.BufferRecycler(keep_bytes=1 << 20)
    recycler.SMALL = 64
    addresses = []

    def counted(size):
        buffer = recycler(size)
        if size >= recycler.SMALL:
            addresses.append(buffer.address)
        return buffer

    monkeypatch.setattr(columns_native, "RECYCLER", counted)
    data = bytearray()
    for i in range(60):
        message = SyntheticMessage(topic=f"T{i % 3}", body=bytes([i]) * (50 + i),
                                   properties_raw=b"TAGS\x01t%d\x02KEYS\x01k%d" % (i, i))
        data += encode(message, len(data))
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    parts = list(RecordScanner(buf, batch_bytes=1024).batches())
    assert len(parts) > 4
    fast = RecordDecoder(buf, 0, "00000000000000000000", native=True)
    slow = RecordDecoder(buf, 0, "00000000000000000000", native=False)
    expected = [slow.batch(ScanLayout(rows), list(COMMITLOG_COLUMNS)) for rows in parts]
    kept = []
    for index, rows in enumerate(parts):
        batch = fast.batch(ScanLayout(rows), list(COMMITLOG_COLUMNS))
        if index % 2 == 0:
            kept.append((index, batch))                     # odd batches are dropped: reused
        del batch
        gc.collect()
    assert len(set(addresses)) < len(addresses)             # dropped batches' buffers were reused
    for index, batch in kept:
        batch.validate(full=True)
        assert batch.equals(expected[index])
