"""`encode_batch` and `place_batch` (store/kernel/c/put_batch.c) against their twins
(store/kernel/put_batch.py), and the store's puts with the one-call path on and off: the same
results, refusals and sentences, and byte-identical store files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import struct

import pytest

from store import Message, MessageStore
from store import kernel
from store.commitlog import put_path
from store.commitlog.put_path import PutSettings
from store.kernel import put_batch
from tests.engine_util import FakeClock, small_config

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")


def outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as error:              # compared as the fuzz driver does
        return ("raise", type(error).__name__, str(error))


def _settings(**overrides):
    values = dict(store_host="10.0.0.7:10911", max_message_size=4096, properties_style="4.9",
                  allow_v2_records=False, delay_levels_ms=(1000, 5000), segment_size_bytes=65536)
    values.update(overrides)
    settings = PutSettings(**values)
    for topic in ("TopicA", "TopicB"):
        put_path._remember_topic(topic, settings)
    put_path._host_field("10.1.2.3:4567")
    put_path._host_field("127.0.0.1:0")     # the default born host, as a first put leaves it
    return settings


def _encoder(settings):
    """encode_put's answer from the Python encoder (the kernel need not be built)."""
    def encode(message, context, now_ms):
        record, draft = put_path._encode_for_put(message, settings, now_ms)
        return (record, draft.topic, draft.queue_id, draft.sys_flag, draft.tags_code, draft.keys,
                draft.uniq_key, draft.store_timestamp_position)
    return encode


def _message(rng: random.Random, topic="TopicA", queue_id=1):
    properties = {}
    if rng.random() < 0.5:
        properties["UNIQ_KEY"] = f"U{rng.randrange(10**6)}"
    if rng.random() < 0.2:
        properties["DELAY"] = "1"
    if rng.random() < 0.1:
        properties["a\x02"] = "x"
    return Message(topic, bytes(rng.randrange(256) for _ in range(rng.choice((0, 5, 300, 2000)))),
                   queue_id, tags=rng.choice((None, "", "tagA")), keys=rng.choice(([], ["k1", "k2"])),
                   properties=properties, sys_flag=rng.choice((0, 0, 0, 4, 8)),
                   born_host=rng.choice((None, "10.1.2.3:4567")))


def _batch(rng: random.Random):
    count = rng.choice((1, 1, 2, 5, 32))
    messages = [_message(rng) for _ in range(count)]
    if rng.random() < 0.1:
        messages[-1] = _message(rng, topic="TopicB")
    if rng.random() < 0.1:
        messages[-1] = _message(rng, queue_id=2)
    return messages


@needs_native
def test_encode_batch_matches_its_twin_and_answers_the_common_batches():
    rng = random.Random(7)
    answered = 0
    for number in range(600):
        settings = _settings(properties_style=rng.choice(("4.9", "5.x")),
                             max_message_size=rng.choice((4096, 60000)),
                             segment_size_bytes=rng.choice((65536, 8192)))
        messages = _batch(rng)
        context = settings.kernel_context
        got = outcome(kernel._native.encode_batch, messages, context, 1_700_000_000_000 + number)
        want = outcome(put_batch.encode_batch_py, messages, context, 1_700_000_000_000 + number,
                       kernel._native.encode_put)
        assert got == want, (number, messages)
        answered += got[0] == "ok" and got[1] is not None
    assert answered > 50          # singles and clean batches (random ones are mostly odd)
    # The arguments are checked; an empty batch or a tuple is the Python path's to refuse.
    context = _settings().kernel_context
    assert kernel._native.encode_batch([], context, 0) is None
    for call in (((Message("TopicA", b"x"),), context, 0), ([], (), 0)):
        assert outcome(kernel._native.encode_batch, *call) == \
            outcome(put_batch.encode_batch_py, *call, kernel._native.encode_put)


@needs_native
def test_encoded_records_are_encode_puts_records_back_to_back():
    settings = _settings(max_message_size=60000)
    messages = [Message("TopicA", bytes([n]) * n, 3, tags="t", keys=["k"]) for n in range(1, 33)]
    records, layout, topic, queue_id, sys_flag, count = kernel._native.encode_batch(
        messages, settings.kernel_context, 5)
    singles = [kernel._native.encode_put(m, settings.kernel_context, 5) for m in messages]
    assert bytes(records) == b"".join(bytes(one[0]) for one in singles)
    assert list(struct.iter_unpack("=ii", layout)) == [(len(one[0]), one[7]) for one in singles]
    assert (topic, queue_id, sys_flag, count) == ("TopicA", 3, singles[0][3], 32)


