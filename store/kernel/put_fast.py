"""`put_fast` (C: c/put_fast.c): `MessageStore.put_message`'s common case in one native call.

The common case: a 4.9-style store without LMQ or batch topics (`_plain_puts`), no commit service
(under SYNC_FLUSH the caller waits for the group commit after the answer:
`StoreServices.await_flush`), no dispatch requests, a message `encode_put` takes (its topic already
validated), a record that fits the last segment, and a put lock that is free or freed while this
gives the GIL up (64 times at most). Then one call reads the clocks, encodes, places the record
(offsets, store time, first 8 bytes last; by pwrite(2) where the segment says so under
SYNC_FLUSH, `MappedFile.write_records_by_pwrite`) and answers the `PutMessageResult`; a queue's
first put then notes it in topics.json (`store._note_topic`, as `_acknowledge`), the put lock
released.
Anything else answers before anything is written, None (no clock read yet) or the born time it read,
and the store's Python path runs (with that born time), so every refusal keeps its status and
sentence and a clock is read as often as the Python path reads it.

`put_fast_py` is the twin: the same steps in Python over the same objects (it uses the compiled
`encode_put`, which has no Python twin; without the kernel there is no fast path: `put_fast` is None).
tests/test_kernel_put_fast.py compares the two, and stores with and without the fast path.
"""

from __future__ import annotations

import errno
import os
import struct
import time

from store.kernel import COMPILED, _native

RESULT_FIELDS = ("status", "wrote_offset", "wrote_bytes", "msg_id", "queue_offset", "store_timestamp",
                 "message_count", "msg_ids", "error")     # PutMessageResult's slots, in order
PUT_LOCK_YIELDS = 64    # as c/put_fast.c
_OFFSETS = struct.Struct(">qq").pack_into
_LONG = struct.Struct(">q").pack_into


def system_clock_ms() -> int:
    """The stores' default clock; `put_fast` reads CLOCK_REALTIME itself when a clock is this one."""
    return time.time_ns() // 1_000_000


def put_fast_state(store, result_cls, put_ok) -> tuple:
    """What `put_fast` keeps for a store's lifetime (objects a store never replaces)."""
    services = store.services
    commit_log = store.commit_log
    return (commit_log, services, services.cleanup, store.config, commit_log.mapped_files,
            commit_log.put_lock, store._put_settings.kernel_context, store._noted_queues,
            result_cls, put_ok, system_clock_ms, _native.encode_batch if COMPILED else None)


def _clock(owner, default_clock) -> int:
    clock = owner.clock_ms
    return system_clock_ms() if clock is default_clock else clock()


def _append_descriptor(mapped) -> int:
    """The descriptor put_fast writes `mapped`'s records by (MappedFile.pwrite_records), -1 for
    the map, -2 to decline (the flag on, the descriptor closed); as c/put_fast.c's."""
    if not getattr(mapped, "pwrite_records", False):
        return -1
    fd = mapped._sync_fd.__index__()
    return -2 if fd < 0 or fd > 2**31 - 1 else fd


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """pwrite all of `data` at `offset`, again after a short write (none at all: EIO)."""
    while len(data):
        done = os.pwrite(fd, data, offset)
        if done <= 0:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        data, offset = data[done:], offset + done


