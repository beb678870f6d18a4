"""Dispatch straight from scan rows: the consume-queue units and index entries of a run of records
without a `DispatchRequest` per record (the reput service's common case, `store.services.dispatch`).
The RocksDB consume queue gets its 28-byte values, store times included, the same way
(`put_value_runs`); a TAGS value that is not ASCII sends its pass to requests there.

RocketMQ's reput parses every record it dispatches (`checkMessageAndReturnSize`); so does this path,
with the kernel's scan. What is done per record runs in C outside the GIL (the walk, the tagsCodes,
the index keys' hashes, the index entries and slots); Python works per batch and per queue (grouping
rows by queue with numpy, one append of units per queue file, the index header). The put thread
keeps running meanwhile, and the reput offset moves only after every unit and entry is in place, as
before.

It applies only when the built-in dispatchers are registered (`direct_dispatchers`) and gives the
same bytes as the request path. A run that needs more than this answers None before anything is
written, and the reput service makes requests as before: a topic that is not legal (logged per record
there) or is a batch topic. A SCHEDULE_TOPIC_XXXX record with a DELAY ends the run (its tagsCode is
the delivery time): the rows from it on get requests. Keys that are not ASCII are hashed in Python
(Java hashes UTF-16 units), the rest of the run still from rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from store import kernel
from store.codec import message as msgcodec
from store.codec.javahash import tags_code as compute_tags_code
from store.codec.message import DispatchRequest
from store.codec.topic import validate_topic
from store.commitlog.commit_log import queued_transaction_mask
from store.errors import InvalidTopicError
from store.kernel.scan_groups import queue_groups

_C = kernel.COL
_PHY, _SIZE, _QUEUE_OFFSET, _STORE_TS = _C["phy_offset"], _C["size"], _C["queue_offset"], _C["store_ts"]
_SCHEDULE_TOPIC = msgcodec.SCHEDULE_TOPIC.encode()
log = logging.getLogger("store.services.dispatch")   # the reput service's log, as before


_LEGAL_TOPICS: set[str] = set()     # memo: validation runs for every dispatched record
_LEGAL_TOPICS_MAX = 100_000


def _topic_is_legal(topic: str) -> bool:
    """`_legal_topic` without the warning (the caller makes requests, which log it, when not)."""
    if topic in _LEGAL_TOPICS:
        return True
    try:
        validate_topic(topic, allow_v2=True)
    except InvalidTopicError:
        return False
    if len(_LEGAL_TOPICS) < _LEGAL_TOPICS_MAX:
        _LEGAL_TOPICS.add(topic)
    return True


def _legal_topic(request: DispatchRequest) -> bool:
    """A topic read from the commit log becomes a directory name: a crafted record ("../x", "/abs")
    must not create one outside consumequeue/. Such records stay in the log but get no unit."""
    if request.topic in _LEGAL_TOPICS:
        return True
    try:
        validate_topic(request.topic, allow_v2=True)
    except InvalidTopicError:
        log.warning("record at %d has an illegal topic %r: not dispatched to a consume queue",
                    request.commit_log_offset, request.topic[:64])
        return False
    if len(_LEGAL_TOPICS) < _LEGAL_TOPICS_MAX:
        _LEGAL_TOPICS.add(request.topic)
    return True


@dataclass(slots=True)
class RowsDispatched:
    """What `dispatch_rows` wrote."""

    count: int                                   # records dispatched
    last_unit: tuple[int, int] | None = None     # (phy offset, store time) of the last unit written
    # queue -> its new max offset: a dict, or (queues, new max offsets as int64) made into one only
    # when an arrival listener wants it (`store.services.arrivals`; none does unless a pull holds)
    arrivals: dict[tuple[str, int], int] | tuple[list, np.ndarray] = \
        field(default_factory=dict)


def dispatch_rows(buf, rows: np.ndarray, *, consume_queues, on_written, batch_router,
                  index_service, topic_is_legal: Callable[[str], bool]) -> RowsDispatched | None:
    """Write the units (into `consume_queues`, which take columns) and the index entries (into
    `index_service`) of the leading scan `rows` of `buf` (log order, spans as position and length)
    up to the first SCHEDULE_TOPIC_XXXX record, as the ConsumeQueueDispatcher and the
    IndexDispatcher would from their requests; `count` says how many. None when they need requests
    (see the module docstring): then nothing was written."""
    count = _leading_plain_rows(buf, rows)
    if not count:
        return None
    rows = rows[:count]
    groups = None
    if consume_queues is not None:
        groups = _unit_groups(buf, rows, batch_router, topic_is_legal,
                              hasattr(consume_queues, "put_value_runs"))
        if groups is None:
            return None
    if index_service is not None:
        keys = _index_keys(buf, rows, index_service.end_phy_offset)
    done = RowsDispatched(count)
    if groups:
        put, groups, done.arrivals, last_row = groups
        put(consume_queues, groups)
        done.last_unit = (int(last_row[_PHY]), int(last_row[_STORE_TS]))
        if on_written is not None:    # as ConsumeQueueDispatcher: the last unit's store time
            on_written(done.last_unit[1])
    if index_service is not None:
        index_service.build_index_hashed(*keys)
    return done


def _leading_plain_rows(buf, rows) -> int:
    """How many rows come before the first SCHEDULE_TOPIC_XXXX record with a DELAY (its tagsCode is
    the delivery time, and a DELAY Java cannot parse makes it invalid: the request path decides)."""
    delayed = np.flatnonzero(rows[:, _C["delay_pos"]] >= 0)
    for number in delayed.tolist():
        pos, length = int(rows[number, _C["topic_pos"]]), int(rows[number, _C["topic_len"]])
        if buf[pos:pos + length] == _SCHEDULE_TOPIC:
            return number
    return len(rows)


def _unit_groups(buf, rows, batch_router, topic_is_legal, with_values: bool = False):
    """(how to put them, the units per queue, queue -> its new max offset, the last row) of the rows
    that get a unit (NOT / COMMIT records), queues in first appearance order; () when none does,
    None when a topic needs requests. Units are made by `kernel.unit_runs` (`put_unit_runs`), or
    as columns when a TAGS value is not ASCII (`put_unit_columns`). `with_values`: as the RocksDB
    consume queue's 28-byte values with the store times (`_value_runs`); a TAGS value that is not
    ASCII then needs requests."""
    queued = np.ascontiguousarray(rows[queued_transaction_mask(rows[:, _C["sys_flag"]])])
    count = len(queued)
    if not count:
        return ()
    runs = np.empty((count, kernel.RUN_FIELDS), dtype=np.int64)
    units = bytearray(20 * count)
    queue_offsets = np.empty(count, dtype=np.int64)
    found = kernel.unit_runs(buf, queued, runs, units, queue_offsets)
    if found < 0:
        return None if with_values else _unit_columns(buf, queued, batch_router, topic_is_legal)
    if with_values:
        return _value_runs(buf, queued, runs[:found], units, queue_offsets, batch_router,
                           topic_is_legal)
    units = memoryview(units)
    runs = runs[:found]
    # Only the runs' first and last rows are read (a list of every row cost 40% of a pass).
    firsts = queued[runs[:, 0]][:, [_C["topic_pos"], _C["topic_len"], _C["queue_id"], _PHY, _SIZE]]
    lasts = queued[runs[:, 1]]
    last_ends = (lasts[:, _PHY] + lasts[:, _SIZE]).tolist()
    topics = _run_topics(buf, firsts[:, :2], runs[:, 5], batch_router, topic_is_legal)
    if topics is None:
        return None
    groups, arrivals = [], {}
    for topic, (_, _, queue_id, phy, size), (_, _, start, length, consecutive, _), last_end \
            in zip(topics, firsts.tolist(), runs.tolist(), last_ends):
        end = start + length
        groups.append((topic, queue_id, units[20 * start:20 * end], queue_offsets[start:end],
                       bool(consecutive), phy + size, last_end))
        arrivals[(topic, queue_id)] = int(queue_offsets[end - 1]) + 1
    return _put_runs, groups, arrivals, queued[-1]


def _value_runs(buf, queued, runs, units, queue_offsets, batch_router, topic_is_legal):
    """`_unit_groups` for the RocksDB consume queue: (`put_value_runs`' arguments, ...): the queues
    of the runs (the tuples `arrivals` holds, as columns), per run its first unit, unit count,
    consecutive flag, first and last record's phy ends, as int64 arrays; the values and queue
    offsets of all units. Made per column with numpy, each topic decoded and checked once per
    pass."""
    values = _unit_values(queued, units)
    firsts, lasts = queued[runs[:, 0]], queued[runs[:, 1]]
    starts, lengths = runs[:, 2], runs[:, 3]
    topics = _run_topics(buf, firsts[:, [_C["topic_pos"], _C["topic_len"]]], runs[:, 5],
                         batch_router, topic_is_legal)
    if topics is None:
        return None
    queues = list(zip(topics, firsts[:, _C["queue_id"]].tolist()))
    arrivals = (queues, queue_offsets[starts + lengths - 1] + 1)     # a dict when one is wanted
    columns = (queues, starts, lengths, runs[:, 4], firsts[:, _PHY] + firsts[:, _SIZE],
               lasts[:, _PHY] + lasts[:, _SIZE])          # int64 columns: put_value_runs takes them
    return _put_values, (columns, values, queue_offsets), arrivals, queued[-1]


def _run_topics(buf, topic_spans, topic_runs, batch_router, topic_is_legal) -> list[str] | None:
    """Each run's topic, from its first row's (TOPIC position, length) in `topic_spans` and
    `unit_runs`' topic field (the number of the first run of the same topic): each topic decoded and
    checked once per pass. None when a topic needs requests (not legal, or a batch topic)."""
    heads = np.flatnonzero(topic_runs == np.arange(len(topic_runs)))
    names = []
    for topic_pos, topic_len in topic_spans[heads].tolist():
        topic = _topic_name(buf, topic_pos, topic_len)
        if not topic_is_legal(topic) or \
                (batch_router is not None and batch_router.is_batch_topic(topic)):
            return None
        names.append(topic)
    return np.array(names, dtype=object)[np.searchsorted(heads, topic_runs)].tolist()


def _unit_values(queued, units) -> bytes:
    """The RocksDB values (phy offset, size, tagsCode, store time; 28 bytes each) of `units` (the
    20-byte units `unit_runs` wrote, grouped by queue): each unit's store time is its row's, found
    by its phy offset (rows are in log order)."""
    count = len(queued)
    values = np.empty((count, 28), dtype=np.uint8)
    values[:, :20] = np.frombuffer(units, dtype=np.uint8).reshape(count, 20)
    numbers = np.searchsorted(queued[:, _PHY], values[:, :8].copy().view(">i8").ravel())
    values[:, 20:] = queued[numbers, _STORE_TS].astype(">i8").view(np.uint8).reshape(count, 8)
    return values.tobytes()


_TOPIC_NAMES: dict[bytes, str] = {}
_TOPIC_NAMES_MAX = 10_000


def _topic_name(buf, pos: int, length: int) -> str:
    raw = bytes(buf[pos:pos + length])
    topic = _TOPIC_NAMES.get(raw)
    if topic is None:
        topic = raw.decode("utf-8", "replace")      # as the request path decodes it
        if len(_TOPIC_NAMES) < _TOPIC_NAMES_MAX:
            _TOPIC_NAMES[raw] = topic
    return topic


def _put_runs(consume_queues, groups) -> None:
    consume_queues.put_unit_runs(groups)


def _put_values(consume_queues, groups) -> None:
    consume_queues.put_value_runs(*groups)


def _put_columns(consume_queues, groups) -> None:
    consume_queues.put_unit_columns(groups)


def _unit_columns(buf, queued, batch_router, topic_is_legal):
    """`_unit_groups` as int64 columns per queue, tagsCodes of values that are not ASCII decoded."""
    keys, inverse = queue_groups(buf, queued)
    for topic, _ in keys:
        if not topic_is_legal(topic) or \
                (batch_router is not None and batch_router.is_batch_topic(topic)):
            return None
    codes = np.empty(len(queued), dtype=np.int64)
    if kernel.tags_codes(buf, queued, codes):
        for number in np.flatnonzero(codes == kernel.TAGS_CODE_ASK).tolist():
            pos, length = int(queued[number, _C["tags_pos"]]), int(queued[number, _C["tags_len"]])
            codes[number] = compute_tags_code(bytes(buf[pos:pos + length]).decode("utf-8", "replace"))
    order = np.argsort(inverse, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(inverse, minlength=len(keys)))[:-1])
    groups, arrivals = [], {}
    for (topic, queue_id), rows_of in sorted(zip(keys, members), key=lambda g: int(g[1][0])):
        of = queued[rows_of]
        groups.append((topic, queue_id, of[:, _PHY], of[:, _SIZE], codes[rows_of],
                       of[:, _QUEUE_OFFSET]))
        arrivals[(topic, queue_id)] = int(of[-1, _QUEUE_OFFSET]) + 1
    return _put_columns, groups, arrivals, queued[-1]


def _index_keys(buf, rows, end_phy_offset: int):
    """(key hashes, phy offsets, store times) of the index keys of the rows at or past the index's
    endPhyOffset (buildIndex skips the others), for `build_index_hashed`."""
    rows = np.ascontiguousarray(rows[np.searchsorted(rows[:, _PHY], end_phy_offset):])
    found = kernel.row_key_hashes(buf, rows)
    if found is None:             # a topic or key that is not ASCII: Java hashes its UTF-16 units
        return _index_keys_decoded(buf, rows)
    hashes, numbers = found
    return hashes, rows[numbers, _PHY], rows[numbers, _STORE_TS]


def _index_keys_decoded(buf, rows):
    """`_index_keys` with the values decoded as the request path decodes them (UTF-8, replaced) and
    keys made as buildIndex makes them: `topic#UNIQ_KEY`, then `topic#token` per non-empty token of
    KEYS split on spaces, for every record that is not a ROLLBACK."""
    def text(pos: int, length: int) -> str:
        return bytes(buf[pos:pos + length]).decode("utf-8", "replace")

    key_strings, numbers = [], []
    columns = [_C[name] for name in ("sys_flag", "topic_pos", "topic_len", "uniq_pos", "uniq_len",
                                     "keys_pos", "keys_len")]
    for number, (sys_flag, topic_pos, topic_len, uniq_pos, uniq_len, keys_pos, keys_len) in \
            enumerate(rows[:, columns].tolist()):
        if sys_flag & 0x0C == 0x0C or (uniq_pos < 0 and keys_pos < 0):
            continue
        prefix = text(topic_pos, topic_len) + "#"
        if uniq_pos >= 0:
            key_strings.append(prefix + text(uniq_pos, uniq_len))
            numbers.append(number)
        if keys_pos >= 0:
            for token in text(keys_pos, keys_len).split(" "):
                if token:
                    key_strings.append(prefix + token)
                    numbers.append(number)
    numbers = np.array(numbers, dtype=np.int64)
    return kernel.java_hashes(key_strings), rows[numbers, _PHY], rows[numbers, _STORE_TS]
