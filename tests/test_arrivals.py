"""store.services.arrivals: the reput service's arrival table, made only for listeners that want it
(long polling while a pull holds), from row passes given as dicts or columns, requests and LMQ."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from store import Message, MessageStore
from store.codec.message import DispatchRequest
from store.services.arrivals import Arrivals
from tests.engine_util import small_config


class _Lmq:
    def __init__(self, table):
        self.lmq_arrivals = table


def _request(topic, queue_id, offset, sys_flag=0):
    return DispatchRequest(topic=topic, queue_id=queue_id, commit_log_offset=0, msg_size=10,
                           tags_code=0, store_timestamp=0, consume_queue_offset=offset,
                           keys="", uniq_key=None, sys_flag=sys_flag,
                           prepared_transaction_offset=0, properties={})


def test_rows_requests_and_lmq_make_one_table_later_ones_winning():
    arrivals, heard = Arrivals(), []
    arrivals.add(heard.append)
    arrivals.note_rows(([("A", 0), ("B", 1)], np.array([5, 7], dtype=np.int64)))
    arrivals.note_rows({("A", 0): 6})
    arrivals.note_rows({})
    lmq = _Lmq({("%LMQ%x", 0): 2})
    arrivals.notify([_request("B", 1, 8), _request("C", 0, 0, sys_flag=0x04)], [lmq])
    assert heard == [{("A", 0): 6, ("B", 1): 9, ("%LMQ%x", 0): 2}]
    assert type(heard[0][("A", 0)]) is int and lmq.lmq_arrivals == {} and not arrivals.pending()


def test_a_listener_that_does_not_want_it_is_not_called_and_nothing_is_kept():
    arrivals, heard, other = Arrivals(), [], []
    wanted = [False]
    arrivals.add(heard.append, wants=lambda: wanted[0])
    arrivals.note_rows(([("A", 0)], np.array([1], dtype=np.int64)))
    lmq = _Lmq({("%LMQ%x", 0): 2})
    arrivals.notify([], [lmq])
    assert heard == [] and lmq.lmq_arrivals == {} and not arrivals.pending()
    wanted[0] = True
    arrivals.add(other.append)
    arrivals.note_rows(([("A", 0)], np.array([2], dtype=np.int64)))
    arrivals.notify([], [])
    assert heard == other == [{("A", 0): 2}]


def _dispatched(store):
    deadline = time.monotonic() + 10
    while store.dispatch_behind_bytes() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not store.dispatch_behind_bytes()


@pytest.mark.parametrize("store_type", ["default", "defaultRocksDB"])   # dict / columns
def test_a_long_poll_is_woken_by_a_row_pass_and_no_table_is_told_without_one(tmp_path,
                                                                            monkeypatch,
                                                                            store_type):
    store = MessageStore.open(small_config(tmp_path, store_type))
    try:
        told = []
        hold = store.services.hold
        real = hold.on_arrival
        monkeypatch.setattr(hold, "on_arrival", lambda table: told.append(dict(table)) or real(table))
        store.services.reput.arrivals.listeners[0] = hold.on_arrival
        store.put_message(Message("T", b"x", 0))
        _dispatched(store)
        assert told == []                   # no pull held: nothing made, nobody called
        got = []
        pull = threading.Thread(target=lambda: got.append(
            store.get_message("g", "T", 0, 1, 8, long_poll_ms=5000)))
        pull.start()
        deadline = time.monotonic() + 5
        while not hold.holds() and time.monotonic() < deadline:
            time.sleep(0.002)
        started = time.monotonic()
        store.put_message(Message("T", b"y", 0))
        pull.join(10)
        assert got and [m.body for m in got[0].messages] == [b"y"]
        assert time.monotonic() - started < 2
        assert {("T", 0): 2} in told
        assert store.services.reput.dispatched_from_rows == 2     # the rows path, not requests
    finally:
        store.close()
