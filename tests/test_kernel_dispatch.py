"""The dispatch kernels (store/kernel/c/dispatch.c) against their twins (store/kernel/dispatch_twins.py),
and index_put against RocketMQ's key-by-key putKey (`IndexFile.put_key`)."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from store import kernel
from store.codec.index_codec import INDEX_HEADER_SIZE, index_file_size
from store.codec.javahash import tags_code
from store.index.index_file import IndexFile
from store.kernel import dispatch_twins

native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")


def _outcome(function, *args):
    try:
        return ("ok", function(*args))
    except Exception as error:
        return ("raise", type(error).__name__, str(error))


def _records(tags_values):
    """A buffer of records with the given TAGS values (None: no TAGS) and their scan rows."""
    buf = bytearray()
    for number, tags in enumerate(tags_values):
        properties = "" if tags is None else f"TAGS\x01{tags}\x02"
        properties += f"KEYS\x01k{number}"
        buf += kernel.encode_record(b"Topic", number % 3, 0, 0, number, len(buf), 1, b"\x7f\0\0\1\0\0\0\1",
                                    2, b"\x7f\0\0\1\0\0\0\1", 0, 0, b"body", properties.encode(), 1)
    out = kernel.scan_buffer(len(tags_values) + 1)
    count = kernel.scan(bytes(buf), 0, len(buf), 0, out)[0]
    assert count == len(tags_values)
    return bytes(buf), np.ascontiguousarray(out[:count])


@pytest.mark.parametrize("implementation", [
    pytest.param("c", marks=native), "python"])
def test_tags_codes_are_java_hashes_and_ask_for_non_ascii(implementation):
    function = kernel._native.tags_codes if implementation == "c" else dispatch_twins.tags_codes_py
    values = ["TagA", None, "x" * 300, "标签", "a b", "\x7f", "é"]
    buf, rows = _records(values)
    out = np.zeros(len(rows), dtype=np.int64)
    assert function(buf, rows, out) == 2
    for value, code in zip(values, out.tolist()):
        if value is not None and not value.isascii():
            assert code == kernel.TAGS_CODE_ASK
        else:
            assert code == tags_code(value)


@native
def test_tags_codes_refusals_match_the_twin():
    buf, rows = _records(["a", "b", "c"])
    cases = []
    for column, value in [("tags_pos", len(buf)), ("tags_pos", len(buf) + 1), ("tags_len", -1),
                          ("tags_len", len(buf)), ("tags_pos", 2**62), ("tags_pos", -1)]:
        forged = rows.copy()
        forged[1, kernel.COL[column]] = value
        cases.append((buf, forged, np.zeros(3, dtype=np.int64)))
    cases.append((buf, rows, np.zeros(2, dtype=np.int64)))              # one out per row
    cases.append((buf, rows[:, :5].copy(), np.zeros(3, dtype=np.int64)))
    for case in cases:
        out_c, out_py = case[2].copy(), case[2].copy()
        got_c = _outcome(kernel._native.tags_codes, case[0], case[1], out_c)
        got_py = _outcome(dispatch_twins.tags_codes_py, case[0], case[1], out_py)
        assert got_c == got_py
        assert np.array_equal(out_c, out_py)


def _index_map(slots: int, entries: int, rng: random.Random, stale: bool) -> bytearray:
    data = bytearray(index_file_size(slots, entries))
    if stale:      # slot values left by a crash: some past the count, some negative
        for slot in range(slots):
            if rng.random() < 0.5:
                value = rng.choice([rng.randrange(1, entries + 3), -rng.randrange(1, 9), 0])
                data[INDEX_HEADER_SIZE + 4 * slot:INDEX_HEADER_SIZE + 4 * slot + 4] = \
                    value.to_bytes(4, "big", signed=True)
    return data


@pytest.mark.parametrize("seed", range(12))
def test_index_put_is_put_key_after_put_key(tmp_path, seed):
    """C, the numpy twin and RocketMQ's one-key-at-a-time putKey write the same bytes, including
    slots holding stale entry numbers, a fresh file inheriting a begin time, and a file filling up."""
    rng = random.Random(seed)
    slots, entries = rng.choice([(1, 8), (4, 16), (16, 64), (64, 40)])
    start_count = rng.choice([1, 1, 2, 5])
    begin = rng.choice([0, 1_700_000_000_000, 1_700_000_100_000])
    n = rng.randrange(1, entries + 10)
    hashes = np.array([rng.choice([0, 1, 2**31 - 1, rng.randrange(2**31)]) for _ in range(n)], np.int64)
    phys = np.array(sorted(rng.randrange(2**40) for _ in range(n)), np.int64)
    times = np.array(sorted(1_700_000_000_000 + rng.randrange(-5_000, 10**7) for _ in range(n)), np.int64)
    template = _index_map(slots, entries, rng, stale=seed % 2 == 0)
    results = {}
    implementations = {"python": dispatch_twins.index_put_py}
    if kernel.COMPILED:
        implementations["c"] = kernel._native.index_put
    for name, function in implementations.items():
        data = bytearray(template)
        results[name] = (function(data, slots, entries, start_count, begin, hashes, phys, times),
                         bytes(data))
    # The reference: IndexFile.put_key, key by key, on a file holding the same bytes.
    path = tmp_path / "ref"
    path.write_bytes(template)
    reference = IndexFile(path, slots, entries)
    try:
        reference.index_count, reference.begin_timestamp = start_count, begin
        reference.hash_slot_count = 0
        inserted = 0
        for key_hash, phy, when in zip(hashes.tolist(), phys.tolist(), times.tolist()):
            if not reference.put_key("", phy, when, key_hash=key_hash, write_header=False):
                break
            inserted += 1
        expected = ((inserted, reference.hash_slot_count),
                    bytes(reference._map[INDEX_HEADER_SIZE:]))
    finally:
        reference.close()
    for name, (answer, data) in results.items():
        assert answer == expected[0], name
        assert data[INDEX_HEADER_SIZE:] == expected[1], name
        assert data[:INDEX_HEADER_SIZE] == template[:INDEX_HEADER_SIZE]     # no header written


@native
@pytest.mark.parametrize("args", [
    (0, 8, 1, 0), (4, 1, 1, 0), (4, 8, -1, 0), (4, 8, 9, 0), (4, 100, 1, 0), (2**62, 8, 1, 0),
    (4, 2**61, 1, 0), (4, 8, 1, 2**63), (4, 8, 2**63, 0)])
def test_index_put_refusals_match_the_twin(args):
    slots, entries, count, begin = args
    one = np.array([5], np.int64)
    for hashes in (one, np.array([-1], np.int64), np.array([2**31], np.int64)):
        data_c = bytearray(index_file_size(4, 8))
        data_py = bytearray(data_c)
        got_c = _outcome(kernel._native.index_put, data_c, slots, entries, count, begin, hashes, one, one)
        got_py = _outcome(dispatch_twins.index_put_py, data_py, slots, entries, count, begin, hashes,
                          one, one)
        assert got_c == got_py and data_c == data_py
    data = bytearray(index_file_size(4, 8))
    assert _outcome(kernel._native.index_put, data, 4, 8, 1, 0, one, one, np.array([1, 2], np.int64)) == \
        _outcome(dispatch_twins.index_put_py, data, 4, 8, 1, 0, one, one, np.array([1, 2], np.int64))


def _unit_rows(rng: random.Random, count: int):
    """Records of a few topics and queues (queue offsets sometimes skipping), with their scan rows."""
    buf = bytearray()
    next_offset: dict[tuple[bytes, int], int] = {}
    for _ in range(count):
        topic = rng.choice([b"A", b"Bb", b"A\x00", b"Topic-%"])
        queue_id = rng.choice([0, 1, 7, 65535])
        offset = next_offset.get((topic, queue_id), rng.choice([0, 5, 2**40]))
        next_offset[(topic, queue_id)] = offset + rng.choice([1, 1, 1, 1, 2, 0])
        tags = rng.choice([None, "t", "tag-B", "x" * 40])
        properties = (b"" if tags is None else b"TAGS\x01" + tags.encode() + b"\x02") + b"KEYS\x01k"
        buf += kernel.encode_record(topic, queue_id, 0, 0, offset, len(buf), 1, b"\0" * 8, 2, b"\0" * 8,
                                    0, 0, b"b" * rng.randrange(4), properties, 1)
    out = kernel.scan_buffer(count + 1)
    found = kernel.scan(bytes(buf), 0, len(buf), 0, out)[0]
    assert found == count
    return bytes(buf), np.ascontiguousarray(out[:count])


def _unit_runs(function, buf, rows):
    n = len(rows)
    runs, units = np.zeros((n, kernel.RUN_FIELDS), np.int64), bytearray(20 * n)
    offsets = np.zeros(n, np.int64)
    return _outcome(function, buf, rows, runs, units, offsets), runs, bytes(units), offsets


@pytest.mark.parametrize("seed", range(8))
def test_unit_runs_groups_units_by_queue_in_log_order(seed):
    rng = random.Random(seed)
    buf, rows = _unit_rows(rng, rng.randrange(1, 120))
    implementations = {"python": dispatch_twins.unit_runs_py}
    if kernel.COMPILED:
        implementations["c"] = kernel._native.unit_runs
    results = {name: _unit_runs(function, buf, rows) for name, function in implementations.items()}
    (answer, runs, units, offsets) = results["python"]
    # The expectation, from the rows: queues in first appearance order, units in log order inside.
    expected: dict[tuple[bytes, int], list[int]] = {}
    for number, row in enumerate(rows.tolist()):
        topic = buf[row[kernel.COL["topic_pos"]]:row[kernel.COL["topic_pos"]] + row[kernel.COL["topic_len"]]]
        expected.setdefault((topic, row[kernel.COL["queue_id"]]), []).append(number)
    assert answer == ("ok", len(expected))
    start = 0
    topics = [topic for topic, _ in expected]
    for number, members in enumerate(expected.values()):
        queue_offsets = rows[members, kernel.COL["queue_offset"]]
        consecutive = int(all(b - a == 1 for a, b in zip(queue_offsets, queue_offsets[1:])))
        assert runs[number].tolist() == [members[0], members[-1], start, len(members), consecutive,
                                         topics.index(topics[number])]
        for member in members:
            row = rows[member]
            tags_pos, tags_len = row[kernel.COL["tags_pos"]], row[kernel.COL["tags_len"]]
            code = tags_code(buf[tags_pos:tags_pos + tags_len].decode()) if tags_pos >= 0 else 0
            assert units[20 * start:20 * start + 20] == struct.pack(
                ">qiq", row[kernel.COL["phy_offset"]], row[kernel.COL["size"]], code)
            assert offsets[start] == row[kernel.COL["queue_offset"]]
            start += 1
    for name, (got, got_runs, got_units, got_offsets) in results.items():
        assert got == answer, name
        assert np.array_equal(got_runs[:len(expected)], runs[:len(expected)]) and got_units == units, name
        assert np.array_equal(got_offsets, offsets), name


@native
def test_unit_runs_refusals_and_non_ascii_match_the_twin():
    buf, rows = _unit_rows(random.Random(3), 10)
    cases = []
    for column, value in [("topic_pos", len(buf)), ("topic_len", -1), ("tags_pos", len(buf) + 1),
                          ("tags_len", 2**62), ("topic_pos", -5)]:
        forged = rows.copy()
        forged[4, kernel.COL[column]] = value
        cases.append(forged)
    non_ascii, non_ascii_rows = _records(["ok", "é"])
    for forged in cases:
        assert _unit_runs(kernel._native.unit_runs, buf, forged)[0] == \
            _unit_runs(dispatch_twins.unit_runs_py, buf, forged)[0]
    assert _unit_runs(kernel._native.unit_runs, non_ascii, non_ascii_rows)[0] == ("ok", -1) == \
        _unit_runs(dispatch_twins.unit_runs_py, non_ascii, non_ascii_rows)[0]
    wrong = np.zeros((9, kernel.RUN_FIELDS), np.int64)
    for function in (kernel._native.unit_runs, dispatch_twins.unit_runs_py):
        assert _outcome(function, buf, rows, wrong, bytearray(200), np.zeros(10, np.int64))[0] == "raise"
