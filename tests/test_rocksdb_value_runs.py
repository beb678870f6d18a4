"""The RocksDB consume queue written from the reput service's scan rows (`put_value_runs`, made by
`store.services.dispatch_rows`) against the request path (`put_units`): the same keys and values in
both column families, the same warnings, the same answers."""

from __future__ import annotations

import dataclasses
import logging
import random

import pytest

from store import MessageStore
from store.codec import rocksdb_cq as codec
from store.consumequeue.base import STORE_TYPE_ROCKSDB
from store.consumequeue.rocksdb.db import open_read_only_shadow, remove_shadow
from store.services.dispatch import ReputService
from tests.engine_util import FakeClock, small_config
from tests.test_consume_queue import open_store, request
from tests.test_dispatch_rows import _messages


def _contents(path) -> dict:
    db, shadow = open_read_only_shadow(str(path))
    try:
        offsets = db.get_column_family(codec.OFFSET_CF)
        found = {"default": dict(db.items()), "offset": dict(offsets.items())}
        offsets.close()
    finally:
        db.close()
        remove_shadow(shadow)
    return found


def _as_runs(requests):
    """The arguments dispatch_rows gives put_value_runs for `requests` (one pass, log order)."""
    by_queue: dict[tuple[str, int], list] = {}
    for r in requests:
        by_queue.setdefault((r.topic, r.queue_id), []).append(r)
    runs, values, offsets = [], [], []
    for queue, members in by_queue.items():
        qos = [r.consume_queue_offset for r in members]
        consecutive = int(all(b - a == 1 for a, b in zip(qos, qos[1:])))
        runs.append((queue, len(offsets), len(members), consecutive,
                     members[0].commit_log_offset + members[0].msg_size,
                     members[-1].commit_log_offset + members[-1].msg_size))
        offsets += qos
        values += [codec.cq_value(r.commit_log_offset, r.msg_size, r.tags_code, r.store_timestamp)
                   for r in members]
    return tuple(map(list, zip(*runs))), b"".join(values), offsets


def _passes(seed: int):
    """Dispatch passes over a few queues with what re-dispatch and odd logs bring: a pass again
    (repeats), offsets already built, gaps and offsets out of order, queues starting past 0."""
    rng = random.Random(seed)
    next_offset, phy, passes, done = {}, 0, [], []
    for _ in range(rng.randrange(3, 12)):
        batch = []
        for _ in range(rng.randrange(1, 40)):
            queue = (rng.choice(["A", "B", "Topic%C"]), rng.randrange(3))
            offset = next_offset.get(queue, rng.choice([0, 0, 0, 5]))
            roll = rng.random()
            if roll < 0.08:
                offset += rng.randrange(2, 5)           # a gap
            elif roll < 0.14 and offset > 0:
                offset -= rng.randrange(1, offset + 1)  # already built
            size = rng.randrange(50, 300)
            batch.append(request(queue[0], queue[1], offset, phy, size, tags=rng.randrange(-9, 9),
                                 store_time=1_700_000_000_000 + phy))
            next_offset[queue] = max(next_offset.get(queue, 0), offset + 1)
            phy += size
        if done and rng.random() < 0.3:
            again = rng.choice(done)                   # a pass dispatched again
            if rng.random() < 0.5:                     # ... its offsets the next ones: old ends
                again = [request(r.topic, r.queue_id, next_offset[(r.topic, r.queue_id)] + n,
                                 r.commit_log_offset, r.msg_size, r.tags_code, r.store_timestamp)
                         for n, r in enumerate(again)]
            passes.append(again)
        passes.append(batch)
        done.append(batch)
    return passes


@pytest.mark.parametrize("seed", range(12))
def test_value_runs_write_what_put_units_writes(tmp_path, caplog, seed):
    logs = []
    for name in ("units", "runs"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="store.consumequeue.rocksdb.queue_store"):
            cq = open_store(tmp_path / name, STORE_TYPE_ROCKSDB)
            for batch in _passes(seed):
                if name == "units":
                    cq.put_units(batch)
                else:
                    cq.put_value_runs(*_as_runs(batch))
            state = (dict(cq._max), cq.checkpoint_phy_end,
                     {q: (cq.get_min_offset(*q), cq.get_max_offset(*q)) for q in cq.queues()})
            cq.close()
        # (the same warnings; put_units logs them in log order, the runs queue by queue)
        logs.append((sorted(r.getMessage() for r in caplog.records), state))
    assert logs[0] == logs[1]
    assert _contents(tmp_path / "units" / "consumequeue") == \
        _contents(tmp_path / "runs" / "consumequeue")


def _run(root, work, *, from_rows: bool, monkeypatch, passes: int):
    with monkeypatch.context() as patch:
        if not from_rows:
            patch.setattr(ReputService, "_row_dispatchers", lambda self: None)
        store = MessageStore.open(small_config(root, store_type="defaultRocksDB"),
                                  clock_ms=FakeClock(step_ms=7), start_services=False)
        try:
            assert store.commit_log.make_dispatch_requests is (not from_rows)
            step = max(1, len(work) // passes)
            for first in range(0, len(work), step):
                for kind, item in work[first:first + step]:
                    result = store.put_message(item) if kind == "one" else store.put_messages(item)
                    assert result.ok, result
                store.dispatch_pending()
            assert store.services.reput.behind_bytes() == 0
            from_rows_count = store.services.reput.dispatched_from_rows
        finally:
            store.close()
    files = {str(p.relative_to(root)): p.read_bytes() for part in ("commitlog", "index")
             for p in (root / part).rglob("*") if p.is_file()}
    return files, _contents(root / "consumequeue"), from_rows_count


@pytest.mark.parametrize("seed,passes,ascii_tags", [(1, 1, True), (2, 7, True), (3, 40, False)])
def test_a_rocksdb_store_from_rows_matches_one_from_requests(tmp_path, monkeypatch, seed, passes,
                                                              ascii_tags):
    work = _messages(seed, 300)
    if ascii_tags:      # a TAGS value that is not ASCII sends its pass to requests
        def plain(message):
            return dataclasses.replace(message, tags="tagC") if message.tags == "标签" else message
        work = [(kind, [plain(m) for m in item] if kind == "batch" else plain(item))
                for kind, item in work]
    rows = _run(tmp_path / "rows", work, from_rows=True, monkeypatch=monkeypatch, passes=passes)
    requests = _run(tmp_path / "requests", work, from_rows=False, monkeypatch=monkeypatch,
                    passes=passes)
    assert rows[2] > 0 and requests[2] == 0
    assert rows[0] == requests[0]
    assert rows[1] == requests[1] and len(rows[1]["default"]) > 100
