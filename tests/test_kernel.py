"""The compiled kernel (store/kernel/c/, the extension store.kernel._kernel) against its pure-Python twins and the codec it speeds up."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from store import kernel
from store.codec import message as msgcodec
from store.codec import record_check
from store.codec.javahash import java_string_hash
from store.codec.properties import encode_properties

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")


def test_kernel_is_built_where_required():
    # .ci/run sets RMQ_REQUIRE_KERNEL=1: CI must exercise the compiled kernel, not only the fallback.
    if os.environ.get("RMQ_REQUIRE_KERNEL") == "1":
        assert kernel.COMPILED, "store.kernel._kernel did not build (pip install -e . needs gcc)"


def _random_record(rng: random.Random, *, phy_offset: int = 0) -> bytearray:
    props = {}
    if rng.random() < 0.8:
        props["TAGS"] = rng.choice(["TagA", "TagB", "tägé", "x"])
    if rng.random() < 0.7:
        props["KEYS"] = " ".join(f"k{rng.randrange(1000)}" for _ in range(rng.randrange(1, 4)))
    if rng.random() < 0.7:
        props["UNIQ_KEY"] = f"{rng.getrandbits(128):032X}"
    if rng.random() < 0.2:
        props["DELAY"] = str(rng.randrange(1, 5))
    if rng.random() < 0.3:
        props["user\x01odd"] = "v"          # a name with the separator: the decoder's rules decide
    if rng.random() < 0.2:
        props["TAGS"] = props.get("TAGS", "T")  # same key, still one entry
    raw = encode_properties(props, style=rng.choice(["4.9", "5.x"]))
    if rng.random() < 0.1:
        raw += b"\x02TAGS\x01Later"           # a duplicate name: the last one wins
    born = rng.choice(["127.0.0.1:0", "[::1]:9", "10.0.0.2:4567"])
    return msgcodec.encode_message(
        topic=rng.choice(["T", "BenchTopic", "SCHEDULE_TOPIC_XXXX", "t" * 127]),
        queue_id=rng.randrange(16), body=os.urandom(rng.randrange(0, 300)), properties_raw=raw,
        flag=rng.randrange(-5, 5), sys_flag=rng.choice([0, 4, 8, 12]), queue_offset=rng.randrange(99),
        phy_offset=phy_offset, born_timestamp=rng.randrange(2**41), born_host=born,
        store_timestamp=rng.randrange(2**41), store_host=rng.choice(["127.0.0.1:10911", "[::2]:1"]),
        reconsume_times=rng.randrange(3), prepared_transaction_offset=rng.randrange(1000))


def _log(rng: random.Random, count: int) -> bytearray:
    buf = bytearray()
    for _ in range(count):
        buf += _random_record(rng, phy_offset=len(buf))
    return buf


def _scan_both(buf, start, limit, check_crc, rows=64):
    out_py = kernel.scan_buffer(rows)
    got_py = kernel._scan_py(buf, start, limit, check_crc, out_py)
    if kernel.COMPILED:
        out_c = kernel.scan_buffer(rows)
        got_c = kernel.scan(buf, start, limit, check_crc, out_c)
        assert got_c == got_py
        assert np.array_equal(out_c[:got_c[0]], out_py[:got_py[0]])
    return got_py, out_py


def _agrees_with_check_message(buf, start, limit, check_crc, result, out):
    """Every row is what check_message finds there; the stop is what it finds next."""
    count, stop, kind, stop_size = result
    for row in out[:count]:
        pos = int(row[kernel.COL["pos"]])
        checked = record_check.check_message(buf, pos, check_crc=check_crc, limit=limit)
        if checked.kind == record_check.CHECK_INVALID:
            # check_message also judges a SCHEDULE_TOPIC DELAY; the kernel leaves that to its caller.
            topic = bytes(buf[row[kernel.COL["topic_pos"]]:row[kernel.COL["topic_pos"]]
                              + row[kernel.COL["topic_len"]]])
            assert topic == b"SCHEDULE_TOPIC_XXXX"
            continue
        assert checked.kind == record_check.CHECK_RECORD and checked.size == row[kernel.COL["size"]]
        request = checked.request
        assert request.queue_id == row[kernel.COL["queue_id"]]
        assert request.consume_queue_offset == row[kernel.COL["queue_offset"]]
        assert request.store_timestamp == row[kernel.COL["store_ts"]]
        assert request.sys_flag == row[kernel.COL["sys_flag"]]
        for name, column in (("KEYS", "keys"), ("UNIQ_KEY", "uniq"), ("TAGS", "tags")):
            position, length = row[kernel.COL[column + "_pos"]], row[kernel.COL[column + "_len"]]
            found = bytes(buf[position:position + length]).decode("utf-8", "replace") \
                if position >= 0 else None
            assert found == request.properties.get(name)
    if kind == kernel.STOP_FULL:
        return
    if kind == kernel.STOP_END:
        assert stop >= min(limit, len(buf))
        return
    checked = record_check.check_message(buf, stop, check_crc=check_crc, limit=limit)
    if kind == kernel.STOP_BLANK:
        assert checked.kind == record_check.CHECK_BLANK
    else:
        assert checked.kind == record_check.CHECK_INVALID and checked.size == stop_size


@pytest.mark.parametrize("seed", range(40))
def test_scan_matches_check_message_on_damaged_logs(seed):
    rng = random.Random(seed)
    buf = _log(rng, rng.randrange(1, 30))
    # Damage: flipped bytes, a cut tail, a BLANK, zeros.
    for _ in range(rng.randrange(0, 4)):
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    if rng.random() < 0.3:
        position = rng.randrange(len(buf))
        buf[position:position + 8] = msgcodec.encode_blank(max(8, len(buf) - position))
    if rng.random() < 0.3:
        buf += bytes(rng.randrange(1, 40))
    limit = len(buf) if rng.random() < 0.7 else rng.randrange(len(buf) + 1)
    for check_crc in (False, True):
        result, out = _scan_both(buf, 0, limit, check_crc, rows=rng.choice([3, 64]))
        _agrees_with_check_message(buf, 0, limit, check_crc, result, out)


@pytest.mark.parametrize("seed", range(8))
def test_scan_finds_properties_across_word_boundaries(seed):
    # The C finder steps eight bytes at a time to the next byte <= 0x02: raw PROPERTIES of every
    # length around those steps, with separators, zero bytes and high bytes at every place, must
    # give the twin's rows.
    rng = random.Random(seed)
    pieces = [b"TAGS\x01", b"KEYS\x01", b"UNIQ_KEY\x01", b"DELAY\x01", b"\x01", b"\x02", b"\x00",
              b"\x03", b"\xff", b"x", b"TAGS", b"abcdefg", b"\x02\x02", b"\x01\x01"]
    buf = bytearray()
    for _ in range(120):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))[:rng.randrange(0, 90)]
        buf += msgcodec.encode_message(
            topic="T", queue_id=0, body=b"b" * rng.randrange(0, 9), properties_raw=raw, flag=0,
            sys_flag=0, queue_offset=0, phy_offset=len(buf), born_timestamp=1,
            born_host="127.0.0.1:0", store_timestamp=2, store_host="127.0.0.1:1",
            reconsume_times=0, prepared_transaction_offset=0)
    (count, _, kind, _), _ = _scan_both(buf, 0, len(buf), False, rows=256)
    assert count == 120 and kind == kernel.STOP_END


def test_scan_reads_a_whole_clean_log_and_resumes_when_out_is_full():
    rng = random.Random(7)
    buf = _log(rng, 50)
    out = kernel.scan_buffer(16)
    position, seen = 0, 0
    while True:
        count, position, kind, _ = kernel.scan(buf, position, len(buf), True, out)
        seen += count
        if kind != kernel.STOP_FULL:
            break
    assert (seen, position, kind) == (50, len(buf), kernel.STOP_END)


def test_scan_rejects_an_unaligned_or_ragged_out():
    if not kernel.COMPILED:
        pytest.skip("the C kernel is not built")
    with pytest.raises(ValueError):
        kernel.scan(b"", 0, 0, False, np.empty(kernel.SCAN_FIELDS * 8 + 1, dtype=np.uint8))


@pytest.mark.parametrize("seed", range(20))
def test_encode_record_twins_agree(seed):
    rng = random.Random(seed)
    args = (b"Topic" * rng.randrange(1, 5), rng.randrange(-2**31, 2**31), rng.randrange(-9, 9),
            rng.choice([0, 0x10, 0x20, 0x30]), rng.randrange(2**40), rng.randrange(2**40),
            rng.randrange(-2**63, 2**63), os.urandom(rng.choice([8, 20])), rng.randrange(2**41),
            os.urandom(rng.choice([8, 20])), rng.randrange(5), rng.randrange(2**40),
            os.urandom(rng.randrange(2000)), os.urandom(rng.randrange(100)), rng.choice([1, 2]))
    assert kernel.encode_record(*args) == kernel._encode_record_py(*args)


@pytest.mark.parametrize("bad", [2**31, -2**31 - 1])
def test_encode_record_refuses_out_of_range_ints(bad):
    args = [b"T", 0, 0, 0, 0, 0, 0, bytes(8), 0, bytes(8), 0, 0, b"x", b"", 1]
    args[1] = bad
    for encode in (kernel.encode_record, kernel._encode_record_py):
        with pytest.raises(OverflowError):
            encode(*args)


def test_encode_message_still_names_the_bad_field():
    with pytest.raises(ValueError, match="queue_id"):
        msgcodec.encode_message(topic="T", queue_id=2**31, body=b"", properties_raw=b"",
                                born_timestamp=0, born_host="127.0.0.1:0", store_timestamp=0,
                                store_host="127.0.0.1:1")


def test_java_hashes_match_java_string_hash():
    rng = random.Random(3)
    alphabet = "abcXYZ019#_-é漢\U0001F600\ud800"
    texts = ["", "a", "T#k", "polygenelubricants", "GydZG_", "DESIGNING WORKHOUSES"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(30))) for _ in range(300)]
    expected = [java_string_hash(text) for text in texts]
    assert kernel.java_hashes(texts).tolist() == expected
    assert kernel._java_hashes_py(texts).tolist() == expected
    assert java_string_hash("polygenelubricants") == -2**31


@needs_native
def test_native_java_hashes_refuse_non_strings():
    with pytest.raises(TypeError):
        kernel.java_hashes(["a", b"b"])


_WRITE_A_STORE = r"""
import sys
from store import Message, MessageStore, StoreConfig
root = sys.argv[1]
ticks = iter(range(1_700_000_000_000, 1_800_000_000_000, 7))
config = StoreConfig.from_dict({}, store_path_root_dir=root, mapped_file_size_commit_log=64 * 1024,
                               mapped_file_size_consume_queue=20 * 64)
