"""Grouping kernel scan rows by queue: which (topic, queue id) each record belongs to, in bulk.

Topics are compared as bytes (plus their length, so that a topic ending in NUL bytes is not confused
with a shorter one) with numpy, and decoded once per distinct queue; topics longer than
`VECTOR_TOPIC_MAX` bytes (v2 records allow 32,767) go through a Python loop over the rows instead.
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
    data = np.frombuffer(buf, dtype=np.uint8)
    try:
        columns = np.arange(widest)
        gather = topic_pos[:, None] + columns
        names = np.where(columns < topic_len[:, None], data[np.minimum(gather, len(data) - 1)], 0)
    finally:
        del data                      # no export of the map may outlive this call (close/resize)
    packed = np.empty((len(rows), widest + 12), dtype=np.uint8)
    packed[:, :widest] = names
    packed[:, widest:widest + 4] = topic_len.astype(">i4").view(np.uint8).reshape(-1, 4)
    packed[:, widest + 4:] = rows[:, [_QUEUE_ID]].astype(">i8").view(np.uint8).reshape(-1, 8)
    _, first, inverse = np.unique(packed.view(f"V{widest + 12}").ravel(), return_index=True,
                                  return_inverse=True)
    keys_list = []
    for row in first.tolist():
        pos, length = int(topic_pos[row]), int(topic_len[row])
        keys_list.append((bytes(buf[pos:pos + length]).decode("utf-8", "replace"),
                          int(rows[row, _QUEUE_ID])))
    return keys_list, inverse.ravel()
