"""Recovery's batched walk (`recovery.scan_valid_end` on `kernel.scan` rows) against the record-by-record
walk it replaced (`CommitLog.scan` + `check_message`), on random multi-segment logs with BLANKs, torn
and corrupted records, SCHEDULE_TOPIC_XXXX records with good and bad DELAYs, transaction types, long
v2 topics and topics that are not valid UTF-8. Both walks must agree on everything the report holds."""

from __future__ import annotations

import os
import random

import pytest

from store import kernel
from store.codec import message as msgcodec
from store.codec import record_check
from store.codec.properties import encode_properties
from store.commitlog.commit_log import CommitLog
from store.mappedfile.mapped_file import offset_to_file_name
from store.recovery import commitlog_recovery as recovery

SEGMENT = 64 << 10


def _reference_scan_valid_end(commit_log, start_index, *, check_crc, report):
    """The walk recovery did before the kernel: one check_message per record."""
    files = commit_log.mapped_files.files
    start = files[start_index].file_from_offset
    process_offset = start
    seen = report.scanned_queue_max
    last_file_start = files[-1].file_from_offset
    for phy_offset, result in commit_log.scan(start, check_crc=check_crc):
        if result.kind == record_check.CHECK_RECORD:
            process_offset = phy_offset + result.size
            report.last_record_offset = phy_offset
            report.records_checked += 1
            request = result.request
            if request.sys_flag & 0x0C in (0x00, 0x08):
                key = (request.topic, request.queue_id)
                if request.consume_queue_offset >= seen.get(key, -1):
                    seen[key] = request.consume_queue_offset
        elif result.kind == record_check.CHECK_BLANK:
            if phy_offset >= last_file_start:
                process_offset = phy_offset
                report.stop_reason = f"BLANK record in the last segment at {phy_offset}"
                break
            process_offset = commit_log.next_file_start(phy_offset)
        else:
            process_offset = phy_offset
            report.stop_reason = recovery._describe_invalid(commit_log, phy_offset, result)
            break
    else:
        report.stop_reason = report.stop_reason or "end of the segment files"
    report.bytes_checked = process_offset - start
    return process_offset


def _record(rng: random.Random, phy_offset: int, queue_offsets: dict) -> bytearray:
    topic = rng.choice(["T", "BenchTopic", "BenchTopic", "SCHEDULE_TOPIC_XXXX", "t" * 127,
                        "long" * 100, "nu", "nul", "bad-utf8"])
    version = 2 if len(topic) > 127 else rng.choice([1, 1, 2])
    props = {}
    if rng.random() < 0.8:
        props["TAGS"] = rng.choice(["TagA", "TagB", "tägé"])
    if rng.random() < 0.5:
        props["KEYS"] = f"k{rng.randrange(100)}"
    if topic == "SCHEDULE_TOPIC_XXXX" or rng.random() < 0.1:
        props["DELAY"] = rng.choice(["1", "3", "18", "99", "0", "-2", "+4"])
    raw = encode_properties(props, style=rng.choice(["4.9", "5.x"]))
    if topic == "SCHEDULE_TOPIC_XXXX" and rng.random() < 0.015:
        raw += rng.choice([b"\x02DELAY\x01x", b"\x02DELAY\x0199999999999", b"\x02DELAY\x01 1"])
    queue_id = rng.randrange(4) - (1 if rng.random() < 0.02 else 0)
    sys_flag = rng.choice([0, 0, 0, 4, 8, 12])
    key = (topic, queue_id)
    queue_offset = queue_offsets.get(key, 0) + rng.choice([0, 0, 0, 1, -1, 5])
    queue_offsets[key] = max(queue_offset + 1, 0)
    record = msgcodec.encode_message(
        topic=topic, queue_id=queue_id, body=os.urandom(rng.randrange(0, 600)), properties_raw=raw,
        sys_flag=sys_flag, queue_offset=queue_offset, phy_offset=phy_offset,
        born_timestamp=rng.randrange(2**41), born_host=rng.choice(["127.0.0.1:1", "[::1]:9"]),
        store_timestamp=rng.randrange(2**41), store_host="127.0.0.1:10911", version=version)
    if topic in ("nul", "bad-utf8"):
        # Same length, other bytes: a topic ending in NULs, or bytes that are not UTF-8.
        at = record.find(topic.encode())
        record[at:at + len(topic)] = b"nu\x00" if topic == "nul" else b"b\xffd\xfe\xc3tf8"
    return record