def put_fast_py(store, message, state, *born, encode_put=None):
    """`put_fast` in Python (see c/put_fast.c): the same checks, bytes, state changes and answer:
    a PutMessageResult; else, with nothing written, None (no clock read yet) or the born time read
    (the Python path puts with it). `born`: the time an earlier try answered, used instead of
    reading the clock. `encode_put`: the compiled one unless given (the fuzz driver gives its
    sanitized build's)."""
    if type(state) is not tuple or len(state) != 12 or len(born) > 1 or \
            (born and type(born[0]) is not int):
        raise TypeError("put_fast(store, message, state (12-tuple)[, born (int)])")
    (commit_log, services, cleanup, config, mapped_files, lock, context, noted, result_cls, put_ok,
     default_clock, encoder) = state
    if type(noted) is not dict or type(context) is not tuple:
        raise TypeError("put_fast: state[7] must be a dict, state[6] a tuple")
    if not isinstance(result_cls, type) or result_cls.__dict__.get("__slots__") != RESULT_FIELDS:
        raise TypeError("put_fast: the result class must be a slots class with PutMessageResult's "
                        "fields")
    if store.closed or store.read_only or cleanup.disk_full or \
            commit_log.make_dispatch_requests or config.broker_role == "SLAVE" or \
            services.commit_service is not None or store._encode_batch is not encoder:
        return None
    # A born time given: the one an earlier try answered (the topic validated since).
    born = born[0] if born else _clock(store, default_clock)
    encoded = (encode_put or _native.encode_put)(message, context, born)
    if encoded is None:
        return born
    record, topic, queue_id, sys_flag = encoded[:4]
    ts_position = encoded[7]
    size = len(record)
    if size + 8 > context[6] or ts_position < 36 or ts_position > size - 8:
        return born
    kind = sys_flag & 0x0C
    queued = kind != 0x04 and kind != 0x0C
    # The lock only with the GIL held; a busy one's holder (the Python path) needs the GIL to go
    # on: give it up (os.sched_yield releases it) a few times before the Python path waits.
    for tries in range(PUT_LOCK_YIELDS + 1):
        if lock.acquire(False):
            break
        if tries == PUT_LOCK_YIELDS:
            return born
        os.sched_yield()
    try:
        files = mapped_files.files
        if type(files) is not list or not files:
            return born
        mapped = files[-1]
        position, file_size, file_from = \
            mapped.wrote_position, mapped.file_size_bytes, mapped.file_from_offset
        if position < 0 or file_size < position or size + 8 > file_size - position:
            return born
        if file_from < 0 or position > 2**63 - 1 - file_from:
            return born
        table = commit_log.queue_offsets
        if type(table) is not dict:
            return born
        key = (topic, queue_id)
        queue_offset = table.get(key, 0) if queued else 0
        phy = file_from + position
        if queue_offset < 0 or queue_offset == 2**63 - 1:
            return born
        target = mapped.write_buffer
        view = memoryview(mapped.buffer if target is None else target)
        if view.readonly:
            raise BufferError("Object is not writable.")
        if position > len(view) or size > len(view) - position:
            return born
        append_fd = _append_descriptor(mapped)      # [SYNC_FLUSH] pwrite, not the map
        if append_fd == -2:
            return born
        prefix = commit_log._msg_id_prefix
        if type(prefix) is not str or not prefix.isascii():
            return born
        msg_id = prefix + f"{phy:016X}"
        # The store time last: no decline after it (a clock is read as often as on the Python path).
        store_ts = max(_clock(commit_log, default_clock), commit_log.last_store_timestamp)
        _OFFSETS(record, 20, queue_offset, phy)
        _LONG(record, ts_position, store_ts)
        if append_fd >= 0:      # size and magic last; nothing moved yet if either raises
            _pwrite_all(append_fd, memoryview(record)[8:], position + 8)
            _pwrite_all(append_fd, memoryview(record)[:8], position)
        else:
            view[position + 8:position + size] = record[8:]
            view[position:position + 8] = record[:8]
        mapped.wrote_position = position + size
        if queued:
            table[key] = queue_offset + 1
        commit_log.last_store_timestamp = store_ts
    finally:
        lock.release()
    result = result_cls(put_ok, phy, size, msg_id, queue_offset, store_ts, 1, (msg_id,), None)
    queues = noted.get(topic)       # _acknowledge's first step: a queue's first put notes it
    if type(queues) not in (set, frozenset) or queue_id not in queues:
        store._note_topic(topic, queue_id)
    return result


put_fast = _native.put_fast if COMPILED else None
