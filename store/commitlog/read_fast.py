"""The commonest pull in one native call: no tag filter, no byte cap, a window of at most
`SMALL_WINDOW_UNITS` units (split from store/commitlog/read_path.py, whose `get_message` is the general
path and decides whenever this answers None).

Per pull, the facade's short path is first one native call under the queue store's lock
(`FileConsumeQueueStore.pull_direct` -> `store.kernel.pull_window`: the consume-queue window read from
the queue's mapped segment, the commit log's segment picked, then `pull_unfiltered`), for the queue
the store touched last while it is mapped. Otherwise, or when that call says None, the previous
steps: the queue store's `pull_window` (one lock, one LRU check, the units as bytes), one
`end_and_file` of the commit log (its end and the first record's segment) and the C call
(`store.kernel.pull.pull_unfiltered`: plan, slice or decode, record check).
"""

from __future__ import annotations

import struct

from store.api import GetMessageResult, GetMessageStatus
from store.codec import msgid
from store.codec.message import MessageRecord, decode_message
from store.codec.properties import decode_properties
from store.commitlog.read_plan import TransferLimits
from store.kernel.pull import pull_unfiltered
from store.kernel.result import found_result

SMALL_WINDOW_UNITS = 64     # up to this many units (no filter), the plan is made on tuples
_FIRST_PHY = struct.Struct(">q")   # the first unit's commit log offset
_TOPIC_BYTES: dict = {}   # topic -> its UTF-8 (the C check compares bytes)
_LIMIT_ARGS: tuple = (None,)    # see _limit_args
_FOUND = GetMessageStatus.FOUND   # a module global: an enum class attribute costs ~80 ns a read
_DECODERS = (MessageRecord, decode_message, decode_properties, msgid.host_to_string)


def pull_unfiltered_fast(commit_log, consume_queues, topic: str, queue_id: int, queue_offset: int,
                         max_msg_nums: int, decode: bool | str,
                         limits: TransferLimits) -> GetMessageResult | None:
    """`get_message`'s commonest pull in the fewest steps: no tag filter, no byte cap, a file
    consume queue, a window of at most 64 units found inside [min, max), planned, sliced and
    checked by the C (`_pull_native`). None whenever that is not the case: then `get_message`
    decides (from the start, so every status and refusal is its own)."""
    if not 0 < max_msg_nums < SMALL_WINDOW_UNITS or pull_unfiltered is None:
        return None
    form = 2 if decode is True else 1 if decode == "view" else 0
    cached = _LIMIT_ARGS
    if cached[0] is not limits:     # the limits' arguments, made again when the limits change
        cached = _limit_args(limits)
    in_memory_bytes = cached[5]
    pull_direct = getattr(consume_queues, "pull_direct", None)
    if pull_direct is not None:     # the whole pull in one C call (store.kernel.pull_window)
        mapped_files = commit_log.mapped_files
        got = pull_direct(topic, queue_id, queue_offset,
                          _TOPIC_BYTES.get(topic) or _topic_bytes(topic), mapped_files.files,
                          mapped_files.file_size_bytes, max_msg_nums, cached[1], cached[2],
                          cached[3], cached[4], in_memory_bytes, form, _DECODERS)
        if got is not None:
            records = got[4]
            if form == 2 and got[6] and \
                    [message.topic for message in records].count(topic) != len(records):
                return None
            # GetMessageResult(...) without its __init__ frame (store.kernel.result)
            return found_result(GetMessageResult, _FOUND, queue_offset + got[2], got[0], got[1],
                                records, (got[5] - got[3]) > in_memory_bytes)
    pull_window = getattr(consume_queues, "pull_window", None)
    # The window get_message reads without a filter: max_msg_nums + 1 units.
    window = pull_window(topic, queue_id, queue_offset, max_msg_nums + 1) \
        if pull_window is not None else None
    if window is None or window[2] is None or not window[0] <= queue_offset < window[1]:
        return None
    data = window[2]
    # The commit log's end and the first record's segment in one call (as `_pull_native`).
    commit_log_max, mapped, read_position, buffer = commit_log.mapped_files.end_and_file(
        _FIRST_PHY.unpack_from(data)[0])
    if mapped is None or mapped.destroyed:
        return None
    trusted = len(window) > 3 and queue_offset >= window[3]
    topic_bytes = None
    if not trusted and form != 2:
        topic_bytes = _topic_bytes(topic)
    got = pull_unfiltered(
        data, max_msg_nums, limits.max_transfer_bytes_in_memory,
        limits.max_transfer_count_in_memory, limits.max_transfer_bytes_in_disk,
        limits.max_transfer_count_in_disk, None, commit_log_max, in_memory_bytes,
        buffer, mapped.file_from_offset, read_position, form,
        None if trusted else queue_id, queue_offset, topic_bytes, _DECODERS)
    if got is None:
        return None
    records = got[2]
    if form == 2 and not trusted and \
            [message.topic for message in records].count(topic) != len(records):
        return None
    return found_result(GetMessageResult, _FOUND, queue_offset + got[0], window[0], window[1],
                        records, (commit_log_max - got[1]) > in_memory_bytes)


