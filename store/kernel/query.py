"""`query_keys`: a whole key query's index rounds and record reads in one call (C: `c/query.c`),
and its pure-Python twin `query_keys_py`; `query_message` (C: `c/query_message.c`, twin
`query_message_py`): the same under the index service's lock, with the result object built.

What `query_keys` does is `store.lookups.query_message` but for the lock and the result object, with RocketMQ
4.9.7's rules (`IndexService.queryOffset` + `DefaultMessageStore.queryMessage`):

1. at most 3 rounds; each walks the index files newest first: the newest file's end time and end
   phy offset are the result's; a file whose [begin, end] time range meets [begin_ms, round_end]
   is walked (`index_select`); the walk stops after a file that begins before begin_ms, or once it
   holds `max_num` phy offsets; a read-only file's header is re-read first (another process writes);
2. a round with no phy offset ends the query; the offsets are read in ascending order, each from
   the commit-log segment `mapped_files.find_file` gives (none or destroyed: skipped) with
   `read_message` (no record there: skipped; the C decodes with decode_records' rules, the same);
3. a round that read a record ends the query, and so does one whose first record was stored before
   begin_ms or that read none; otherwise the next round ends at the first record's store time;
4. the records of `topic` that carry `key` (as UNIQ_KEY or one of the KEYS) are the messages; the
   others are hash collisions, which a Java client drops the same way.

Returns (messages, how many records were read, last update time, last update phy offset). The C
answers NotImplemented wherever it is not sure to give the twin's answer (c/query.c lists where);
`query_keys` then runs the twin, which raises what the Python path raises. May import: nothing of the store (see `store.kernel`).
"""

from __future__ import annotations

from store.kernel import _native
from store.kernel.lookup import index_select, read_message

_native_query_keys = getattr(_native, "query_keys", None)
_native_query_message = getattr(_native, "query_message", None)
_new_object = object.__new__
_MASK32 = 0xFFFFFFFF
_INT32_MIN_UNSIGNED = 0x80000000


def index_key_hash_py(key_string: str) -> int:
    """abs(Java String.hashCode) of `key_string` (over UTF-16 units), 0 for Integer.MIN_VALUE."""
    h = 0
    if key_string.isascii():
        for byte in key_string.encode("ascii"):
            h = (31 * h + byte) & _MASK32
    else:
        units = key_string.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    if h < _INT32_MIN_UNSIGNED:
        return h
    return 0 if h == _INT32_MIN_UNSIGNED else (1 << 32) - h


def _query_offsets(index_files, key_hash: int, max_num: int, begin_ms: int, end_ms: int):
    """One round of IndexService.queryOffset: (phy offsets, last update time, last phy offset)."""
    phy_offsets: list[int] = []
    last_ts = last_phy = 0
    last_position = len(index_files) - 1
    for position in range(last_position, -1, -1):
        index_file = index_files[position]
        if index_file.read_only:
            index_file.refresh()
        if position == last_position:
            last_ts, last_phy = index_file.end_timestamp, index_file.end_phy_offset
        first, last = index_file.begin_timestamp, index_file.end_timestamp
        if ((begin_ms < first and end_ms > last) or (first <= begin_ms <= last)
                or (first <= end_ms <= last)):
            index_select(index_file._require_map(), key_hash, index_file.max_hash_slot_num,
                         index_file.max_index_num, index_file.index_count, first, max_num,
                         begin_ms, end_ms, phy_offsets)
        if first < begin_ms or len(phy_offsets) >= max_num:
            break
    return phy_offsets, last_ts, last_phy


def _carries_key(properties: dict, key: str) -> bool:
    """key == UNIQ_KEY or key is one of the non-empty KEYS tokens (MessageRecord.key_list)."""
    if key == properties.get("UNIQ_KEY"):
        return True
    keys = properties.get("KEYS")
    return bool(keys) and bool(key) and key in keys.split(" ")


def query_keys_py(index_files, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int,
                  mapped_files, decoders):
    """See the module docstring. `index_files`: IndexFile objects, oldest first; `mapped_files`:
    the commit log's MappedFileQueue; `decoders`: (record class, decode_message, decode_properties,
    host_to_string), what the records are decoded with. Returns (the records of `topic` that carry
    `key`, how many records were read, last update time, last update phy offset)."""
    key_hash = index_key_hash_py(topic + "#" + key)      # IndexService.buildKey
    record_type, decode_message, decode_properties = decoders[0], decoders[1], decoders[2]
    find_file = mapped_files.find_file
    hits: list = []
    last_ts = last_phy = 0
    round_end = end_ms
    for _round in range(3):
        phy_offsets, last_ts, last_phy = _query_offsets(index_files, key_hash, max_num, begin_ms,
                                                        round_end)
        if not phy_offsets:
            break
        first_time = None
        for phy_offset in sorted(phy_offsets):
            mapped = find_file(phy_offset)
            if mapped is None or mapped.destroyed:
                continue
            # mapped.buffer and mapped.read_position, read as the C reads them (its fields): the
            # committed position with a write buffer (the transient store pool), else the wrote one
            limit = (mapped.committed_position if mapped.write_buffer is not None
                     else mapped.wrote_position)
            record = read_message(mapped._map, phy_offset - mapped.file_from_offset, limit,
                                  record_type, decode_properties, decode_message)
            if record is None:
                continue
            if first_time is None:
                first_time = record.store_timestamp
            hits.append(record)
        if hits or first_time is None or first_time < begin_ms:
            break
        round_end = first_time
    # A Java client drops hash collisions by checking the keys; so do we. Like the broker, a
    # message indexed twice (re-dispatch after a crash) is returned twice.
    messages = [m for m in hits if m.topic == topic and _carries_key(m.properties, key)]
    return messages, len(hits), last_ts, last_phy


def query_message_py(index_service, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int,
                     mapped_files, decoders, result_type, truncate_at: int):
    """`store.lookups.query_message`'s work after its argument checks: `query_keys_py` over
    `index_service.live_files` with `index_service.lock` held (IndexService.queryOffset holds its
    lock), then `object.__new__(result_type)` with the fields messages,
    index_last_update_timestamp, index_last_update_phy_offset, truncated (hits >= truncate_at)
    and collisions_filtered (hits that did not carry the key) set in that order (as its frozen
    dataclass __init__ sets them, without its object.__setattr__ call per field)."""
    with index_service.lock:
        messages, hits, last_ts, last_phy = query_keys_py(
            index_service.live_files, topic, key, max_num, begin_ms, end_ms, mapped_files, decoders)
    result = _new_object(result_type)
    result.__dict__.update(messages=messages, index_last_update_timestamp=last_ts,
                           index_last_update_phy_offset=last_phy, truncated=hits >= truncate_at,
                           collisions_filtered=hits - len(messages))
    return result


if _native_query_keys is not None:
    def query_keys(index_files, topic, key, max_num, begin_ms, end_ms, mapped_files, decoders):
        """`query_keys_py`, compiled."""
        answer = _native_query_keys(index_files, topic, key, max_num, begin_ms, end_ms,
                                    mapped_files, decoders)
        if answer is NotImplemented:
            return query_keys_py(index_files, topic, key, max_num, begin_ms, end_ms, mapped_files,
                                 decoders)
        return answer
else:
    query_keys = query_keys_py

# The C function itself when built (the caller runs the twin when it answers NotImplemented), else
# the twin (which never does): one Python frame less on the hot path.
query_keys_fast = _native_query_keys or query_keys_py
query_message_fast = _native_query_message or query_message_py
COMPILED = _native_query_keys is not None