@needs_native
def test_a_single_puts_record_is_encode_puts_own_and_a_fresh_one_per_call():
    """One message: encode_batch answers encode_put's record itself (no second copy), so each call
    must still give its own bytearray, which place_batch then patches in place."""
    settings = _settings()
    message = Message("TopicA", b"payload" * 100, 1, tags="t", keys=["k1", "k2"],
                      properties={"UNIQ_KEY": "U1"})
    first = kernel._native.encode_batch([message], settings.kernel_context, 5)
    second = kernel._native.encode_batch([message], settings.kernel_context, 5)
    single = kernel._native.encode_put(message, settings.kernel_context, 5)
    assert type(first[0]) is bytearray and first[0] is not second[0]
    assert bytes(first[0]) == bytes(second[0]) == bytes(single[0])
    assert list(struct.iter_unpack("=ii", first[1])) == [(len(single[0]), single[7])]
    target = bytearray(len(first[0]) + 8)
    ids = kernel._native.place_batch(target, 8, *first[:2], 4, 1000, 77, True, "C0A80001000027")
    assert ids == ("C0A80001000027" + "%016X" % 1000,)
    assert bytes(target[8:]) == bytes(first[0]) != bytes(second[0])   # patched: only the first


def _place_inputs(rng: random.Random):
    settings = _settings(max_message_size=60000)
    messages = [dataclasses.replace(m, sys_flag=0, properties={
        k: v for k, v in m.properties.items() if k not in ("DELAY", "a\x02")})
        for m in (_message(rng) for _ in range(rng.choice((1, 3, 8))))]
    records, layout, *_ = put_batch.encode_batch_py(messages, settings.kernel_context, 9,
                                                    _encoder(settings))
    size = len(records) + rng.choice((0, 0, 8, 100))
    position = rng.choice((0, 7, size - len(records), size - len(records) + 1, -1))
    if rng.random() < 0.15:
        layout = layout[:-1]
    elif rng.random() < 0.15:
        layout = layout[:4] + struct.pack("=i", rng.choice((0, 35, 36, len(records), 10**6))) + \
            layout[8:]
    elif rng.random() < 0.1:
        layout = struct.pack("=i", rng.choice((0, 36, 10**6, -1))) + layout[4:]
    queue_offset = rng.choice((0, 5, 2**62, 2**63 - 2, -1))
    phy_offset = rng.choice((0, 1 << 30, 2**63 - 1, -3))
    return (size, position, records, layout, queue_offset, phy_offset,
            rng.choice((0, 1_700_000_000_123, -1)), rng.choice((True, False, 0, 1)),
            rng.choice(("C0A80001000027", "", "é")))


@pytest.mark.parametrize("seed", range(3))
def test_place_batch_matches_its_twin(seed):
    rng = random.Random(seed)
    for number in range(300):
        size, position, records, *rest = _place_inputs(rng)
        results = []
        for function in (put_batch.place_batch, put_batch.place_batch_py):
            target = bytearray(b"\xee" * size)
            mine = bytearray(records)
            results.append((outcome(function, target, position, mine, *rest), bytes(target),
                            bytes(mine)))
        assert results[0] == results[1], number


def test_place_batch_writes_offsets_time_and_msg_ids():
    settings = _settings()
    messages = [Message("TopicA", b"x" * n, 0) for n in (10, 20)]
    records, layout, *_ = put_batch.encode_batch_py(messages, settings.kernel_context, 9,
                                                    _encoder(settings))
    sizes = [size for size, _ in struct.iter_unpack("=ii", layout)]
    target = bytearray(len(records) + 16)
    ids = put_batch.place_batch(target, 16, records, layout, 40, 1000, 77, True, "AB")
    assert ids == ("AB00000000000003E8", f"AB{1000 + sizes[0]:016X}")
    second = 16 + sizes[0]
    assert struct.unpack_from(">qq", target, 16 + 20) == (40, 1000)
    assert struct.unpack_from(">qq", target, second + 20) == (41, 1000 + sizes[0])
    assert target[16:] == records


# -- the store, with the one-call path and without it ----------------------------------------------

def _store_files(root) -> str:
    """A digest of the commit log, consume queue files and index (a RocksDB database and 5.x
    metadata carry wall-clock times: they differ from run to run whichever path put)."""
    digest = hashlib.sha256()
    for directory, _dirs, files in sorted(os.walk(root)):
        if os.path.relpath(directory, root).split(os.sep)[0] not in ("commitlog", "consumequeue",
                                                                      "index") or "CURRENT" in files:
            continue
        for name in sorted(files):
            if name in ("checkpoint", "abort", "lock"):
                continue
            path = os.path.join(directory, name)
            digest.update(path[len(str(root)):].encode())
            with open(path, "rb") as handle:
                digest.update(handle.read())
    return digest.hexdigest()


def _puts(root, fast: bool, calls, **config):
    store = MessageStore.open(small_config(root, max_message_size=40000, **config),
                              clock_ms=FakeClock(step_ms=0))
    answered = []
    if fast and kernel.COMPILED:
        def counting(*args, real=store._encode_batch):
            got = real(*args)
            answered.append(got is not None)
            return got
        store._encode_batch = counting
    else:
        store._encode_batch = None
    try:
        results = [store.put_message(item) if kind == "one" else store.put_messages(item)
                   for kind, item in calls]
    finally:
        store.close()
    return results, _store_files(root), sum(answered)


