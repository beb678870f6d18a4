"""Recovery's walk reading segments with pread (`walk_log(by_reads=True)`, `store.recovery.segment_reader`)
against the same walk through the maps and against the record-by-record walk, with windows small
enough that records straddle their ends, records larger than a window, and reads that fail."""

from __future__ import annotations

import random

import pytest

from store import kernel
from store.recovery import commitlog_recovery as recovery
from store.recovery import segment_reader
from tests.test_recovery_scan import (_open, _reference_scan_valid_end, _report_fields, _write_log,
                                      kernel_scan)

__all__ = ["kernel_scan"]       # the fixture, imported for the tests below

_POSITION_COLUMNS = [kernel.COL[name] for name in (
    "pos", "body_pos", "topic_pos", "props_pos", "tags_pos", "keys_pos", "uniq_pos", "delay_pos")]


def _steps(commit_log, start: int, *, check_crc: bool, by_reads: bool, whole: bool) -> list:
    """walk_log's steps with rows made comparable: log offsets instead of buffer positions."""
    steps = []
    for step, where, what in recovery.walk_log(commit_log, start, check_crc=check_crc,
                                               whole_segments=whole, by_reads=by_reads):
        if step == recovery.WALK_ROWS:
            rows = what.copy()
            for column in _POSITION_COLUMNS:
                located = rows[:, column] >= 0
                rows[located, column] += where.file_from_offset
            # The bytes each row names are those of the segment at the same offsets.
            segment = commit_log.mapped_files.find_file(int(rows[0, kernel.COL["pos"]]))
            first, last = int(rows[0, kernel.COL["pos"]]), int(rows[-1, kernel.COL["pos"]])
            size = int(rows[-1, kernel.COL["size"]])
            shift = where.file_from_offset
            assert bytes(where.buffer[first - shift:last + size - shift]) == \
                segment.buffer[first - segment.file_from_offset:last + size - segment.file_from_offset]
            steps.extend(("row", *row) for row in rows.tolist())
        elif step == recovery.WALK_BLANK:
            steps.append(("blank", where, what.file_from_offset))
        else:
            steps.append((step, where, what.kind, what.size, getattr(what, "reason", "")))
    return steps


@pytest.mark.parametrize("seed", range(40))
def test_walk_by_reads_matches_the_walk_through_the_maps(tmp_path, seed, kernel_scan, monkeypatch):
    rng = random.Random(1000 + seed)
    directory = str(tmp_path / "commitlog")
    _write_log(directory, rng)
    # Windows of a few records (records of up to ~1.3 KB straddle their ends, some do not fit at
    # all), or the whole 64 KiB segment.
    monkeypatch.setattr(segment_reader, "CHUNK_BYTES", rng.choice([97, 700, 1500, 4096, 1 << 16]))
    monkeypatch.setattr(recovery, "SCAN_BATCH_ROWS", rng.choice([1, 3, 8192]))
    commit_log = _open(directory)
    try:
        files = commit_log.mapped_files.files
        for start_index in sorted({0, len(files) - 1, rng.randrange(len(files))}):
            start = files[start_index].file_from_offset
            for check_crc in (True, False):
                for whole in (False, True):
                    want = _steps(commit_log, start, check_crc=check_crc, by_reads=False, whole=whole)
                    got = _steps(commit_log, start, check_crc=check_crc, by_reads=True, whole=whole)
                    assert got == want
                expected = recovery.RecoveryReport(mode="normal")
                want_end = _reference_scan_valid_end(commit_log, start_index, check_crc=check_crc,
                                                     report=expected)
                report = recovery.RecoveryReport(mode="normal")
                assert recovery.scan_valid_end(commit_log, start_index, check_crc=check_crc,
                                               report=report) == want_end
                assert _report_fields(report) == _report_fields(expected)
    finally:
        commit_log.mapped_files.close()


def test_a_read_that_fails_falls_back_to_the_map(tmp_path, monkeypatch):
    rng = random.Random(7)
    directory = str(tmp_path / "commitlog")
    _write_log(directory, rng)
    monkeypatch.setattr(segment_reader, "CHUNK_BYTES", 4096)
    commit_log = _open(directory)
    try:
        want = _steps(commit_log, 0, check_crc=True, by_reads=False, whole=False)
        calls = []

        def failing(fd, buffers, offset):
            calls.append(offset)
            if len(calls) % 2:
                raise OSError(5, "Input/output error")
            return 0                                   # short: the file looks truncated
        monkeypatch.setattr(segment_reader.os, "preadv", failing)
        assert _steps(commit_log, 0, check_crc=True, by_reads=True, whole=False) == want
        assert calls
    finally:
        commit_log.mapped_files.close()


def test_reader_windows_hold_the_segment_bytes(tmp_path):
    rng = random.Random(3)
    directory = str(tmp_path / "commitlog")
    _write_log(directory, rng)
    commit_log = _open(directory)
    reader = segment_reader.SegmentReader(chunk_bytes=1000)
    try:
        segment = commit_log.mapped_files.files[0]
        window = reader.read(segment, 123, segment.file_size_bytes)
        assert window.file_from_offset == segment.file_from_offset + 123
        assert bytes(window.buffer) == segment.buffer[123:1123]
        tail = reader.read(segment, segment.file_size_bytes - 10, segment.file_size_bytes)
        assert bytes(tail.buffer) == segment.buffer[-10:]
        empty = reader.read(segment, 50, 40)              # nothing to read before the limit
        assert len(empty.buffer) == 0 and empty.file_from_offset == segment.file_from_offset + 50
        assert reader.read(segment, -1, 100) is None
    finally:
        reader.close()
        commit_log.mapped_files.close()
