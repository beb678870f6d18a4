"""The facade's short pull path (`read_path.pull_unfiltered_fast`) answers as the general one.

`MessageStore.get_message` takes it for a pull without a tag filter (None, "" or "*"), byte cap or
long polling; it answers only a window found inside [min, max) that the C plans, slices and checks,
and says None otherwise (then `read_path.get_message` decides from the start). Compared here with
`read_path.get_message` called directly, on units this process dispatched (trusted) and units loaded
from disk (checked), every result form, offsets inside, at and past the queue's ends, unknown queues,
max_msg_nums at and past the window's 64 units, and transfer limits that cut the pull.
"""

from __future__ import annotations

import os

import pytest

from store import Message, MessageStore
from store.commitlog import read_path
from store.commitlog.read_plan import TransferLimits
from store.kernel.pull import pull_unfiltered
from tests.engine_util import small_config
from tests.test_kernel_pull import FORMS, _comparable, _fill

OFFSETS = (0, 1, 17, 59, 60, 159, 160, 500)


def _general(store, topic, queue_id, offset, max_msg_nums, decode):
    return read_path.get_message(
        store.commit_log, store.consume_queues, topic, queue_id, offset, max_msg_nums,
        tag_filter=read_path.TagFilter.parse(None), limits=store._limits,
        known_queue=store.is_known_queue, units_per_cq_file=store._units_per_cq_file,
        decode=decode)


@pytest.mark.parametrize("reopen", [False, True])
def test_the_short_path_answers_as_the_general_path(tmp_path, reopen, monkeypatch):
    config = small_config(tmp_path / "store")
    if reopen:
        with MessageStore.open(config) as store:
            _fill(store)
    taken = []
    real = read_path.pull_unfiltered_fast

    def counting(*args):
        found = real(*args)
        taken.append(found is not None)
        return found
    monkeypatch.setattr("store.message_store.pull_unfiltered_fast", counting)
    with MessageStore.open(config) as store:
        if not reopen:
            _fill(store)
        _fill(store, 40)
        for limits in (None, TransferLimits(400, 3, 200, 2, 40, 1000)):
            if limits is not None:
                store._limits = limits
            for decode in FORMS:
                for queue_id in (0, 1, 5):
                    for offset in OFFSETS:
                        for max_msg_nums in (1, 7, 32, 63, 64, 100):
                            want = _comparable(_general(store, "T", queue_id, offset,
                                                        max_msg_nums, decode))
                            for expression in (None, "", "*"):
                                got = store.get_message("g", "T", queue_id, offset, max_msg_nums,
                                                        tag_expression=expression, decode=decode)
                                assert _comparable(got) == want, (queue_id, offset, max_msg_nums)
        with pytest.raises(ValueError):
            store.get_message("g", "T", 0, 0, 0)
    if pull_unfiltered is not None:
        assert taken.count(True) > 100 and taken.count(False) > 100
    else:
        assert not any(taken)


def test_the_short_path_is_not_taken_with_a_filter_a_cap_or_long_polling(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("store.message_store.pull_unfiltered_fast",
                        lambda *args: calls.append(args))
    with MessageStore.open(small_config(tmp_path / "store")) as store:
        _fill(store, 30)
        for kwargs in ({"tag_expression": "t1"}, {"max_total_msg_size": 10_000},
                       {"long_poll_ms": 1}):
            result = store.get_message("g", "T", 0, 0, 8, **kwargs)
            assert result.messages
        assert calls == []
        store.get_message("g", "T", 0, 0, 8)
        assert len(calls) == 1


def test_a_closed_store_refuses_before_the_short_path(tmp_path):
    store = MessageStore.open(small_config(tmp_path / "store"))
    store.put_message(Message("T", os.urandom(8)))
    store.close()
    from store.errors import StoreClosedError
    with pytest.raises(StoreClosedError):
        store.get_message("g", "T", 0, 0, 8)


def _view_facts(view: memoryview):
    return (bytes(view), view.nbytes, view.shape, view.strides, view.readonly, view.format,
            view.itemsize, view.ndim, view.c_contiguous, view.f_contiguous, view.contiguous,
            view.obj, view.tolist()[:3], bytes(view[1:4]), view[-1] if len(view) else None)


def test_c_views_are_what_slicing_the_segment_gives(tmp_path):
    with MessageStore.open(small_config(tmp_path / "store")) as store:
        _fill(store, 90)
        for queue_id in (0, 1):
            result = store.get_message("g", "T", queue_id, 0, 32, decode="view")
            assert result.messages
            units = store.consume_queues.get_units("T", queue_id, 0, len(result.messages))
            for view, unit in zip(result.messages, units):
                mapped = store.commit_log.mapped_files.find_file(int(unit["phy_offset"]))
                at = int(unit["phy_offset"]) - mapped.file_from_offset
                want = memoryview(mapped.buffer)[at:at + int(unit["size"])]
                assert type(view) is memoryview and _view_facts(view) == _view_facts(want)
            for view in result.messages:     # each view is released on its own
                view.release()
