"""The pull's last line: a consume-queue unit whose record is not the one it names (another queue
offset, queue id or topic) is skipped with a reason, never served (store/commitlog/read_path.py)."""

from __future__ import annotations

import os
import struct

import pytest

from store import GetMessageStatus, Message, MessageStore
from store.codec.message import decode_message
from tests.engine_util import small_config

UNIT = struct.Struct(">qiq")


def _units(path: str) -> list[tuple[int, int, int]]:
    with open(path, "rb") as handle:
        data = handle.read()
    units = [UNIT.unpack_from(data, at) for at in range(0, len(data), UNIT.size)]
    return [unit for unit in units if unit[1] > 0]


def _set_unit(path: str, index: int, unit: tuple[int, int, int]) -> None:
    with open(path, "r+b") as handle:
        handle.seek(index * UNIT.size)
        handle.write(UNIT.pack(*unit))


@pytest.fixture()
def crafted(tmp_path):
    """A/0 holds 8 messages; its units 3, 5 and 6 are made to point at valid records of A/0 offset
    0, of B/0 offset 5 (same queue id and offset, other topic) and of A/1 offset 6."""
    config = small_config(tmp_path / "store")
    with MessageStore.open(config) as store:
        for seq in range(8):
            for topic, queue_id in (("A", 0), ("B", 0), ("A", 1)):
                assert store.put_message(Message(topic, f"{topic}{queue_id}:{seq}".encode(),
                                                 queue_id=queue_id, tags="T")).ok
    root = config.store_path_root_dir
    cq = {(t, q): os.path.join(root, "consumequeue", t, str(q), f"{0:020d}")
          for t, q in (("A", 0), ("B", 0), ("A", 1))}
    a0, b0, a1 = _units(cq["A", 0]), _units(cq["B", 0]), _units(cq["A", 1])
    assert len(a0) == len(b0) == len(a1) == 8
    _set_unit(cq["A", 0], 3, a0[0])
    _set_unit(cq["A", 0], 5, b0[5])
    _set_unit(cq["A", 0], 6, a1[6])
    return config


@pytest.mark.parametrize("decode", [True, False, "view"])
@pytest.mark.parametrize("tags", [None, "T"])
def test_a_unit_pointing_at_another_record_is_never_served(crafted, decode, tags):
    with MessageStore.open(crafted) as store:
        served, skipped, offset = [], [], 0
        while offset < 8:
            got = store.get_message("g", "A", 0, offset, 32, decode=decode, tag_expression=tags)
            assert got.next_begin_offset > offset
            for message in got.messages:
                if decode is not True:
                    message = decode_message(bytes(message))
                assert (message.topic, message.queue_id) == ("A", 0)
                served.append(message.body)
            skipped += got.skipped
            offset = got.next_begin_offset
        text = b"|".join(served)
        for seq in (0, 1, 2, 4, 7):
            assert f"A0:{seq}".encode() in text
        assert b"B0:" not in text and b"A1:" not in text and text.count(b"A0:0") == 1
        assert len(skipped) == 3, skipped
        assert any("unit 3 of A/0" in s and "A/0 queue offset 0" in s for s in skipped)
        assert any("unit 5 of A/0" in s and "B/0 queue offset 5" in s for s in skipped)
        assert any("unit 6 of A/0" in s and "A/1 queue offset 6" in s for s in skipped)


def test_a_wrong_unit_is_skipped_like_an_unreadable_one(crafted):
    """As RocketMQ's loop after an unreadable unit: counted as scanned, the next unit is read."""
    with MessageStore.open(crafted) as store:
        got = store.get_message("g", "A", 0, 3, 1)
        assert got.status is GetMessageStatus.FOUND and got.next_begin_offset == 5
        assert [m.body for m in got.messages] == [b"A0:4"]
        assert "unit 3 of A/0" in got.explanation and "queue offset 0" in got.explanation
        both = store.get_message("g", "A", 0, 5, 2)   # units 5 and 6 wrong, 7 right
        assert [m.body for m in both.messages] == [b"A0:7"] and len(both.skipped) == 2
        good = store.get_message("g", "A", 0, 4, 1)
        assert good.status is GetMessageStatus.FOUND and good.skipped == ()
        assert good.messages[0].body == b"A0:4"


def test_wrong_units_are_scanned_past_within_rocketmqs_window(crafted):
    """Like unreadable units, wrong ones do not end a pull: RocketMQ's getMessage loop goes on over
    the consume-queue buffer (up to maxFilterMessageCount bytes) until the batch is full, so from
    unit 5 (wrong), 6 (wrong) a pull of one message reaches unit 7."""
    with MessageStore.open(crafted) as store:
        got = store.get_message("g", "A", 0, 5, 1)
        assert got.status is GetMessageStatus.FOUND
        assert [m.body for m in got.messages] == [b"A0:7"]
        assert got.next_begin_offset == 8 and len(got.skipped) == 2


@pytest.mark.parametrize("decode", [True, False, "view"])
def test_a_record_of_another_topic_with_the_same_queue_and_offset_is_not_served(crafted, decode):
    """From offset 4 the first record is right: unit 5 (B/0 offset 5) differs only by topic; unit 6
    is another queue's; unit 7 is right again and fills the batch of two."""
    with MessageStore.open(crafted) as store:
        got = store.get_message("g", "A", 0, 4, 2, decode=decode)
        bodies = [(m if decode is True else decode_message(bytes(m))).body for m in got.messages]
        assert bodies == [b"A0:4", b"A0:7"] and got.next_begin_offset == 8
        assert len(got.skipped) == 2 and "B/0 queue offset 5" in got.skipped[0]


def test_only_units_from_disk_are_checked(crafted):
    """Units this process's dispatch wrote are trusted (no record read); those loaded are not."""
    import store.commitlog.read_fast as read_fast
    import store.commitlog.read_path as read_path
    import store.consumequeue.file.queue_store as queue_store

    with MessageStore.open(crafted) as store:
        queues = store.consume_queues
        assert queues.pull_window("A", 0, 0, 1)[3] == 8   # recovered from disk: 0-7 checked
        assert store.put_message(Message("A", b"A0:8", queue_id=0)).ok
        for _ in range(200):
            if store.get_max_offset_in_queue("A", 0) == 9:
                break
            store.dispatch_pending()
        calls = []
        real, real_native = read_path._carries, read_path.pull_unfiltered
        real_window = queue_store._pull_window

        def window(*args):      # the one-call pull (store.kernel.pull_window): checked below trusted_from
            got = real_window(*args)
            if got is not None and got[6]:
                calls.append(args[4])
            return got
        queue_store._pull_window = window
        read_path._carries = lambda *args: calls.append(args[2]) or real(*args)
        if real_native is not None:   # the C path checks while it slices (queue_id None: trusted)
            def native(*args):
                if args[13] is not None:
                    calls.append(args[14])
                return real_native(*args)
            read_path.pull_unfiltered = read_fast.pull_unfiltered = native
        try:
            assert [m.body for m in store.get_message("g", "A", 0, 8, 4).messages] == [b"A0:8"]
            assert calls == []
            assert [m.body for m in store.get_message("g", "A", 0, 7, 4).messages] == \
                [b"A0:7", b"A0:8"]
            assert calls == [7]
        finally:
            read_path._carries, read_path.pull_unfiltered = real, real_native
            read_fast.pull_unfiltered = real_native
            queue_store._pull_window = real_window
