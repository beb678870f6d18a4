"""MappedFile and MappedFileQueue: naming, positions, rolling, flushing, truncation, load checks."""

from __future__ import annotations

import os

import pytest

from store.errors import CorruptDataError, ReadOnlyStoreError
from store.mappedfile.mapped_file import MappedFile, offset_to_file_name, parse_file_name
from store.mappedfile.mapped_file_queue import MappedFileQueue

SIZE = 4096 * 4


def test_file_names_are_twenty_digits():
    assert offset_to_file_name(0) == "00000000000000000000"
    assert offset_to_file_name(1073741824) == "00000000001073741824"
    assert parse_file_name("00000000001073741824") == 1073741824
    for bad in ("0", "abc", "0000000000000000000x", "000000000000000000000"):
        assert parse_file_name(bad) is None


def test_create_append_read_flush(tmp_path):
    path = str(tmp_path / offset_to_file_name(SIZE))
    mapped = MappedFile(path, SIZE, create=True)
    assert os.path.getsize(path) == SIZE
    assert mapped.file_from_offset == SIZE
    assert mapped.append(b"hello") == 0
    assert mapped.append(b"world") == 5
    assert mapped.read(0, 10) == b"helloworld"
    assert mapped.read(0, 11) is None        # past the read position
    assert mapped.flush() == 10
    assert mapped.flushed_position == 10
    mapped.close()
    assert open(path, "rb").read(10) == b"helloworld"


def test_write_buffer_hides_data_until_commit(tmp_path):
    path = str(tmp_path / offset_to_file_name(0))
    released = []
    mapped = MappedFile(path, SIZE, create=True, write_buffer=bytearray(SIZE),
                        release_write_buffer=lambda: released.append(1))
    mapped.append(b"x" * 100)
    assert mapped.read_position == 0 and mapped.read(0, 1) is None
    assert mapped.commit(least_pages=1) == 0      # fewer than one page: not yet
    assert mapped.commit() == 100
    assert mapped.read(0, 100) == b"x" * 100
    mapped.append(b"y" * (SIZE - 100))
    mapped.commit()
    assert mapped.write_buffer is None and released == [1]
    mapped.close()


def test_wrong_size_is_a_typed_error(tmp_path):
    path = tmp_path / offset_to_file_name(0)
    path.write_bytes(b"\0" * 100)
    with pytest.raises(CorruptDataError) as error:
        MappedFile(str(path), SIZE)
    assert "expected" in str(error.value) and str(path) in str(error.value)


def test_read_only_refuses_writes(tmp_path):
    path = tmp_path / offset_to_file_name(0)
    path.write_bytes(b"\0" * SIZE)
    mapped = MappedFile(str(path), SIZE, read_only=True)
    with pytest.raises(ReadOnlyStoreError):
        mapped.append(b"x")
    mapped.close()


def test_queue_rolls_finds_and_truncates(tmp_path):
    queue = MappedFileQueue(str(tmp_path / "q"), SIZE)
    queue.load()
    first = queue.last_file_or_create(0)
    first.append(b"a" * SIZE)
    assert first.is_full()
    second = queue.last_file_or_create(0)
    assert second.file_from_offset == SIZE
    second.append(b"b" * 100)
    assert queue.max_offset() == SIZE + 100
    assert queue.find_file(SIZE + 5) is second and queue.find_file(5) is first
    assert queue.find_file(3 * SIZE) is None
    queue.truncate_dirty_files(50)
    assert len(queue.files) == 1 and queue.max_offset() == 50
    assert not os.path.exists(second.path)
    # Cut bytes are zeroed, so a later recovery can never read them again.
    assert first.read(50, 10, unchecked=True) == b"\0" * 10
    queue.close()


def test_queue_load_reports_gaps_and_ignores_garbage(tmp_path):
    directory = tmp_path / "q"
    directory.mkdir()
    (directory / offset_to_file_name(0)).write_bytes(b"\0" * SIZE)
    (directory / offset_to_file_name(2 * SIZE)).write_bytes(b"\0" * SIZE)
    (directory / "garbage.txt").write_bytes(b"x")
    queue = MappedFileQueue(str(directory), SIZE)
    queue.load()
    assert [f.file_from_offset for f in queue.files] == [0, 2 * SIZE]
    assert queue.problems.gaps == [(SIZE, 2 * SIZE)]
    assert queue.problems.ignored_names == ["garbage.txt"]
    queue.close()


def test_queue_deletes_empty_last_file_but_read_only_leaves_it(tmp_path):
    directory = tmp_path / "q"
    directory.mkdir()
    (directory / offset_to_file_name(0)).write_bytes(b"\0" * SIZE)
    (directory / offset_to_file_name(SIZE)).write_bytes(b"")
    read_only = MappedFileQueue(str(directory), SIZE, read_only=True)
    read_only.load()
    assert len(read_only.files) == 1 and (directory / offset_to_file_name(SIZE)).exists()
    read_only.close()
    writable = MappedFileQueue(str(directory), SIZE)
    writable.load()
    assert not (directory / offset_to_file_name(SIZE)).exists()
    writable.close()


def test_flush_moves_one_file_at_a_time(tmp_path):
    queue = MappedFileQueue(str(tmp_path / "q"), SIZE)
    queue.load()
    queue.last_file_or_create(0).append(b"a" * SIZE)
    queue.last_file_or_create(0).append(b"b" * 10)
    assert queue.flush() and queue.flushed_where == SIZE
    assert queue.flush() and queue.flushed_where == SIZE + 10
    assert not queue.flush()
    queue.close()


def test_buffer_is_the_map_and_read_only(tmp_path):
    # `buffer` is a property over attrgetter (no Python frame for the lookups' C): same object,
    # still not assignable.
    mapped = MappedFile(str(tmp_path / offset_to_file_name(0)), SIZE, create=True)
    mapped.append(b"abc")
    assert mapped.buffer is mapped._map and mapped.buffer[:3] == b"abc"
    with pytest.raises(AttributeError):
        mapped.buffer = b""
    mapped.close()
