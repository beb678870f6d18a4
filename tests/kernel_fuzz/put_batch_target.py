"""The fuzz driver's `encode_batch` and `place_batch` targets (store/kernel/c/put_batch.c), checked
against their twins in store/kernel/put_batch.py (crc32 has its own target, crc_target.py).

encode_batch: batches of 0-40 messages, mostly well formed, some with a second topic or queue, a
DELAY, a transactional flag, a bad field, bodies near maxMessageSize and segment sizes; the twin is
the same composition over the sanitized `encode_put` (itself checked against the Python path by the
driver's encode_put target), and when C answers, its records must be the Python path's records.
place_batch: real records of the corpus back to back, with their layout sometimes forged, into
targets at edge positions, with edge offsets, times and msgId prefixes.
"""

from __future__ import annotations

import os
import struct

from store.api import Message
from store.commitlog import put_path
from store.kernel.put_batch import encode_batch_py, place_batch_py
from tests.kernel_fuzz.edges import INT64_EDGES, OUT_OF_RANGE, POSITION_EDGES

LAYOUT = struct.Struct("=ii")


def _message(rng, topic: str, queue_id: int) -> Message:
    def pick(options):
        return options[0] if rng.random() < 0.8 else rng.choice(options)
    properties = {"UNIQ_KEY": f"U{rng.randrange(1000)}"} if rng.random() < 0.5 else {}
    if rng.random() < 0.05:
        properties[rng.choice(["DELAY", "a\x02", "", "KEYS", "TAGS"])] = rng.choice(["1", "v", ""])
    return Message(topic=pick([topic, "Other", "bad topic!"]), queue_id=pick([queue_id, 1, -1]),
                   body=pick([os.urandom(rng.randrange(200)), b"", b"x" * rng.choice([900, 5000])]),
                   tags=pick(["TagA", None, "", "a\x01"]), keys=pick([["k1", "k2"], (), "k1 k2"]),
                   properties=properties, sys_flag=pick([0, 4, 8, 12]),
                   born_host=pick([None, "10.1.2.3:77", "[::1]:5"]))


def encode_batch(fuzzer, outcome, disagreement) -> None:
    rng = fuzzer.rng
    count = rng.choice([1, 1, 2, 3, 32, 40, 0])
    messages = [_message(rng, "T", 3) for _ in range(count)]
    settings = put_path.PutSettings(
        rng.choice(["127.0.0.1:10911", "[::2]:1"]), rng.choice([4 << 20, 1000, 6000, 40000, 0]),
        rng.choice(["4.9", "5.x"]), rng.random() < 0.5, (1000, 5000),
        rng.choice([1 << 20, 8192, 2000, 300]))
    now_ms = rng.choice([1_700_000_000_000, 0, 2**63 - 1])
    expected = []
    for message in messages:                 # first: the Python path learns topics and hosts
        try:
            expected.append(put_path._encode_for_put(message, settings, now_ms)[0])
        except Exception:
            expected.append(None)
    fuzzer.last_input = {"target": "encode_batch", "messages": repr(messages)[:3000],
                         "settings": repr(settings), "now_ms": now_ms}
    context = settings.kernel_context
    got = outcome(fuzzer.native.encode_batch, messages, context, now_ms)
    fuzzer.executions["encode_batch"] += 1
    if fuzzer.rng.random() >= fuzzer.compare_rate:
        return
    fuzzer.compared["encode_batch"] += 1
    want = outcome(encode_batch_py, messages, context, now_ms, fuzzer.native.encode_put)
    if got != want:
        raise disagreement(f"encode_batch: C {got!r:.300} != twin {want!r:.300}")
    if got[0] == "ok" and got[1] is not None:
        if None in expected or bytes(got[1][0]) != b"".join(bytes(r) for r in expected):
            raise disagreement("encode_batch: C's records are not the Python path's")


def place_batch(fuzzer, outcome, disagreement) -> None:
    rng = fuzzer.rng
    records = [rng.choice(fuzzer.records) for _ in range(rng.choice([1, 2, 5, 32]))]
    layout = b"".join(LAYOUT.pack(len(r), 68 if r[39] & 0x10 else 56) for r in records)
    if rng.random() < 0.2:                   # a forged layout
        forged = bytearray(layout)
        at = rng.randrange(len(forged) // 4) * 4
        forged[at:at + 4] = struct.pack("=i", rng.choice([0, -1, 35, 36, 2**31 - 1, 100000,
                                                          len(records[0]) - 7]))
        layout = bytes(forged[:rng.choice([len(forged), len(forged) - 1, len(forged) - 8, 0])])
    data = b"".join(records)
    if rng.random() < 0.1:
        data = data[:rng.randrange(len(data) + 1)]
    slack = rng.choice([0, 0, 1, 7, 64])
    size = max(0, len(data) + slack - (1 if rng.random() < 0.1 else 0))
    position = rng.randrange(slack + 2) if rng.random() < 0.8 else rng.choice(POSITION_EDGES)
    ints = [rng.choice([0, 5, 1 << 30]) if rng.random() < 0.6 else
            rng.choice(INT64_EDGES) if rng.random() < 0.95 else rng.choice(OUT_OF_RANGE)
            for _ in range(3)]
    queued = rng.choice([True, False, 1, 0])
    prefix = rng.choice(["0A01020300004D", "", "é", "x" * 40])
    fuzzer.last_input = {"target": "place_batch", "data": data.hex()[:4000], "layout": layout.hex(),
                         "size": size, "position": position, "ints": ints, "queued": queued,
                         "prefix": prefix}
    target_c, records_c = bytearray(size), bytearray(data)
    args = (position, layout, ints[0], ints[1], ints[2], queued, prefix)
    got = outcome(fuzzer.native.place_batch, target_c, args[0], records_c, *args[1:])
    fuzzer.executions["place_batch"] += 1
    if fuzzer.rng.random() >= fuzzer.compare_rate:
        return
    fuzzer.compared["place_batch"] += 1
    target_py, records_py = bytearray(size), bytearray(data)
    want = outcome(place_batch_py, target_py, args[0], records_py, *args[1:])
    if got != want or target_c != target_py or records_c != records_py:
        raise disagreement(f"place_batch: C {got!r:.300} != twin {want!r:.300} (or the bytes differ)")

