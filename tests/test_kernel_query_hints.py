"""store/kernel/c/query_hints.c: the prefetches of a key query change no answer.

query_message reads the index file list once without the lock (to aim the slot prefetch) and the
hints read attributes of the newest index file and of the segments before the query itself reads
them. Checked here, the C against its twin (which has no hints):
* the list read without the lock is only a hint: a different list there (a closed file, files with
  nonsense fields, no list at all) gives the answer of the list read under the lock;
* a live_files that raises raises the same from both, the lock free afterwards;
* an attribute that fails only the first time it is read (the hint's read) is cleared there: the
  query reads it again and answers as the twin;
* nonsense the hints bound-check (a slot count past the map, slots naming entries past it, phy
  offsets below the first segment or past the last, int64 edges): the twin's answers.
"""

from __future__ import annotations

import random

import pytest

from store.api import QueryMessageResult
from store.kernel import _native, query
from tests.kernel_fuzz import query_target
from tests.kernel_fuzz.query_target import FakeIndexFile, FakeSegment, outcome

needs_kernel = pytest.mark.skipif(not query.COMPILED, reason="the kernel is not built")


def _fields(answer):
    return query_target._fields(answer)


def _inputs(count: int, seed: int):
    """`count` query_target inputs the C answers itself (not NotImplemented) with at least one hit."""
    rng = random.Random(seed)
    found = []
    for _ in range(20_000):
        args = query_target.make_args(rng)
        if not args[0] or not args[6].files:
            continue
        service = query_target.FakeIndexService(args[0])
        full = (service,) + args[1:] + (QueryMessageResult, 32)
        got = outcome(_native.query_message, *full)
        if got[0] == "ok" and got[1] is not NotImplemented and got[1].messages:
            found.append(args)
            if len(found) == count:
                return found
    raise AssertionError("too few inputs with hits")


class TwoListService:
    """An index service whose live_files is `unlocked` when read without its lock held."""

    def __init__(self, files, unlocked):
        service = query_target.FakeIndexService(files)
        self.lock, self.files, self.unlocked, self.reads = service.lock, files, unlocked, []

    @property
    def live_files(self):
        held = self.lock._is_owned()
        self.reads.append(held)
        if held:
            return self.files
        if isinstance(self.unlocked, Exception):
            raise self.unlocked
        return self.unlocked


def _compare(service, args):
    full = (service,) + args[1:] + (QueryMessageResult, 32)
    got = _fields(outcome(_native.query_message, *full))
    assert not service.lock._is_owned()
    if got == ("ok", NotImplemented):
        return False
    want = _fields(outcome(query.query_message_py, *full))
    assert got == want
    return True


def _closed_copy(index_file):
    copy = FakeIndexFile(None, index_file.max_hash_slot_num, index_file.max_index_num,
                         index_file.index_count, index_file.begin_timestamp,
                         index_file.end_timestamp, index_file.end_phy_offset, False)
    return copy


@needs_kernel
@pytest.mark.parametrize("unlocked", ["closed", "nonsense", "empty", "not a list", "raises"])
def test_the_list_read_without_the_lock_only_aims_the_hint(unlocked):
    for args in _inputs(25, seed=11):
        files = args[0]
        decoy = {
            "closed": lambda: [_closed_copy(f) for f in files],
            "nonsense": lambda: [FakeIndexFile(b"\xff" * 64, 2**62, -1, 2**63 - 1, 0, 0, 0,
                                               False)],
            "empty": lambda: [],
            "not a list": lambda: ("not", "a", "list"),
            "raises": lambda: RuntimeError("not now"),
        }[unlocked]()
        service = TwoListService(files, decoy)
        assert _compare(service, args)
        assert service.reads[0] is False and True in service.reads     # the hint read, then the query's


@needs_kernel
def test_a_live_files_that_raises_raises_the_same_from_both():
    args = _inputs(1, seed=12)[0]

    class Raising(TwoListService):
        @property
        def live_files(self):
            raise LookupError("no files")

    raising = Raising(args[0], None)
    full = (raising,) + args[1:] + (QueryMessageResult, 32)
    assert outcome(_native.query_message, *full) == ("raise", "LookupError", "no files")
    assert not raising.lock._is_owned()
    assert outcome(query.query_message_py, *full) == ("raise", "LookupError", "no files")


class FirstReadFails:
    """A data descriptor whose first read on each object raises (the hint's read), then answers."""

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        failed = obj.__dict__.setdefault("_failed", set())
        if self.name not in failed:
            failed.add(self.name)
            raise RuntimeError(f"{self.name} not yet")
        return obj.__dict__["_" + self.name]


@needs_kernel
@pytest.mark.parametrize("which, name", [("newest index file", "max_hash_slot_num"),
                                         ("newest index file", "_map"),
                                         ("first segment", "file_from_offset")])
def test_an_attribute_failing_at_the_hints_read_is_read_again_by_the_query(which, name):
    """The hints read these before the query does (the slot hint the newest file's, the records
    hint the first segment's offset): their first read fails there and is cleared."""
    compared = 0
    for args in _inputs(20, seed=13):
        item = args[0][-1] if which == "newest index file" else args[6].files[0]
        flaky = type("Flaky" + type(item).__name__, (type(item),), {name: FirstReadFails(name)})
        value = item.__dict__.pop(name)
        item.__class__ = flaky
        item.__dict__["_" + name] = value
        service = query_target.FakeIndexService(args[0])
        full = (service,) + args[1:] + (QueryMessageResult, 32)
        got = _fields(outcome(_native.query_message, *full))
        assert name in item.__dict__["_failed"]          # the hint met the failure
        want = _fields(outcome(query.query_message_py, *full))   # good values from the start
        if got != ("ok", NotImplemented):
            assert got == want
            compared += 1
    assert compared > 5


@needs_kernel
@pytest.mark.parametrize("seed", range(3))
def test_nonsense_the_hints_bound_check_gives_the_twins_answers(seed):
    rng = random.Random(seed)
    compared = 0
    for args in _inputs(30, seed=20 + seed):
        newest = args[0][-1]
        segments = args[6].files
        what = rng.choice(["slots", "slot values", "offsets", "from"])
        if what == "slots":                              # slot positions past the map
            newest.max_hash_slot_num = rng.choice([2**40, 2**40 + 1, len(newest._map), 2**62])
        elif what == "slot values":                      # slots naming entries past the map
            buf = bytearray(newest._map)
            for slot in range(min(newest.max_hash_slot_num, (len(buf) - 40) // 4)):
                buf[40 + 4 * slot:44 + 4 * slot] = rng.choice(
                    [b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x01\x00\x00"])
            newest._map = bytes(buf)
        elif what == "offsets":                          # records below/after every segment
            segments[0].file_from_offset = rng.choice([2**62, 2**62 + 1, 10**6])
        else:
            segments[0].file_from_offset = rng.choice([-1, -2**63, 2**64])
        compared += _compare(query_target.FakeIndexService(args[0]), args)
    assert compared > 0
