"""The fuzz driver's `decode_records` target (store/kernel/c/decode.c), kept beside driver.py.

Input: one to four records of the corpus (real RocketMQ records), some mutated: a length field set
to an edge value, a cut, flipped bytes, PROPERTIES or TOPIC bytes made non-ASCII or separator-heavy,
each record exactly sized (ASan's red zones). Checked against `_decode_records_py` with the codec's
own Python functions: the same MessageRecords (==, repr, field types, properties order) or the same
refusal (exception type and message).
"""

from __future__ import annotations

import dataclasses
import struct

from store.codec import message as msgcodec
from store.codec import msgid
from store.codec.properties import decode_properties
from store.kernel import decode as kdecode

ARGS = (msgcodec.MessageRecord, msgcodec.decode_message, decode_properties, msgid.host_to_string)
EDGES = [0, 1, -1, 2, 7, 8, 40, 127, 128, 255, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000]


def _length_fields(buf: bytes) -> list[tuple[int, int]]:
    """(position, width) of TOTALSIZE, MAGICCODE, SYSFLAG, BODY/TOPIC/PROPERTIES LENGTH."""
    fields = [(0, 4), (4, 4), (36, 4)]
    if len(buf) >= 40:
        sys_flag = struct.unpack_from(">i", buf, 36)[0]
        at = 68 + (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)
        fields.append((at, 4))
        if at + 4 <= len(buf):
            at += 4 + max(0, struct.unpack_from(">i", buf, at)[0])
            fields.append((at, 1))
            fields.append((at, 2))
            if at + 1 <= len(buf):
                fields.append((at + 1 + buf[at], 2))
    return [(p, w) for p, w in fields if p + w <= len(buf)]


def _mutate(rng, record: bytes) -> bytes:
    buf = bytearray(record)
    for _ in range(rng.choice([1, 1, 2, 3])):
        op = rng.randrange(6)
        fields = _length_fields(bytes(buf))
        if op <= 1 and fields:
            at, width = rng.choice(fields)
            buf[at:at + width] = (rng.choice(EDGES) % (1 << (8 * width))).to_bytes(width, "big")
        elif op == 2:
            del buf[rng.randrange(len(buf) + 1):]
        elif op == 3 and buf:                       # the tail holds TOPIC and PROPERTIES
            at = len(buf) - 1 - rng.randrange(min(len(buf), 80))
            buf[at] = rng.choice([0x01, 0x02, 0x80, 0xC3, 0xFF, 0x00, 0x41])
        elif op == 4 and buf:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        else:
            buf += bytes(rng.randrange(4))
    return bytes(buf)


def _shape(outcome):
    if outcome[0] != "ok":
        return outcome
    return ("ok", repr(outcome[1]), [[type(getattr(r, f.name)) for f in dataclasses.fields(r)]
                                     + [list(r.properties)] for r in outcome[1]])


def decode_records(fuzzer, outcome, disagreement) -> None:
    """One execution: `fuzzer` is the driver's Fuzzer (its rng, records, native module)."""
    rng = fuzzer.rng
    records = [rng.choice(fuzzer.records) for _ in range(rng.randrange(1, 5))]
    records = [_mutate(rng, r) if rng.random() < 0.6 else bytes(r) for r in records]
    fuzzer.last_input = {"target": "decode_records", "records": [r.hex() for r in records]}
    got_c = outcome(fuzzer.native.decode_records, records, *ARGS)
    fuzzer.executions["decode_records"] += 1
    if fuzzer._compare():
        fuzzer.compared["decode_records"] += 1
        got_py = outcome(kdecode._decode_records_py, records, *ARGS)
        if got_c != got_py or _shape(got_c) != _shape(got_py):
            raise disagreement(f"decode_records: C {str(got_c)[:300]} != Python {str(got_py)[:300]}")
