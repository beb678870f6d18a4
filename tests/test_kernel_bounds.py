"""The compiled kernel at the edges of its arguments: each call here once overflowed a bounds check in
store/kernel/c/ (reading or writing out of bounds, or signed-overflow UB) or silently truncated a field.

Each test calls the C function with the extreme argument and checks that it refuses (or answers)
exactly as its pure-Python twin in store/kernel/__init__.py does: the same exception type and message.
Before the fixes, the scan, place and index_hashes cases crashed the interpreter (run one test per
process to see it: `python3 -m pytest tests/test_kernel_bounds.py::<name>`).
"""

from __future__ import annotations

import numpy as np
import pytest

from store import kernel
from store.api import Message
from store.commitlog import put_path

pytestmark = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")

_SSIZE_MAX = 2**63 - 1
_HUGE = [_SSIZE_MAX, _SSIZE_MAX - 7, _SSIZE_MAX - 40, 2**62 + 2**61]


def _outcome(function, *args):
    """What a call gives: ("ok", result) or ("raise", exception type, message)."""
    try:
        return ("ok", function(*args))
    except Exception as error:                 # the test compares whatever either twin raises
        return ("raise", type(error), str(error))


def _record() -> bytes:
    return bytes(kernel.encode_record(b"T", 1, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8), 0, 0, b"body",
                                      b"KEYS\x01k1 k2\x02UNIQ_KEY\x01AB\x02", 1))


# -- scan.c: `pos + 8 > end` wrapped for a start near 2^63, then read far out of bounds --------------

@pytest.mark.parametrize("start", _HUGE + [2**63, -2**63 - 1, -1])
@pytest.mark.parametrize("limit", [0, 100, _SSIZE_MAX, -2**63, -5])
def test_scan_from_a_start_near_the_end_of_the_address_space(start, limit):
    buf = _record() * 2
    outcomes = [_outcome(scan, buf, start, limit, True, kernel.scan_buffer(4))
                for scan in (kernel.scan, kernel._scan_py)]
    assert outcomes[0] == outcomes[1]
    if 0 <= start < 2**63:
        assert outcomes[0][1][0] == 0 and outcomes[0][1][1] == start


# -- record.c place: `ts_position + 8 > record.len` wrapped, then WROTE out of bounds ---------------

@pytest.mark.parametrize("timestamp_position", _HUGE + [-1, 2**63])
def test_place_refuses_a_timestamp_position_past_the_record(timestamp_position):
    record = _record()
    outcomes = []
    for place in (kernel.place, kernel._place_py):
        target = bytearray(len(record) + 16)
        outcomes.append(_outcome(place, target, 0, record, 5, 6, timestamp_position, 7))
        assert target == bytearray(len(record) + 16)           # nothing written
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] in (ValueError, OverflowError)


@pytest.mark.parametrize("position", _HUGE + [-1, -2**63, 2**63])
def test_place_refuses_a_position_past_the_target(position):
    record = _record()
    outcomes = [_outcome(place, bytearray(len(record) + 16), position, record, 5, 6, 56, 7)
                for place in (kernel.place, kernel._place_py)]
    assert outcomes[0] == outcomes[1] and outcomes[0][0] == "raise"


@pytest.mark.parametrize("field", [3, 4, 6])      # queue_offset, phy_offset, store_timestamp
def test_place_refuses_an_offset_out_of_int64_like_its_twin(field):
    record = _record()
    for bad in (2**63, -2**63 - 1):
        args = [None, 0, record, 5, 6, 56, 7]
        args[field] = bad
        outcomes = [_outcome(place, bytearray(len(record)), *args[1:])
                    for place in (kernel.place, kernel._place_py)]
        assert outcomes[0] == outcomes[1] == ("raise", OverflowError, "int too big to convert")


# -- hash.c index_hashes: `tp + tl` and `pos + len` wrapped on a forged row, then read far away ------

def _rows_of(buf: bytes) -> np.ndarray:
    out = kernel.scan_buffer(4)
    count = kernel.scan(buf, 0, len(buf), True, out)[0]
    assert count == 1
    return out[:1].copy()


