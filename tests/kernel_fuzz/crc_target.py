"""The fuzz driver's `crc32` target (store/kernel/c/crc_clmul.c and crc.c's crc32_bytes), also run
unsanitized by tests/test_kernel_crc.py.

Input: bytes of exactly the length tried (so ASan's red zones sit right after them): lengths around
the carry-less path's edges (under 64 bytes, multiples of 16 and 64 and one either side) and random
ones up to 70,000, of noise, zeros, 0xFF or corpus records. Checked against `zlib.crc32`.
"""

from __future__ import annotations

import os
import zlib

EDGE_LENGTHS = [0, 1, 15, 16, 17, 31, 32, 48, 63, 64, 65, 79, 80, 81, 127, 128, 129, 191, 192, 255,
                256, 257, 4095, 4096, 4097, 65535, 65536]


def random_input(rng, records) -> bytes:
    """One input: its length from EDGE_LENGTHS (plus 0-3) or random, its bytes of one kind."""
    length = rng.choice(EDGE_LENGTHS) + rng.choice([0, 0, 1, 2, 3]) if rng.random() < 0.6 \
        else rng.randrange(0, 70_000)
    kind = rng.randrange(4)
    if kind == 0:
        return os.urandom(length)
    if kind == 1:
        return bytes(length)
    if kind == 2:
        return b"\xff" * length
    data = b"".join(rng.choice(records) for _ in range(1 + length // 512)) if records else b""
    return (data + bytes(length))[:length]


def crc32(fuzzer, disagreement) -> None:
    """One execution: the sanitized crc32 against zlib.crc32 (always compared)."""
    data = random_input(fuzzer.rng, fuzzer.records)
    fuzzer.last_input = {"target": "crc32", "buf": data.hex()[:20000], "length": len(data)}
    got = fuzzer.native.crc32(data)
    fuzzer.executions["crc32"] += 1
    fuzzer.compared["crc32"] += 1
    if got != zlib.crc32(data):
        raise disagreement(f"crc32: C {got} != zlib {zlib.crc32(data)} for {len(data)} bytes")