# 5.x (its __CRC32# trailer) and RocksDB (dispatch requests) keep to the Python path: the same
# answers there too, whichever path a future change sends them down.
@pytest.mark.parametrize("config, least_answered", [({}, 390), ({"store_format": "5.x"}, 0),
                                                    ({"store_type": "defaultRocksDB"}, 0)],
                         ids=["4.9", "5.x", "rocksdb"])
def test_store_puts_are_the_same_with_the_one_call_path_and_without(tmp_path, config,
                                                                    least_answered):
    rng = random.Random(11)
    calls = []
    for number in range(400):
        if rng.random() < 0.4:
            calls.append(("one", Message("TopicA", b"x" * (number % 300), number % 3, tags="t",
                                         keys=[f"k{number}"], properties={"UNIQ_KEY": f"U{number}"})))
        else:
            calls.append(("batch", [Message("TopicB", b"y" * rng.randrange(600), 1, tags="b",
                                             keys=["a", "b"]) for _ in range(rng.choice((1, 7, 32)))]))
    calls += [
        ("batch", []),                                                    # empty batch
        ("batch", [Message("TopicB", b"y", 1), Message("TopicC", b"y", 1)]),   # two topics
        ("batch", [Message("TopicB", b"y", 1), Message("TopicB", b"y", 2)]),   # two queues
        ("batch", [Message("TopicB", b"y", 1, sys_flag=4), Message("TopicB", b"y", 1)]),
        ("batch", [Message("TopicB", b"y", 1, properties={"DELAY": "2"})] * 2),
        ("batch", [Message("TopicB", b"y" * 30000, 1)] * 2),              # over maxMessageSize
        ("batch", [Message("TopicB", b"y" * 50000, 1)]),                  # a body over it
        ("batch", [Message("Topic B", b"y", 1)]),                         # illegal topic
        ("one", Message("TopicA", b"y", 1, sys_flag=4)),                  # prepared: no queue offset
        ("batch", (Message("TopicB", b"y", 1), Message("TopicB", b"z", 1))),   # a tuple
        ("one", Message("TopicA", b"y", 99999)),                          # queue id out of range
    ]
    fast_results, fast_files, answered = _puts(tmp_path / "fast", True, calls, **config)
    slow_results, slow_files, _ = _puts(tmp_path / "slow", False, calls, **config)
    # The one-call path takes the common puts (the first of a topic or host goes the long way).
    assert answered >= (least_answered if kernel.COMPILED else 0)
    assert fast_results == slow_results
    assert fast_files == slow_files
    assert [r.error for r in fast_results if not r.ok] == [
        "empty batch", "a batch must have one topic and one queue",
        "a batch must have one topic and one queue", "batches cannot be delayed or transactional",
        "batches cannot be delayed or transactional", "batch of 60194 bytes exceeds maxMessageSize",
        "body of 50000 bytes exceeds maxMessageSize (40000 bytes)",
        "topic 'Topic B' contains the illegal character ' ' at index 5; allowed are letters, "
        "digits, '%', '|', '_' and '-'",
        "queue id 99999 is outside 0..65535"]


@pytest.mark.parametrize("over", [-1, 0, 1])
def test_one_call_put_at_the_segment_end_rolls_like_the_python_path(tmp_path, over):
    """The last record a 64 KiB segment takes leaves END_FILE_MIN_BLANK_LENGTH bytes free; one byte
    more closes it with a BLANK and the put lands at the next segment, on both paths."""
    from store.codec.message import END_FILE_MIN_BLANK_LENGTH
    probe, _, _ = _puts(tmp_path / "probe", False, [("one", Message("TopicA", b"", 1))])
    base = probe[0].wrote_bytes                      # the record of an empty body
    first = [("one", Message("TopicA", b"w", 1)), ("one", Message("TopicA", b"f" * 30000, 1))]
    used = 2 * base + 1 + 30000
    body = 65536 - used - END_FILE_MIN_BLANK_LENGTH - base + over
    calls = first + [("one", Message("TopicA", b"z" * body, 1)), ("one", Message("TopicA", b"n", 1))]
    fast_results, fast_files, answered = _puts(tmp_path / "fast", True, calls)
    slow_results, slow_files, _ = _puts(tmp_path / "slow", False, calls)
    assert fast_results == slow_results and fast_files == slow_files
    assert answered >= (3 if kernel.COMPILED else 0)
    assert all(r.ok for r in fast_results)
    assert fast_results[2].wrote_offset == (used if over <= 0 else 65536)
    assert fast_results[3].wrote_offset == (65536 if over <= 0 else
                                            fast_results[2].wrote_offset + fast_results[2].wrote_bytes)
