"""The kernel's CRC-32 (crc.c's crc32_bytes, with crc_clmul.c's carry-less blocks for 64 bytes or
more when the CPU has PCLMULQDQ) against zlib.crc32: directly (`kernel.crc32`), through scan's
BODYCRC check and encode_record's, and the fuzz driver's crc32 target run unsanitized."""

from __future__ import annotations

import mmap
import os
import random
import zlib

import pytest

from store import kernel
from store.codec import message as msgcodec
from tests.kernel_fuzz import crc_target

pytestmark = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")


def test_crc32_matches_zlib_at_every_length_and_alignment():
    data = os.urandom(4096 + 64)
    for length in range(0, 1100):
        for shift in (0, 1, 5, 8, 13):
            piece = memoryview(data)[shift:shift + length]
            assert kernel.crc32(piece) == zlib.crc32(piece), (length, shift)


@pytest.mark.parametrize("fill", [b"\x00", b"\xff", b"\x80", None])
def test_crc32_matches_zlib_on_large_and_uniform_inputs(fill):
    rng = random.Random(5)
    for length in [1 << 20, (1 << 20) + 15, 3 * (1 << 20) + 17, rng.randrange(1 << 22)]:
        data = os.urandom(length) if fill is None else fill * length
        assert kernel.crc32(data) == zlib.crc32(data)


def test_crc32_reads_maps_and_refuses_what_is_not_a_buffer(tmp_path):
    path = tmp_path / "segment"
    payload = os.urandom(300_001)
    path.write_bytes(payload)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert kernel.crc32(mapped) == zlib.crc32(payload)
    with pytest.raises(TypeError):
        kernel.crc32("text")


@pytest.mark.parametrize("body_length", [0, 1, 63, 64, 65, 79, 80, 4096, 4097, 70_001])
def test_scan_checks_body_crcs_the_twin_way(body_length):
    body = os.urandom(body_length)
    record = msgcodec.encode_message(topic="T", queue_id=0, body=body, properties_raw=b"",
                                     queue_offset=0, phy_offset=0, born_timestamp=1,
                                     born_host="127.0.0.1:1", store_timestamp=2,
                                     store_host="127.0.0.1:10911")
    assert int.from_bytes(record[8:12], "big", signed=True) == zlib.crc32(body) & 0x7FFFFFFF
    body_pos = len(record) - 4 - body_length    # a 1-byte topic length, "T", no properties
    assert bytes(record[body_pos:body_pos + body_length]) == body
    for damaged in (False, True):
        data = bytearray(record)
        if damaged and body_length:
            data[body_pos + body_length // 2] ^= 0x10
        data = bytes(data)
        out_c, out_py = kernel.scan_buffer(2), kernel.scan_buffer(2)
        got_c = kernel.scan(data, 0, len(data), 1, out_c)
        got_py = kernel._scan_py(data, 0, len(data), 1, out_py)
        assert got_c == got_py
        assert (got_c[0] == 1) == (not damaged or not body_length)
        assert (out_c[:got_c[0]] == out_py[:got_py[0]]).all()


def test_fuzz_target_unsanitized():
    class Fuzzer:
        rng = random.Random(11)
        records = [os.urandom(n) for n in (90, 200, 700)]
        native = kernel._native
        executions = {"crc32": 0}
        compared = {"crc32": 0}
        last_input: dict = {}

    for _ in range(3000):
        crc_target.crc32(Fuzzer, AssertionError)
    assert Fuzzer.executions["crc32"] == 3000
