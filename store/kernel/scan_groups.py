"""Grouping kernel scan rows by queue: which (topic, queue id) each record belongs to, in bulk.

Topics are compared as bytes (plus their length, so that a topic ending in NUL bytes is not confused
with a shorter one) and decoded once per distinct queue; topics longer than `VECTOR_TOPIC_MAX` bytes
(v2 records allow 32,767) go through a Python loop over the rows instead.

`span_groups` numbers distinct byte spans (with an int64 tag) as `np.unique` numbers them packed: the
C (`c/groups.c`) hashes the rows and sorts only the distinct groups; `_packed_groups` is its twin, the
numpy packing and sort of every row (tests/test_kernel_groups.py compares them).
"""

from __future__ import annotations

import numpy as np

from store import kernel

VECTOR_TOPIC_MAX = 256
_C = kernel.COL
_TOPIC_POS, _TOPIC_LEN, _QUEUE_ID = _C["topic_pos"], _C["topic_len"], _C["queue_id"]


def queue_groups(buf, rows: np.ndarray) -> tuple[list[tuple[str, int]], np.ndarray]:
    """(distinct (topic, queue id) keys, index into them for every row) of the scan `rows` of `buf`.

    Topic bytes are decoded as UTF-8 with replacement, as `check_message` decodes them.
    """
    if not len(rows):
        return [], np.zeros(0, dtype=np.int64)
    topic_pos, topic_len = rows[:, _TOPIC_POS], rows[:, _TOPIC_LEN]
    widest = int(topic_len.max())
    if widest > VECTOR_TOPIC_MAX:
        keys: dict[tuple[str, int], int] = {}
        inverse = np.empty(len(rows), dtype=np.int64)
        for number, (pos, length, queue_id) in enumerate(
                rows[:, [_TOPIC_POS, _TOPIC_LEN, _QUEUE_ID]].tolist()):
            key = (bytes(buf[pos:pos + length]).decode("utf-8", "replace"), queue_id)
            inverse[number] = keys.setdefault(key, len(keys))
        return list(keys), inverse
    first, inverse = span_groups(buf, topic_pos, topic_len, rows[:, _QUEUE_ID])
    keys_list = []
    for row in first.tolist():
        pos, length = int(topic_pos[row]), int(topic_len[row])
        keys_list.append((bytes(buf[pos:pos + length]).decode("utf-8", "replace"),
                          int(rows[row, _QUEUE_ID])))
    return keys_list, inverse


def span_groups(buf, positions: np.ndarray, lengths: np.ndarray,
                tags: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each group, group of every row) of the spans buf[position:position + length]
    with their tags (None: all 0), numbered as `np.unique` numbers the rows packed: the bytes
    zero-padded to the widest, the length as >i4, the tag as >i8. Spans are not empty lists."""
    if _span_groups_c is not None:
        n = len(positions)
        inverse = np.empty(n, dtype=np.int64)
        first = np.empty(n, dtype=np.int64)
        count = _span_groups_c(buf, np.ascontiguousarray(positions, dtype=np.int64),
                               np.ascontiguousarray(lengths, dtype=np.int64),
                               b"" if tags is None else np.ascontiguousarray(tags, dtype=np.int64),
                               inverse, first)
        if count >= 0:
            return first[:count], inverse
    return _packed_groups(buf, positions, lengths, tags)


def _packed_groups(buf, positions: np.ndarray, lengths: np.ndarray,
                   tags: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`span_groups`' twin: every row packed, then np.unique (positions past the end read its last
    byte, which the C refuses; a well-formed scan row never has one)."""
    width = max(int(lengths.max()), 1)
    data = np.frombuffer(buf, dtype=np.uint8)
    try:
        columns = np.arange(width)
        if len(data):
            gather = np.minimum(positions[:, None] + columns, len(data) - 1)
            names = np.where(columns < lengths[:, None], data[gather], 0)
        else:                         # only empty spans fit an empty buffer
            names = np.zeros((len(positions), width), dtype=np.uint8)
    finally:
        del data                      # no export of the map may outlive this call (close/resize)
    extra = 4 if tags is None else 12
    packed = np.empty((len(positions), width + extra), dtype=np.uint8)
    packed[:, :width] = names
    packed[:, width:width + 4] = lengths.astype(">i4").view(np.uint8).reshape(-1, 4)
    if tags is not None:
        packed[:, width + 4:] = np.asarray(tags).reshape(-1, 1).astype(">i8").view(
            np.uint8).reshape(-1, 8)
    _, first, inverse = np.unique(packed.view(f"V{width + extra}").ravel(), return_index=True,
                                  return_inverse=True)
    return first, inverse.ravel()


_span_groups_c = kernel._native.span_groups if kernel.COMPILED else None