def _limit_args(limits: TransferLimits) -> tuple:
    """(limits, the in-memory bytes and counts, the on-disk ones, the in-memory line), kept in
    `_LIMIT_ARGS` for the next pull (one tuple: a reader sees an old or a new one, never a mix)."""
    global _LIMIT_ARGS
    _LIMIT_ARGS = (limits, limits.max_transfer_bytes_in_memory,
                   limits.max_transfer_count_in_memory, limits.max_transfer_bytes_in_disk,
                   limits.max_transfer_count_in_disk,
                   limits.physical_memory_bytes * limits.access_message_in_memory_max_ratio // 100)
    return _LIMIT_ARGS


def _topic_bytes(topic: str) -> bytes:
    """The topic's UTF-8, cached (the C check compares bytes)."""
    topic_bytes = _TOPIC_BYTES.get(topic)
    if topic_bytes is None:
        if len(_TOPIC_BYTES) >= 1024:
            _TOPIC_BYTES.clear()
        topic_bytes = _TOPIC_BYTES[topic] = topic.encode()
    return topic_bytes


def _pull_native(commit_log, data, max_msg_nums, limits, max_total_msg_size, commit_log_max,
                 in_memory_bytes, decode, trusted, topic, queue_id, queue_offset, min_offset,
                 max_offset) -> GetMessageResult | None:
    """The tuple shortcut below in one C call (`store.kernel.pull`): None whenever the C is not
    sure to give its answer (then the Python path decides, as if this had not run)."""
    # The Python path's own tests of `decode` (a dict lookup would take 1 for True, 0 for False).
    form = 2 if decode is True else 1 if decode == "view" else 0
    mapped = commit_log.mapped_files.find_file(_FIRST_PHY.unpack_from(data)[0])
    if mapped is None or mapped.destroyed:
        return None
    topic_bytes = None
    if not trusted and form != 2:      # decoded: the message's topic is checked below
        topic_bytes = _topic_bytes(topic)
    got = pull_unfiltered(
        data, max_msg_nums, limits.max_transfer_bytes_in_memory,
        limits.max_transfer_count_in_memory, limits.max_transfer_bytes_in_disk,
        limits.max_transfer_count_in_disk, max_total_msg_size, commit_log_max, in_memory_bytes,
        mapped.buffer, mapped.file_from_offset, mapped.read_position, form,
        None if trusted else queue_id, queue_offset, topic_bytes, _DECODERS)
    if got is None:
        return None
    taken_count, last_phy, records = got
    if form == 2 and not trusted and \
            [message.topic for message in records].count(topic) != len(records):
        return None
    return found_result(GetMessageResult, _FOUND, queue_offset + taken_count, min_offset,
                        max_offset, records, (commit_log_max - last_phy) > in_memory_bytes)
