"""The kernel's CRC-32 (store/kernel/c/crc.c, its 16-byte blocks by PCLMULQDQ in crc_clmul.c when the
CPU has it) against zlib.crc32, the twins' CRC: every length around the block and fold sizes, at every
alignment, with the folding on and off (RMQ_CRC_NO_CLMUL)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import zlib

import pytest

from store import kernel

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")

CHECK = """
import random, zlib
from store.kernel import _native
rng = random.Random(5)
data = bytes(rng.randrange(256) for _ in range(70000))
lengths = list(range(0, 400)) + [1023, 1024, 1025, 4095, 4096, 4097, 65536, 69990]
bad = [(length, offset) for length in lengths for offset in range(8)
       if _native.crc32(data[offset:offset + length]) != zlib.crc32(data[offset:offset + length])]
print(_native.CRC, len(bad), bad[:5])
"""


@needs_native
@pytest.mark.parametrize("folding", ["on", "off"])
def test_crc32_is_zlibs_for_every_length_and_alignment(folding):
    env = dict(os.environ)
    env.pop("RMQ_CRC_NO_CLMUL", None)
    if folding == "off":
        env["RMQ_CRC_NO_CLMUL"] = "1"
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          timeout=300)
    assert done.returncode == 0, done.stderr
    name, bad, sample = done.stdout.split(" ", 2)
    assert bad == "0", sample
    assert name.startswith("pclmul+") == (folding == "on" and kernel._native.CRC.startswith("pclmul"))


@needs_native
def test_crc32_takes_any_buffer():
    rng = random.Random(9)
    data = bytearray(rng.randrange(256) for _ in range(3000))
    for view in (data, bytes(data), memoryview(data)[17:2900]):
        assert kernel._native.crc32(view) == zlib.crc32(view)
    with pytest.raises(TypeError):
        kernel._native.crc32("text")