@pytest.mark.parametrize("column", ["topic", "keys", "uniq"])
@pytest.mark.parametrize("position, length", [(1, _SSIZE_MAX), (8, _SSIZE_MAX - 7), (1, -1),
                                              (_SSIZE_MAX, 1), (10**6, 0), (1, 2**62)])
def test_index_hashes_refuse_a_forged_row(column, position, length):
    buf = _record()
    rows = _rows_of(buf)
    rows[0, kernel.COL[column + "_pos"]] = position
    rows[0, kernel.COL[column + "_len"]] = length
    outcomes = [_outcome(index_hashes, buf, rows, np.zeros(8, np.int64), np.zeros(8, np.int64))
                for index_hashes in (kernel.index_hashes, kernel._index_hashes_py)]
    assert outcomes[0] == outcomes[1] == ("raise", ValueError, "a row points outside the buffer")


def test_index_hashes_twins_agree_when_out_fills_before_a_non_ascii_token():
    # C hashes token by token: "k1" fills `out`, "k2" finds it full (-2) before "kä" is found not
    # ASCII (-1); the twin used to look at the whole value first.
    buf = bytes(kernel.encode_record(b"T", 1, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8), 0, 0, b"",
                                     "KEYS\x01k1 k2 kä\x02".encode(), 1))
    rows = _rows_of(buf)
    outcomes = [_outcome(index_hashes, buf, rows, np.zeros(1, np.int64), np.zeros(1, np.int64))
                for index_hashes in (kernel.index_hashes, kernel._index_hashes_py)]
    assert outcomes[0] == outcomes[1] == ("ok", -2)



def test_index_hashes_twins_agree_on_random_keys():
    """hash.c hashes four characters a step: the same Java hashes as the twin for random topics and
    keys of every length mod 4, empty and repeated spaces, non-ASCII bytes, outputs too small."""
    import random
    rng = random.Random(7)
    alphabet = "abcXYZ019#-_ " + "\u00e4"
    for case in range(600):
        topic = "".join(rng.choice(alphabet[:-2]) for _ in range(rng.randrange(1, 40)))
        keys = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
        uniq = "".join(rng.choice(alphabet[:-2]) for _ in range(rng.randrange(0, 40)))
        properties = (f"KEYS\x01{keys}\x02" if keys else "") + \
            (f"UNIQ_KEY\x01{uniq}\x02" if uniq else "")
        buf = bytes(kernel.encode_record(topic.encode(), 1, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8),
                                         0, 0, b"", properties.encode(), 1))
        rows = _rows_of(buf)
        size = rng.choice((1, 2, 64))
        outcomes = [_outcome(index_hashes, buf, rows, out_h := np.zeros(size, np.int64),
                             out_r := np.zeros(size, np.int64)) + (out_h.tolist(), out_r.tolist())
                    for index_hashes in (kernel.index_hashes, kernel._index_hashes_py)]
        assert outcomes[0] == outcomes[1], (topic, keys, uniq, size)


# -- record.c encode_record: a v1 topic over 255 bytes or PROPERTIES over 65,535 were truncated -------

def _record_args(topic: bytes, properties: bytes, version: int) -> list:
    return [topic, 0, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8), 0, 0, b"x", properties, version]


@pytest.mark.parametrize("topic_length, properties_length, version, message", [
    (128, 0, 1, "topic of 128 bytes does not fit a v1 record"),
    (256, 0, 1, "topic of 256 bytes does not fit a v1 record"),
    (300, 0, 1, "topic of 300 bytes does not fit a v1 record"),
    (32768, 0, 2, "topic of 32768 bytes does not fit a v2 record"),
    (65536 + 3, 0, 2, "topic of 65539 bytes does not fit a v2 record"),
    (1, 32768, 1, "properties of 32768 bytes exceed 32767"),
    (1, 65536 + 5, 2, "properties of 65541 bytes exceed 32767"),
])
def test_encode_record_refuses_a_field_the_reader_cannot_read_back(topic_length, properties_length,
                                                                   version, message):
    args = _record_args(b"t" * topic_length, b"p" * properties_length, version)
    outcomes = [_outcome(encode, *args) for encode in (kernel.encode_record, kernel._encode_record_py)]
    assert outcomes[0] == outcomes[1] == ("raise", ValueError, message)