store = MessageStore.open(config, clock_ms=lambda: next(ticks), start_services=False)
for n in range(300):
    properties = {"UNIQ_KEY": f"{n:032X}", "p{}".format(n % 7): "v"}
    if n % 50 == 7:
        properties["DELAY"] = "2"
    message = Message("T%d" % (n % 3), bytes([n % 256]) * (n * 13 % 700), n % 4, "Tag%d" % (n % 5),
                      ("k%d" % n, "o%d" % (n % 9)), properties, born_timestamp=n)
    if n % 10 == 3:
        assert store.put_messages([message, message]).ok
    else:
        assert store.put_message(message).ok
store.dispatch_pending()
store.close()
"""


def test_compiled_and_python_kernels_write_the_same_store(tmp_path):
    """End to end: a store written with RMQ_KERNEL=python is byte-identical to the compiled one."""
    import subprocess
    import sys
    roots = []
    for mode in ("python", "compiled"):
        root = tmp_path / mode
        env = dict(os.environ, RMQ_KERNEL="python" if mode == "python" else "")
        subprocess.run([sys.executable, "-c", _WRITE_A_STORE, str(root)], check=True, env=env,
                       cwd=os.path.dirname(os.path.dirname(__file__)))
        roots.append(root)
    for part in ("commitlog", "consumequeue"):
        files = sorted(p.relative_to(roots[0]) for p in (roots[0] / part).rglob("*") if p.is_file())
        assert files
        for name in files:
            assert (roots[0] / name).read_bytes() == (roots[1] / name).read_bytes(), name


@pytest.mark.parametrize("seed", range(10))
def test_place_twins_write_the_same_bytes(seed):
    rng = random.Random(seed)
    record = _random_record(rng)
    before = bytes(record)
    position = rng.randrange(0, 64)
    args = (position, record, rng.randrange(2**40), rng.randrange(2**40), rng.choice([56, 68]),
            rng.randrange(2**41))
    targets = []
    for place in (kernel.place, kernel._place_py):
        target = bytearray(len(record) + 64)
        place(target, *args)
        targets.append(bytes(target))
        assert bytes(record) == before                 # the record itself is not patched
    assert targets[0] == targets[1]
    placed = targets[0][position:position + len(record)]
    assert placed[:20] == before[:20] and placed[36:56] == before[36:56]
    assert int.from_bytes(placed[20:28], "big") == args[2]
    for place in (kernel.place, kernel._place_py):
        with pytest.raises(ValueError):
            place(bytearray(len(record)), 1, record, 0, 0, 56, 0)    # one byte short


@pytest.mark.skipif(kernel.encode_put is None, reason="the C kernel is not built")
def test_a_new_topics_first_message_is_encoded_natively(monkeypatch):
    """A topic's first message is validated once and taken by the compiled encoder (not the whole
    Python encode per new topic): same record and draft; refusals still come from the Python path,
    in its order."""
    import dataclasses
    import uuid

    from store.api import Message
    from store.commitlog import put_path
    settings = put_path.PutSettings("127.0.0.1:10911", 4096, "5.x", True, (1000,), 1 << 20)
    python_path = put_path._encode_for_put
    python_path(Message("T", b"b", 0), settings, 7)       # its born host is known from now on
    calls = []
    monkeypatch.setattr(put_path, "_encode_for_put",
                        lambda *args: calls.append(args) or python_path(*args))
    message = Message(f"New_{uuid.uuid4().hex}", b"body", 3, "TagA", ("k1", "k2"),
                      {"UNIQ_KEY": "u1"})
    record, draft = put_path.encode_for_put(message, settings, 7)
    assert calls == []
    expected_record, expected_draft = python_path(message, settings, 7)
    # (the compiled encoder's draft carries no properties dict, as for every known topic)
    assert (record, draft) == (expected_record, dataclasses.replace(expected_draft, properties=None))
    for bad in (Message("bad topic!", b"b", 0), Message("bad topic!", "text", 0),
                Message("t" * 300, b"b", 0)):
        with pytest.raises(put_path.PutRefused) as native:
            put_path.encode_for_put(bad, settings, 7)
        with pytest.raises(put_path.PutRefused) as python:
            python_path(bad, settings, 7)
        assert (native.value.status, str(native.value)) == (python.value.status, str(python.value))
    assert len(calls) == 3
