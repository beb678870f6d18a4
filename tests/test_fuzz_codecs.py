"""Every decoder, fed arbitrary bytes: it returns a value or raises a typed error, nothing else.

"Typed error" means a `store.errors.StoreError` subclass (normally `CorruptDataError`). A decoder
that leaks `struct.error`, `IndexError`, `UnicodeDecodeError`, `OverflowError`... on damaged input is
a bug: callers (recovery, check, the dashboard) only catch `StoreError`.

Hypothesis runs every decoder on random bytes and on mutations of valid encodings (so the fuzzing
reaches past the first length check). `test_atheris_smoke` runs the same targets under atheris'
coverage-guided engine for a few thousand inputs when atheris is installed (optional).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.codec import fastjson, java_properties
from store.codec import message as msgcodec
from store.codec import record_check
from store.codec import rocksdb_cq
from store.codec.checkpoint_codec import Checkpoint, decode_checkpoint, encode_checkpoint
from store.codec.cq_unit import pack_unit, unpack_unit, units_from_buffer
from store.codec.index_codec import (IndexEntry, IndexHeader, decode_entry, decode_header,
                                     encode_entry, encode_header)
from store.codec.msgid import decode_host, decode_message_id
from store.codec.properties import decode_properties
from store.codec.uniq_key import decode_uniq_key
from store.errors import StoreError

# The loaded hypothesis profile's count (tests/conftest.py: 200 under CI, 60 otherwise), unless
# RMQ_FUZZ_EXAMPLES says how many.
EXAMPLES = int(os.environ.get("RMQ_FUZZ_EXAMPLES", settings().max_examples))


def _valid_record() -> bytes:
    return bytes(msgcodec.encode_message(
        topic="FuzzTopic", queue_id=3, body=b"hello body", properties_raw=b"KEYS\x01k1\x02TAGS\x01t",
        born_timestamp=1, born_host="10.0.0.1:1234", store_timestamp=2,
        store_host="[::1]:10911"))


SEEDS = {
    "record": _valid_record(),
    "checkpoint": encode_checkpoint(Checkpoint(1, 2, 3, 4, 5), "5.x"),
    "index_header": encode_header(IndexHeader(1, 2, 3, 4, 5, 6)),
    "index_entry": encode_entry(IndexEntry(123, 456, 7, 8)),
    "cq_unit": pack_unit(100, 200, 300),
    "json": b'{"offsetTable":{"T@g":{0:12,1:13}},"dataVersion":{"counter":3}}',
}


def _decode_record(data: bytes):
    msgcodec.decode_message(data, 0, check_crc=True)


def _check_record(data: bytes):
    result = record_check.check_message(data, 0, check_crc=True, limit=len(data))
    assert result.kind in (record_check.CHECK_RECORD, record_check.CHECK_BLANK, record_check.CHECK_INVALID)
    if result.kind == record_check.CHECK_RECORD:
        assert 0 < result.size <= len(data)


def _msgid(data: bytes):
    decode_message_id(data.decode("latin-1"))
    decode_message_id(data.hex().upper())


def _host(data: bytes):
    if len(data) >= 8:
        decode_host(data, 0, False)
    if len(data) >= 20:
        decode_host(data, 0, True)


def _cq(data: bytes):
    if len(data) >= 20:
        unpack_unit(data, 0)
    units_from_buffer(data[: len(data) - len(data) % 20])


def _rocksdb(data: bytes):
    for decoder in (rocksdb_cq.decode_cq_key, rocksdb_cq.decode_cq_value,
                    rocksdb_cq.decode_offset_key, rocksdb_cq.decode_offset_value,
                    rocksdb_cq.decode_checkpoint_value):
        try:
            decoder(data)
        except StoreError:
            pass


DECODERS = {
    "decode_message": _decode_record,
    "check_message": _check_record,
    "decode_properties": decode_properties,
    "decode_message_id": _msgid,
    "decode_host": _host,
    "cq_unit": _cq,
    "index_header": lambda d: decode_header(d, 0),
    "index_entry": lambda d: decode_entry(d, 0),
    "checkpoint": decode_checkpoint,
    "fastjson": fastjson.loads,
    "java_properties": lambda d: java_properties.load(d.decode("utf-8", "replace")),
    "rocksdb_cq": _rocksdb,
    "uniq_key": lambda d: _uniq_key(d),
}


def _uniq_key(data: bytes):
    # decode_uniq_key's documented contract is ValueError: a UNIQ_KEY is a producer's string
    # property, not store bytes, and callers treat a bad one as "no timestamp hint".
    try:
        decode_uniq_key(data.decode("latin-1"))
    except ValueError:
        pass


def run_decoder(name: str, data: bytes) -> None:
    try:
        DECODERS[name](data)
    except StoreError:
        pass


def _mutations(seed: bytes):
    return st.tuples(st.lists(st.tuples(st.integers(0, max(0, len(seed) - 1)), st.integers(0, 255)),
                              max_size=6),
                     st.integers(0, len(seed))).map(
        lambda edits: _apply(seed, *edits))


def _apply(seed: bytes, flips, cut) -> bytes:
    data = bytearray(seed)
    for position, value in flips:
        if data:
            data[position] = value
    return bytes(data[:cut]) if cut else bytes(data)


ANY_BYTES = st.one_of(st.binary(max_size=300), *[_mutations(seed) for seed in SEEDS.values()])


@pytest.mark.parametrize("name", sorted(DECODERS))
@settings(max_examples=EXAMPLES, deadline=None)
@given(data=ANY_BYTES)
def test_decoder_gives_value_or_typed_error(name, data):
    run_decoder(name, data)


ATHERIS_TARGET = r'''
import sys, atheris
with atheris.instrument_imports():
    from tests import test_fuzz_codecs as t
names = sorted(t.DECODERS)
def one(data):
    if not data:
        return
    t.run_decoder(names[data[0] % len(names)], data[1:])
atheris.Setup([sys.argv[0], "-runs=%s" % sys.argv[1], "-seed=1"], one)
atheris.Fuzz()
'''


def test_atheris_smoke(tmp_path):
    """Coverage-guided fuzzing of every decoder (RMQ_ATHERIS_RUNS inputs, default 5000)."""
    pytest.importorskip("atheris")
    runs = os.environ.get("RMQ_ATHERIS_RUNS", "5000")
    script = tmp_path / "fuzz.py"
    script.write_text(ATHERIS_TARGET)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, str(script), runs], cwd=root, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-3000:]