@pytest.mark.parametrize("topic_length, properties_length, version", [
    (127, 0, 1), (128, 0, 2), (32767, 32767, 2), (1, 32767, 1)])
def test_encode_record_longest_fields_scan_back(topic_length, properties_length, version):
    args = _record_args(b"t" * topic_length, b"p" * properties_length, version)
    record = kernel.encode_record(*args)
    assert record == kernel._encode_record_py(*args)
    out = kernel.scan_buffer(1)
    assert kernel.scan(record, 0, len(record), True, out) == (1, len(record), kernel.STOP_END, -1)
    assert out[0, kernel.COL["topic_len"]] == topic_length
    assert out[0, kernel.COL["props_len"]] == properties_length


@pytest.mark.parametrize("field, kind", [(1, "i"), (2, "i"), (3, "i"), (4, "L"), (5, "L"), (6, "L"),
                                         (8, "L"), (10, "i"), (11, "L"), (14, "i")])
@pytest.mark.parametrize("extreme", [2**31, -2**31 - 1, 2**63, -2**63 - 1, 2**70])
def test_encode_record_overflow_messages_match(field, kind, extreme):
    args = _record_args(b"T", b"", 1)
    args[field] = extreme
    if kind == "L" and -2**63 <= extreme < 2**63:
        args[7] = bytes(9)          # fits: the host length is refused next, by both
    outcomes = [_outcome(encode, *args) for encode in (kernel.encode_record, kernel._encode_record_py)]
    assert outcomes[0] == outcomes[1] and outcomes[0][0] == "raise"


# -- put.c encode_put: `max_message_size + 65536` overflowed; an error was pending in IsTrue -------

def test_encode_put_with_a_huge_maximum_message_size_encodes_like_the_python_path():
    settings = put_path.PutSettings("127.0.0.1:10911", _SSIZE_MAX, "5.x", True, (1000,), 1 << 20)
    message = Message("T", b"body", 0, "TagA", ("k",), {"UNIQ_KEY": "AB"})
    record, draft = put_path._encode_for_put(message, settings, 5)     # first: it learns the topic
    fast = kernel.encode_put(message, settings.kernel_context, 5)
    assert fast is not None and fast[0] == record
    assert fast[1:] == (draft.topic, draft.queue_id, draft.sys_flag, draft.tags_code, draft.keys,
                        draft.uniq_key, draft.store_timestamp_position)


@pytest.mark.parametrize("maximum", [-2**63, -1, 0, 3])
def test_encode_put_declines_a_record_over_a_small_maximum(maximum):
    settings = put_path.PutSettings("127.0.0.1:10911", maximum, "5.x", True, (1000,), 1 << 20)
    message = Message("T", b"body", 0, None, (), None)
    assert kernel.encode_put(message, settings.kernel_context, 5) is None
    with pytest.raises(put_path.PutRefused):
        put_path._encode_for_put(message, settings, 5)


def test_encode_put_stops_at_the_first_bad_context_field():
    called = []

    class Truth:
        def __bool__(self):
            called.append(1)
            return True
    settings = put_path.PutSettings("127.0.0.1:10911", 4096, "5.x", True, (1000,), 1 << 20)
    message = Message("T", b"body", 0, None, (), None)
    for bad_at in (3, 6):
        context = list(settings.kernel_context)
        context[bad_at] = "not an int"
        context[4] = context[5] = Truth()
        with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
            kernel.encode_put(message, tuple(context), 5)
        assert called == ([1, 1] if bad_at == 6 else [])      # no __bool__ with an error pending
        called.clear()
    context = list(settings.kernel_context)
    context[3] = 2**64
    with pytest.raises(OverflowError):
        kernel.encode_put(message, tuple(context), 5)
