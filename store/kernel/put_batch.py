"""`encode_batch` and `place_batch` (C: c/put_batch.c): a put's records encoded in one call, then
placed in the segment with their offsets, store time and msgIds in one call under the put lock.

`encode_batch` answers only when every message takes `encode_put`'s common path and the batch breaks
none of the put path's rules; None otherwise (then the Python path runs and gives its own status and
sentence), and None when the kernel is not compiled. Its twin, `encode_batch_py`, is the same
composition of an `encode_put` in Python. `place_batch_py` is `place_batch`'s twin (the same bytes,
the same msgIds, the same ValueErrors). tests/test_kernel_put_batch.py compares them, and the store's
results with and without the compiled path.
"""

from __future__ import annotations

import struct

from store.kernel import COMPILED, _native, _refuse_overflow

_LAYOUT = struct.Struct("=ii")       # per record: TOTALSIZE, store timestamp position (native int32)
_OFFSETS = struct.Struct(">qq").pack_into
_LONG = struct.Struct(">q").pack_into


def encode_batch_py(messages, context, now_ms: int, encode_put):
    """`encode_batch` with `encode_put` as the per-message encoder (see c/put_batch.c)."""
    if type(messages) is not list or type(context) is not tuple or len(context) != 8:
        raise TypeError("encode_batch(messages (list), context (8-tuple), now_ms)")
    if not messages:
        return None
    max_message_size, segment_size = int(context[3]), int(context[6])
    encoded = []
    total = 0
    for message in list(messages):
        one = encode_put(message, context, now_ms)
        if one is None:
            return None
        if encoded and (one[1] != encoded[0][1] or one[2] != encoded[0][2]):
            return None
        if len(messages) > 1 and one[3] & 0x0C:
            return None
        encoded.append(one)
        total += len(one[0])
        if total + 8 > segment_size:
            return None
    if len(messages) > 1 and total > max_message_size:
        return None
    records = bytearray(b"".join(one[0] for one in encoded))
    layout = b"".join(_LAYOUT.pack(len(one[0]), one[7]) for one in encoded)
    first = encoded[0]
    return records, layout, first[1], first[2], first[3], len(encoded)


def place_batch_py(target, position: int, records, layout, queue_offset: int, phy_offset: int,
                   store_timestamp: int, queued, msg_id_prefix: str) -> tuple[str, ...]:
    """`place_batch` in Python: the same checks, bytes and msgIds (see c/put_batch.c)."""
    _refuse_overflow((position, "n"), (queue_offset, "L"), (phy_offset, "L"), (store_timestamp, "L"))
    if not isinstance(msg_id_prefix, str):
        raise TypeError(f"place_batch() argument 9 must be str, not {type(msg_id_prefix).__name__}")
    view = memoryview(target)
    if view.readonly:
        raise TypeError("place_batch() argument 1 must be read-write bytes-like object")
    layout = bytes(layout)
    entry = _LAYOUT.size
    if len(layout) % entry or not layout:
        raise ValueError("the layout does not describe the records")
    spans = list(_LAYOUT.iter_unpack(layout))
    total = len(records)
    used = 0
    for size, ts_position in spans:
        if size < 36 or size > total - used or ts_position < 36 or ts_position > size - 8:
            raise ValueError("the layout does not describe the records")
        used += size
    if used != total:
        raise ValueError("the layout does not describe the records")
    if position < 0 or position > len(view) or total > len(view) - position:
        raise ValueError("the records do not fit the target at that position")
    if phy_offset < 0 or phy_offset > 2**63 - 1 - total or queue_offset < 0 or \
            queue_offset > 2**63 - 1 - len(spans):
        raise ValueError("offsets out of range")
    if not msg_id_prefix.isascii():
        raise ValueError("the msgId prefix must be ASCII")
    ids = []
    cursor = 0
    for number, (size, ts_position) in enumerate(spans):
        phy = phy_offset + cursor
        _OFFSETS(records, cursor + 20, queue_offset + number if queued else 0, phy)
        _LONG(records, cursor + ts_position, store_timestamp)
        ids.append(msg_id_prefix + f"{phy:016X}")
        cursor += size
    data = bytes(records)
    view[position + 8:position + total] = data[8:]
    view[position:position + 8] = data[:8]
    return tuple(ids)


encode_batch = _native.encode_batch if COMPILED else None
place_batch = _native.place_batch if COMPILED else place_batch_py
