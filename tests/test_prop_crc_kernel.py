"""The kernel's `scan` with check_crc=2 (forceVerifyPropCRC): the C and Python twins agree with each
other and with `record_check.check_message` on sealed, torn and forged `__CRC32#` trailers."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from store import kernel
from store.codec import message as msgcodec
from store.codec import prop_crc, record_check

_TRAILER_VARIANTS = ("sealed", "missing", "zero-digits", "non-ascii", "short", "duplicate",
                     "negative", "wrong-digits", "empty-value", "flipped")


def _record(rng: random.Random, phy_offset: int, variant: str) -> bytearray:
    properties = b"TAGS\x01t\x02UNIQ_KEY\x01AB\x02"
    if variant == "duplicate":
        properties += b"__CRC32#\x011234\x02"          # an earlier one: the last one counts
    if variant == "missing":
        trailer = b""
    elif variant == "non-ascii":
        trailer = b"__CRC32#\x01\xc3\xa9" + b"0" * 8 + b"\x02"
    elif variant == "short":
        trailer = b"__CRC32#\x0112\x02"
    elif variant == "negative":
        trailer = b"__CRC32#\x018463847412\x02"       # 2^31: negative in Java int arithmetic
    elif variant == "empty-value":
        trailer = b"__CRC32#\x01\x02"
    else:
        trailer = prop_crc.PLACEHOLDER
    record = msgcodec.encode_message(
        topic=rng.choice(["T", "CrcA", "t" * 127]), queue_id=rng.randrange(4),
        body=os.urandom(rng.randrange(0, 64)), properties_raw=properties + trailer,
        queue_offset=rng.randrange(99), phy_offset=phy_offset, born_timestamp=rng.randrange(2**41),
        born_host=rng.choice(["127.0.0.1:1", "[::1]:9"]), store_timestamp=rng.randrange(2**41),
        store_host="127.0.0.1:10911", sys_flag=rng.choice([0, 8]))
    if variant in ("sealed", "flipped", "wrong-digits", "duplicate"):
        prop_crc.seal(record)
    if variant == "wrong-digits":           # sealed, then other digits written over the CRC
        record[-11:-1] = b"1111111111"
    if variant == "flipped":
        index = rng.randrange(8, len(record) - 20)
        record[index] ^= 1 << rng.randrange(8)
    return record


def _log(seed: int) -> tuple[bytearray, list[int]]:
    rng = random.Random(seed)
    buf = bytearray()
    starts = []
    for _ in range(rng.randrange(1, 12)):
        starts.append(len(buf))
        variant = "sealed" if rng.random() < 0.6 else rng.choice(_TRAILER_VARIANTS)
        buf += _record(rng, len(buf), variant)
    return buf, starts


def _scan_both(buf, start, limit, rows=32):
    out_py = kernel.scan_buffer(rows)
    got_py = kernel._scan_py(buf, start, limit, prop_crc.CRC_PROPERTY, out_py)
    if kernel.COMPILED:
        out_c = kernel.scan_buffer(rows)
        got_c = kernel.scan(buf, start, limit, prop_crc.CRC_PROPERTY, out_c)
        assert got_c == got_py
        assert np.array_equal(out_c[:got_c[0]], out_py[:got_py[0]])
    return got_py, out_py


@pytest.mark.parametrize("seed", range(300))
def test_twins_agree_with_each_other_and_with_check_message(seed):
    buf, starts = _log(seed)
    (count, stop, kind, _), out = _scan_both(buf, 0, len(buf))
    for row in out[:count]:
        result = record_check.check_message(buf, int(row[0]), check_crc=prop_crc.CRC_PROPERTY,
                                            limit=len(buf))
        assert result.kind == record_check.CHECK_RECORD and result.size == int(row[1])
    if kind == kernel.STOP_INVALID and stop < len(buf):
        result = record_check.check_message(buf, stop, check_crc=prop_crc.CRC_PROPERTY,
                                            limit=len(buf))
        value = (result.request.properties.get("__CRC32#", "") if result.request else "")
        # The kernel stops at a non-ASCII value for check_message to judge (Java reads UTF-16).
        assert result.kind != record_check.CHECK_RECORD or not value.isascii()
    # Body-CRC mode never looks at the trailer: only "flipped" bodies can stop it early.
    assert _scan_body_mode(buf)[0] >= count


def _scan_body_mode(buf):
    out = kernel.scan_buffer(32)
    return kernel.scan(buf, 0, len(buf), prop_crc.CRC_BODY, out)


@pytest.mark.parametrize("variant", _TRAILER_VARIANTS)
def test_each_trailer_variant(variant):
    record = _record(random.Random(7), 0, variant)
    (count, _, _, _), _ = _scan_both(record, 0, len(record))
    result = record_check.check_message(record, 0, check_crc=prop_crc.CRC_PROPERTY, limit=len(record))
    valid = variant in ("sealed", "duplicate")
    assert count == int(valid)
    assert (result.kind == record_check.CHECK_RECORD) == valid


def test_a_length_mismatch_with_force_verify_answers_minus_one_like_java():
    """checkMessageAndReturnSize checks the property CRC before the length: over the range that
    ends 20 bytes before the end of PROPERTIES and starts TOTALSIZE before it, which is not the
    record when TOTALSIZE lies. A CRC mismatch there answers -1 (not TOTALSIZE)."""
    record = _record(random.Random(3), 0, "sealed")
    buf = bytearray(64) + record + bytearray(64)
    total = len(record)
    buf[64:68] = (total - 1).to_bytes(4, "big")
    got, _ = _scan_both(buf, 64, len(buf))
    assert got[:3] == (0, 64, kernel.STOP_INVALID) and got[3] == -1
    result = record_check.check_message(buf, 64, check_crc=prop_crc.CRC_PROPERTY, limit=len(buf))
    assert result == record_check.CheckResult(record_check.CHECK_INVALID, -1, None)
    body = record_check.check_message(buf, 64, check_crc=prop_crc.CRC_BODY, limit=len(buf))
    assert body.kind == record_check.CHECK_INVALID and body.size == total - 1


def test_the_check_crc_argument_is_refused_alike():
    record = _record(random.Random(1), 0, "sealed")
    out = kernel.scan_buffer(4)
    for bad, error in ((None, TypeError), (1.0, TypeError), (2**31, OverflowError)):
        with pytest.raises(error) as python_error:
            kernel._scan_py(record, 0, len(record), bad, out)
        if kernel.COMPILED:
            with pytest.raises(error) as c_error:
                kernel.scan(record, 0, len(record), bad, out)
            assert str(c_error.value) == str(python_error.value)
    assert kernel._scan_py(record, 0, len(record), np.int64(2), out)[0] == 1
