"""The fuzz driver's `put_fast` target (store/kernel/c/put_fast.c) against its twin
(store/kernel/put_fast.py's `put_fast_py`), also run unsanitized by tests/test_kernel_put_fast.py.

Input: a stand-in store (plain objects with the attributes put_fast reads) whose segment fields take
int64 edge values (wrote_position, file_size_bytes, file_from_offset, the queue offset in the table,
last_store_timestamp), a segment buffer of random size, read-only or not, flags that decline, a held
or free lock, a non-ASCII msgId prefix, result classes with other slots, and a message from a small
pool (common, delayed, oversized, a queue not noted, one whose noting raises); now and then the
segment takes records by pwrite, to a temporary file (or a descriptor closed, or read-only).
Each execution runs the C on one copy of the state and the twin on another and compares the
outcomes, the buffers, the pwrite files and the state after (the noted queues included).
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading

from store.api import Message, PutMessageResult, PutMessageStatus
from store.commitlog import put_path
from store.commitlog.put_path import PutSettings
from store.kernel.put_fast import put_fast_py
from tests.kernel_fuzz.edges import INT64_EDGES

_SETTINGS = PutSettings(store_host="10.0.0.7:10911", max_message_size=70000,
                        properties_style="4.9", allow_v2_records=False,
                        delay_levels_ms=(1000, 5000), segment_size_bytes=65536)
put_path._remember_topic("TopicA", _SETTINGS)
put_path._host_field("127.0.0.1:0")
_MESSAGES = [Message("TopicA", b"x" * 40, 1, tags="t", keys=["a"]),
             Message("TopicA", b"", 1, properties={"UNIQ_KEY": "U1"}),
             Message("TopicA", b"y" * 300, 1, sys_flag=4),
             Message("TopicA", b"d", 1, properties={"DELAY": "1"}),
             Message("TopicA", b"z" * 66000, 1),
             Message("TopicA", b"q", 2),
             Message("TopicA", b"r", 7)]       # noting its queue raises, after the put


class _Bag:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def _other_result():
    return type("R", (), {"__slots__": ("status", "wrote_offset")})


def _case(rng, buffer_size):
    """A fresh stand-in store, message and state from the same choices (one per side)."""
    def edge(small):
        return rng.choice(INT64_EDGES) if rng.random() < 0.15 else small
    buffer = bytearray(buffer_size)
    mapped = _Bag(wrote_position=edge(rng.randrange(0, 600)), file_size_bytes=edge(buffer_size),
                  file_from_offset=edge(rng.choice((0, 65536))), write_buffer=None,
                  buffer=bytes(buffer) if rng.random() < 0.05 else buffer)
    commit_log = _Bag(clock_ms=lambda: 1_700_000_000_000, make_dispatch_requests=rng.random() < 0.05,
                      last_store_timestamp=edge(1_600_000_000_000),
                      queue_offsets={("TopicA", 1): edge(rng.randrange(3))} if rng.random() < 0.9
                      else {},
                      _msg_id_prefix="0A00000700002A9F" if rng.random() < 0.95 else "\u00e9")
    services = _Bag(sync_flush=rng.random() < 0.05, commit_service=None)
    cleanup = _Bag(disk_full=rng.random() < 0.05)
    config = _Bag(broker_role="SLAVE" if rng.random() < 0.05 else "ASYNC_MASTER")
    mapped.pwrite_records = rng.random() < 0.2      # [SYNC_FLUSH] records by pwrite to a file
    mapped._sync_fd, mapped.path = -1, None
    if mapped.pwrite_records and rng.random() < 0.9:
        handle, mapped.path = tempfile.mkstemp(prefix="put_fast_fuzz")
        os.ftruncate(handle, buffer_size)
        if rng.random() < 0.1:                      # read-only: every write fails (EBADF)
            os.close(handle)
            handle = os.open(mapped.path, os.O_RDONLY)
        mapped._sync_fd = handle
    mapped_files = _Bag(files=[mapped] if rng.random() < 0.95 else [])
    lock = threading.Lock()
    if rng.random() < 0.05:
        lock.acquire()
    noted = {"TopicA": {1}}

    def note_topic(topic, queue_id):     # MessageStore._note_topic's effect on the noted queues
        if queue_id > 5:
            raise ValueError(f"queue {queue_id} of {topic}: no such queue")
        noted.setdefault(topic, set()).add(queue_id)
    store = _Bag(closed=False, read_only=rng.random() < 0.05, clock_ms=lambda: 1_650_000_000_000,
                 _encode_batch=_native_encoder, _note_topic=note_topic)
    result_cls = PutMessageResult if rng.random() < 0.95 else _other_result()
    state = (commit_log, services, cleanup, config, mapped_files, lock, _SETTINGS.kernel_context,
             noted, result_cls, PutMessageStatus.PUT_OK, None, _native_encoder)
    return store, state, mapped, commit_log


_native_encoder = object()      # identity only: put_fast checks store._encode_batch is state[11]


def _written(mapped) -> bytes | None:
    """The pwrite file's bytes (then closed and removed), None without one."""
    if mapped.path is None:
        return None
    try:
        with open(mapped.path, "rb") as handle:
            return handle.read()
    finally:
        os.close(mapped._sync_fd)
        os.remove(mapped.path)


def _after(answer, mapped, commit_log, noted):
    value = answer[1] if answer[0] == "ok" else None
    fields = (tuple(repr(getattr(value, name, None)) for name in (
        "status", "wrote_offset", "wrote_bytes", "msg_id", "queue_offset", "store_timestamp",
        "message_count", "msg_ids", "error")) if value is not None and not isinstance(value, int)
        else value)
    return (answer[0], answer[1:] if answer[0] != "ok" else fields, bytes(mapped.buffer),
            _written(mapped),
            mapped.wrote_position, dict(commit_log.queue_offsets), commit_log.last_store_timestamp,
            sorted(noted.items()))


def put_fast(fuzzer, outcome, disagreement) -> None:
    """One execution: the sanitized put_fast against its twin (always compared)."""
    rng = fuzzer.rng
    seed = rng.randrange(2**32)
    buffer_size = rng.choice((0, 8, 200, 4096))
    message = rng.choice(_MESSAGES)
    # Now and then a born time given (a second try's), at an edge or not an int at all.
    born = rng.choice([(), (), (), (1_700_000_000_000,), (0,), (-1,), (2**63 - 1,), (1.5,),
                       (None,)])
    fuzzer.last_input = {"target": "put_fast", "seed": seed, "buffer": buffer_size,
                         "message": repr(message)[:200], "born": repr(born)}
    answers = []
    twin = functools.partial(put_fast_py, encode_put=fuzzer.native.encode_put)
    for function in (fuzzer.native.put_fast, twin):
        store, state, mapped, commit_log = _case(type(rng)(seed), buffer_size)
        answers.append(_after(outcome(function, store, message, state, *born), mapped, commit_log,
                              state[7]))
    fuzzer.executions["put_fast"] += 1
    fuzzer.compared["put_fast"] += 1
    if answers[0] != answers[1]:
        raise disagreement(f"put_fast: C {answers[0][:2]} != twin {answers[1][:2]}")