def _write_log(directory: str, rng: random.Random) -> None:
    """A few segments of records, each closed by a BLANK (or, now and then, by a record ending
    exactly at the end of the file), then damage of one kind."""
    os.makedirs(directory, exist_ok=True)
    segments = rng.randrange(1, 5)
    queue_offsets: dict = {}
    data = [bytearray(SEGMENT) for _ in range(segments)]
    for index, segment in enumerate(data):
        base = index * SEGMENT
        position = 0
        last = index == segments - 1
        stop_at = rng.randrange(SEGMENT // 4, SEGMENT) if last else SEGMENT
        exact_fit = not last and rng.random() < 0.3
        while True:
            free = SEGMENT - position
            if exact_fit and free <= 2000:
                segment[position:] = _exact_fit(base + position, free)
                break
            record = _record(rng, base + position, queue_offsets)
            if len(record) + 8 > free or position + len(record) > stop_at:
                if not last:
                    segment[position:position + 8] = msgcodec.encode_blank(free)
                break
            segment[position:position + len(record)] = record
            position += len(record)
    _damage(rng, data)
    for index, segment in enumerate(data):
        with open(os.path.join(directory, offset_to_file_name(index * SEGMENT)), "wb") as handle:
            handle.write(segment)


def _exact_fit(phy_offset: int, size: int) -> bytearray:
    """A record of exactly `size` bytes (its body fills what the other fields leave)."""
    def encode(body_length: int) -> bytearray:
        return msgcodec.encode_message(
            topic="BenchTopic", queue_id=0, body=os.urandom(body_length), properties_raw=b"",
            queue_offset=99, phy_offset=phy_offset, born_timestamp=1, born_host="127.0.0.1:1",
            store_timestamp=2, store_host="127.0.0.1:10911")
    record = encode(size - len(encode(0)))
    assert len(record) == size
    return record


def _damage(rng: random.Random, data: list[bytearray]) -> None:
    segment = rng.choice(data)
    used = len(bytes(segment).rstrip(b"\x00"))
    if used < 200:
        return
    at = rng.randrange(0, used)
    kind = rng.choice(["none", "flip", "zero", "blank", "size", "magic", "tail"])
    if kind == "flip":
        segment[at] ^= 1 << rng.randrange(8)
    elif kind == "zero":
        end = min(len(segment), at + rng.randrange(1, 300))
        segment[at:end] = bytes(end - at)
    elif kind == "tail":
        end = min(len(segment), used + rng.randrange(1, 64))
        segment[used:end] = b"\x07" * (end - used)
    else:
        start = _record_start_near(segment, at)
        if start is None:
            return
        if kind == "blank":
            segment[start:start + 8] = msgcodec.encode_blank(len(segment) - start)
        elif kind == "size":
            size = int.from_bytes(segment[start:start + 4], "big")
            segment[start:start + 4] = (size + rng.choice([-8, -1, 1, 8, 10**6])).to_bytes(4, "big")
        else:
            segment[start + 4:start + 8] = os.urandom(4)


def _record_start_near(segment: bytearray, at: int) -> int | None:
    position = 0
    previous = None
    while position < len(segment) - 8:
        size = int.from_bytes(segment[position:position + 4], "big", signed=True)
        magic = int.from_bytes(segment[position + 4:position + 8], "big", signed=True)
        if magic not in (msgcodec.MESSAGE_MAGIC_V1, msgcodec.MESSAGE_MAGIC_V2) or size <= 0:
            break
        if position >= at:
            return position
        previous = position
        position += size
    return previous


def _open(directory: str) -> CommitLog:
    commit_log = CommitLog(directory, SEGMENT, read_only=True, store_host="127.0.0.1:10911")
    commit_log.mapped_files.load()
    return commit_log


def _report_fields(report) -> dict:
    return {"records_checked": report.records_checked, "bytes_checked": report.bytes_checked,
            "last_record_offset": report.last_record_offset, "stop_reason": report.stop_reason,
            "scanned_queue_max": dict(report.scanned_queue_max)}


@pytest.fixture(params=["compiled", "python"])
def kernel_scan(request, monkeypatch):
    if request.param == "compiled":
        if not kernel.COMPILED:
            pytest.skip("the C kernel is not built")
    else:
        monkeypatch.setattr(recovery.kernel, "scan", kernel._scan_py)
    return request.param


@pytest.mark.parametrize("seed", range(60))
def test_batched_walk_matches_record_by_record_walk(tmp_path, seed, kernel_scan, monkeypatch):
    rng = random.Random(seed)
    directory = str(tmp_path / "commitlog")
    _write_log(directory, rng)
    # Small batches now and then, so that a walk crosses many STOP_FULL boundaries.
    monkeypatch.setattr(recovery, "SCAN_BATCH_ROWS", rng.choice([1, 3, 7, 8192]))
    commit_log = _open(directory)
    try:
        files = commit_log.mapped_files.files
        for start_index in sorted({0, len(files) - 1, rng.randrange(len(files))}):
            for check_crc in (True, False):
                expected = recovery.RecoveryReport(mode="normal")
                want = _reference_scan_valid_end(commit_log, start_index, check_crc=check_crc,
                                                 report=expected)
                got_report = recovery.RecoveryReport(mode="normal")
                got = recovery.scan_valid_end(commit_log, start_index, check_crc=check_crc,
                                              report=got_report)
                assert got == want
                assert _report_fields(got_report) == _report_fields(expected)
    finally:
        commit_log.mapped_files.close()


def _one_segment(tmp_path, make_record, count: int) -> tuple[str, list[int]]:
    """commitlog/ with one segment of `count` records, record i = make_record(i, its position);
    returns the directory and the records' positions."""
    directory = str(tmp_path / "commitlog")
    os.makedirs(directory)
    segment = bytearray(SEGMENT)
    positions = []
    position = 0
    for index in range(count):
        record = make_record(index, position)
        positions.append(position)
        segment[position:position + len(record)] = record
        position += len(record)
    with open(os.path.join(directory, offset_to_file_name(0)), "wb") as handle:
        handle.write(segment)
    return directory, positions


def test_schedule_record_with_bad_delay_stops_the_walk(tmp_path, kernel_scan):
    def make(index, position):
        raw = b"DELAY\x01nope" if index == 3 else b"DELAY\x012"
        return msgcodec.encode_message(
            topic="SCHEDULE_TOPIC_XXXX", queue_id=1, body=b"x" * 10, properties_raw=raw,
            queue_offset=index, phy_offset=position, born_timestamp=1, born_host="127.0.0.1:1",
            store_timestamp=5, store_host="127.0.0.1:10911")

    directory, offsets = _one_segment(tmp_path, make, 5)
    commit_log = _open(directory)
    try:
        report = recovery.RecoveryReport(mode="normal")
        end = recovery.scan_valid_end(commit_log, 0, check_crc=True, report=report)
        assert end == offsets[3]
        assert report.records_checked == 3
        assert report.last_record_offset == offsets[2]
        assert report.scanned_queue_max == {("SCHEDULE_TOPIC_XXXX", 1): 2}
        assert report.stop_reason.startswith(f"invalid record at {offsets[3]}")
    finally:
        commit_log.mapped_files.close()


def test_long_topics_take_the_python_grouping(tmp_path, kernel_scan):
    topics = ["a" * 300, "b", "a" * 300, "a" * 299 + "\x00"]

    def make(index, position):
        return msgcodec.encode_message(
            topic=topics[index], queue_id=0, body=b"y", properties_raw=b"",
            queue_offset=10 - index, phy_offset=position, born_timestamp=1,
            born_host="127.0.0.1:1", store_timestamp=5, store_host="127.0.0.1:10911", version=2)

    directory, _ = _one_segment(tmp_path, make, len(topics))
    commit_log = _open(directory)
    try:
        report = recovery.RecoveryReport(mode="normal")
        recovery.scan_valid_end(commit_log, 0, check_crc=True, report=report)
        assert report.scanned_queue_max == {("a" * 300, 0): 10, ("b", 0): 9,
                                            ("a" * 299 + "\x00", 0): 7}
    finally:
        commit_log.mapped_files.close()


def test_read_only_refresh_follows_the_writer_across_segments(tmp_path):
    from store.api import Message
    from store.config import StoreConfig
    from store.message_store import MessageStore

    config = StoreConfig.from_dict({}, store_path_root_dir=str(tmp_path / "store"),
                                   mapped_file_size_commit_log=SEGMENT)
    with MessageStore.open(config) as writer:
        writer.put_message(Message(topic="T", body=b"first"))
        with MessageStore.open(config, read_only=True) as reader:
            for round_ in range(4):
                for index in range(60 * round_ + 1):
                    topic = "SCHEDULE_TOPIC_XXXX" if index == 7 else "T"
                    result = writer.put_message(Message(
                        topic=topic, body=bytes(300 + index), queue_id=index % 3, tags="a",
                        properties={"DELAY": "2"} if topic != "T" else None))
                    assert result.ok
                before = reader.commit_log.max_offset()
                grown = reader.refresh()
                assert reader.commit_log.max_offset() == writer.commit_log.max_offset()
                assert grown == writer.commit_log.max_offset() - before
            assert len(reader.commit_log.mapped_files.files) > 1
