"""Recovery of one file consume queue (store/consumequeue/file/queue_recovery.py): where a queue ends
after a crash or a power cut, what is cut, and what the queue remembers of its last unit. Files are 5
units (100 bytes), as in tests/test_consume_queue.py, whose helpers these tests share."""

from __future__ import annotations

import os

import pytest

from store.consumequeue.base import STORE_TYPE_FILE
from tests.test_consume_queue import FILE_SIZE, UNITS_PER_FILE, all_units, open_store, stream


def test_file_recovery_stops_at_first_invalid_unit_and_drops_later_files(tmp_path):
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.put_units(stream(count=12))
    cq_store.close()
    directory = tmp_path / "consumequeue" / "T" / "0"
    with open(directory / f"{100:020d}", "r+b") as handle:   # zero unit 7: the queue ends at 7
        handle.seek(40)
        handle.write(bytes(20))
    again = open_store(tmp_path, STORE_TYPE_FILE)
    assert again.get_max_offset("T", 0) == 7 and again.get_max_phy_end("T", 0) == 700
    assert sorted(os.listdir(directory)) == [f"{0:020d}", f"{100:020d}"]
    again.close()


def test_truncate_to_file_boundary_deletes_file(tmp_path):
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.put_units(stream(count=12))
    cq_store.truncate_dirty(1000)                        # unit 10 (first of file 3) goes
    assert cq_store.get_max_offset("T", 0) == 10
    assert len(os.listdir(tmp_path / "consumequeue" / "T" / "0")) == 2
    cq_store.close()


def test_file_zero_length_last_file(tmp_path):
    from store.errors import CorruptDataError
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.put_units(stream(count=3))
    cq_store.close()
    empty = tmp_path / "consumequeue" / "T" / "0" / f"{100:020d}"
    empty.write_bytes(b"")
    with pytest.raises(CorruptDataError):
        open_store(tmp_path, STORE_TYPE_FILE, style="4.9", read_only=True)
    again = open_store(tmp_path, STORE_TYPE_FILE, style="5.x")
    assert again.get_max_offset("T", 0) == 3 and not empty.exists()
    again.close()


def test_file_recovery_with_empty_trailing_files_keeps_the_end_of_the_last_unit(tmp_path):
    """A power cut can leave the last CQ files created but never flushed (all zero). RocketMQ's
    recovery scans only the last three files; when all three are empty the queue ends at the start of
    the first of them, and its maxPhysicOffset must be the end of the unit before it, not -1:
    otherwise a later re-dispatch of the whole log appends the unit of queue offset 0 again at the
    queue's end, and a pull of that position returns the wrong record."""
    cq_store = open_store(tmp_path, STORE_TYPE_FILE)
    cq_store.put_units(stream(count=2 * UNITS_PER_FILE))          # files 0 and 1 full
    cq_store.close()
    directory = tmp_path / "consumequeue" / "T" / "0"
    for number in (2, 3, 4):                                      # three empty files after them
        with open(directory / f"{number * FILE_SIZE:020d}", "wb") as handle:
            handle.truncate(FILE_SIZE)
    again = open_store(tmp_path, STORE_TYPE_FILE)
    try:
        assert again.get_max_offset("T", 0) == 2 * UNITS_PER_FILE
        assert again.get_max_phy_end("T", 0) == 2 * UNITS_PER_FILE * 100
        again.put_units(stream(count=2 * UNITS_PER_FILE + 1))       # the whole log dispatched again
        assert again.get_max_offset("T", 0) == 2 * UNITS_PER_FILE + 1
        assert [u[1] for u in all_units(again, "T", 0)] == [i * 100 for i in range(2 * UNITS_PER_FILE + 1)]
    finally:
        again.close()
