"""rebuild: consume queues and index files from the commit log alone (store/pipeline/jobs_rebuild.py).

The reference is an engine reput written here: the commit log walked with the engine's `check_message`
(spec §2.7) exactly like `ReputService._next_batch`, and fed in batches to the engine's own dispatchers
over fresh structures. The rebuild must produce the same bytes (index files compared in name order,
since names are creation times), and for every fixture the real store's consume-queue files; for
clean-shutdown fixtures also the real store's index files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store.codec import record_check
from store.consumequeue.base import STORE_TYPE_ROCKSDB, ConsumeQueueSettings
from store.consumequeue.factory import open_consume_queue_store
from store.errors import ConfigError
from store.index.index_service import IndexService
from store.pipeline.jobs_rebuild import NO_MASTER, RebuildSettings, rebuild
from store.pipeline.layout import list_commit_log
from store.pipeline.segment_reader import map_file
from store.pipeline.synthetic import CommitLogWriter, SyntheticMessage
from tests.pipeline_util import SPARK_WARNING_FILTERS, fixture_dirs, fixture_id, read_dump, spark  # noqa: F401
from store.services.dispatch import DISPATCH_BATCH_MAX_RECORDS, ConsumeQueueDispatcher, IndexDispatcher

FIXTURES = fixture_dirs()
pytestmark = pytest.mark.skipif(not FIXTURES, reason="no RocketMQ fixtures found")


def _dledger_requests(segment):
    from store.dledger.entries import walk_entries
    data = bytes(map_file(segment.path))
    requests = []
    for step, _n, position, header in walk_entries([(segment.file_from_offset, data, len(data),
                                                     segment.path)]):
        if step != "entry":
            break
        result = record_check.check_message(data, position + 48, check_crc=False,
                                            limit=position + header.size)
        if result.kind == record_check.CHECK_RECORD:
            requests.append(result.request)
    return requests


def engine_reput(store_dir: Path, out_dir: Path, settings: RebuildSettings) -> None:
    """What the engine's dispatcher builds for this log (the scalar reference)."""
    cq_store = open_consume_queue_store(ConsumeQueueSettings(root_dir=str(out_dir),
                                                             file_size_bytes=settings.cq_file_size_bytes))
    cq_store.load()
    index = IndexService(out_dir / "index", settings.max_hash_slot_num, settings.max_index_num, clock_ms=lambda: 0)
    index.load()
    dispatchers = [ConsumeQueueDispatcher(cq_store), IndexDispatcher(index)]
    batch = []
    for segment in list_commit_log(store_dir):
        buf, position, ended = map_file(segment.path), 0, False
        if segment.dledger:             # a DLedger data file: the record inside each entry
            batch.extend(_dledger_requests(segment))
            continue
        while position < len(buf):
            result = record_check.check_message(buf, position, check_crc=False)
            if result.kind == record_check.CHECK_BLANK:
                break
            if result.kind != record_check.CHECK_RECORD:
                ended = True
                break
            batch.append(result.request)
            position += result.size
            if len(batch) >= DISPATCH_BATCH_MAX_RECORDS:
                for dispatcher in dispatchers:
                    dispatcher.dispatch(batch)
                batch = []
        if ended:
            break
    if batch:
        for dispatcher in dispatchers:
            dispatcher.dispatch(batch)
    cq_store.flush()
    cq_store.close()
    index.flush()
    index.close()


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def index_bytes_in_order(index_dir: Path) -> list[bytes]:
    return [(index_dir / name).read_bytes() for name in sorted(os.listdir(index_dir))] if index_dir.is_dir() else []


def clean_shutdown(fixture: Path) -> bool:
    return not read_dump(fixture)["before"]["abortFileExists"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_rebuild_without_spark_reproduces_the_store(fixture, tmp_path):
    store_dir = fixture / "store"
    result = rebuild(store_dir, tmp_path / "out", master=NO_MASTER)
    assert result.records >= len({m["commitLogOffset"] for q in read_dump(fixture)["queues"] for m in q["messages"]})
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(store_dir / "consumequeue")
    engine_reput(store_dir, tmp_path / "engine", RebuildSettings.of_store(store_dir))
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(tmp_path / "engine" / "consumequeue")
    rebuilt = index_bytes_in_order(tmp_path / "out" / "index")
    assert rebuilt and rebuilt == index_bytes_in_order(tmp_path / "engine" / "index")
    if clean_shutdown(fixture):
        assert rebuilt == index_bytes_in_order(store_dir / "index")


@pytest.mark.spark
@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
@SPARK_WARNING_FILTERS[0]
@SPARK_WARNING_FILTERS[1]
def test_rebuild_with_spark_gives_the_same_bytes(spark, fixture, tmp_path):  # noqa: F811
    store_dir = fixture / "store"
    # Small splits: several partitions per segment, so log order across partitions is exercised.
    result = rebuild(store_dir, tmp_path / "spark", spark=spark, split_bytes=16 * 1024)
    assert result.splits > len(list_commit_log(store_dir))
    rebuild(store_dir, tmp_path / "local", master=NO_MASTER)
    assert tree_bytes(tmp_path / "spark" / "consumequeue") == tree_bytes(tmp_path / "local" / "consumequeue")
    assert index_bytes_in_order(tmp_path / "spark" / "index") == index_bytes_in_order(tmp_path / "local" / "index")
    assert tree_bytes(tmp_path / "spark" / "consumequeue") == tree_bytes(store_dir / "consumequeue")


@pytest.mark.parametrize("fixture", FIXTURES[:1], ids=fixture_id)
def test_rebuild_into_rocksdb_answers_like_the_files(fixture, tmp_path):
    store_dir = fixture / "store"
    rebuild(store_dir, tmp_path / "rocks", master=NO_MASTER, store_type=STORE_TYPE_ROCKSDB)
    settings = RebuildSettings.of_store(store_dir)
    files = open_consume_queue_store(ConsumeQueueSettings(str(store_dir), settings.cq_file_size_bytes,
                                                          read_only=True))
    rocks = open_consume_queue_store(ConsumeQueueSettings(str(tmp_path / "rocks"), store_type=STORE_TYPE_ROCKSDB,
                                                          read_only=True))
    files.load()
    files.recover()
    rocks.load()
    try:
        assert sorted(files.queues()) == sorted(rocks.queues())
        for topic, queue_id in files.queues():
            count = files.get_max_offset(topic, queue_id)
            assert rocks.get_max_offset(topic, queue_id) == count
            want = [(u.phy_offset, u.size, u.tags_code) for u in (files.get_unit(topic, queue_id, o) for o in range(count))]
            got = [(u.phy_offset, u.size, u.tags_code) for u in (rocks.get_unit(topic, queue_id, o) for o in range(count))]
            assert got == want
    finally:
        files.close()
        rocks.close()


def _synthetic_store(root: Path, records: int, segment_size_bytes: int = 4096) -> Path:
    writer = CommitLogWriter(root, segment_size_bytes)
    offsets = {}
    for i in range(records):
        queue = (f"Topic{i % 3}", i % 2)
        offsets[queue] = offsets.get(queue, -1) + 1
        properties = f"TAGS\x01t{i % 5}\x02KEYS\x01k{i} shared\x02UNIQ_KEY\x01U{i:08d}".encode()
        if i % 7 == 3:  # a delayed message: tagsCode is its delivery time
            properties += b"\x02DELAY\x013"
            queue = ("SCHEDULE_TOPIC_XXXX", 2)
            offsets[queue] = offsets.get(queue, -1) + 1
        writer.append(SyntheticMessage(topic=queue[0], queue_id=queue[1], body=b"x" * (i % 50),
                                       properties_raw=properties, queue_offset=offsets[queue],
                                       store_timestamp=1_700_000_000_000 + i))
    (root / "store.properties").write_text("mappedFileSizeConsumeQueue=200\nmaxHashSlotNum=16\nmaxIndexNum=40\n")
    return root


def test_rebuild_matches_the_engine_on_a_synthetic_log(tmp_path):
    store_dir = _synthetic_store(tmp_path / "store", 300)
    result = rebuild(store_dir, tmp_path / "out", master=NO_MASTER)
    assert result.records == 300 and result.index_files > 3
    engine_reput(store_dir, tmp_path / "engine", RebuildSettings.of_store(store_dir))
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(tmp_path / "engine" / "consumequeue")
    assert index_bytes_in_order(tmp_path / "out" / "index") == index_bytes_in_order(tmp_path / "engine" / "index")


def test_a_torn_record_ends_the_log_like_recovery(tmp_path):
    store_dir = _synthetic_store(tmp_path / "store", 120)
    segments = list_commit_log(store_dir)
    assert len(segments) >= 3
    with open(segments[1].path, "r+b") as handle:  # break the length check of the second segment's 2nd record
        first_size = int.from_bytes(handle.read(4), "big")
        handle.seek(first_size)
        handle.write((999).to_bytes(4, "big"))
    result = rebuild(store_dir, tmp_path / "out", master=NO_MASTER)
    assert result.end_kind == "invalid" and result.log_end_offset == segments[1].file_from_offset + first_size
    assert segments[2].name in result.ignored_segments
    engine_reput(store_dir, tmp_path / "engine", RebuildSettings.of_store(store_dir))
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(tmp_path / "engine" / "consumequeue")
    assert index_bytes_in_order(tmp_path / "out" / "index") == index_bytes_in_order(tmp_path / "engine" / "index")


@pytest.mark.spark
@SPARK_WARNING_FILTERS[0]
@SPARK_WARNING_FILTERS[1]
def test_spark_rebuild_stops_at_a_torn_record_and_drops_the_rest(spark, tmp_path):  # noqa: F811
    store_dir = _synthetic_store(tmp_path / "store", 200)
    segments = list_commit_log(store_dir)
    with open(segments[2].path, "r+b") as handle:
        handle.write((95).to_bytes(4, "big"))  # the first record's TOTALSIZE no longer matches its fields
    result = rebuild(store_dir, tmp_path / "out", spark=spark, split_bytes=1024)
    assert result.end_kind == "invalid" and result.log_end_offset == segments[2].file_from_offset
    assert segments[3].name in result.ignored_segments
    assert set(result.ignored_segments) <= {s.name for s in segments[3:]}  # all-zero preallocated files not listed
    engine_reput(store_dir, tmp_path / "engine", RebuildSettings.of_store(store_dir))
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(tmp_path / "engine" / "consumequeue")
    assert index_bytes_in_order(tmp_path / "out" / "index") == index_bytes_in_order(tmp_path / "engine" / "index")


def test_an_unparsable_delay_ends_the_log_like_the_engine(tmp_path):
    writer = CommitLogWriter(tmp_path / "store", 4096)
    for i in range(5):
        delay = b"x" if i == 3 else b"2"
        writer.append(SyntheticMessage(topic="SCHEDULE_TOPIC_XXXX", queue_id=1, queue_offset=i,
                                       properties_raw=b"TAGS\x01a\x02DELAY\x01" + delay))
    (tmp_path / "store" / "store.properties").write_text("mappedFileSizeConsumeQueue=200\nmaxHashSlotNum=4\nmaxIndexNum=8\n")
    result = rebuild(tmp_path / "store", tmp_path / "out", master=NO_MASTER)
    assert result.records == 3 and result.end_kind == "invalid"
    engine_reput(tmp_path / "store", tmp_path / "engine", RebuildSettings.of_store(tmp_path / "store"))
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(tmp_path / "engine" / "consumequeue")


def test_rebuild_refuses_a_used_output_directory(tmp_path):
    (tmp_path / "out" / "index").mkdir(parents=True)
    (tmp_path / "out" / "index" / "20240101000000000").write_bytes(b"x")
    with pytest.raises(ConfigError, match="not empty"):
        rebuild(FIXTURES[0] / "store", tmp_path / "out", master=NO_MASTER)
    with pytest.raises(ConfigError, match="separate output"):
        rebuild(FIXTURES[0] / "store", FIXTURES[0] / "store", master=NO_MASTER)


def _cli(argv: list[str]):
    import argparse

    from store.pipeline.cli import add_spark_subcommands

    parser = argparse.ArgumentParser()
    add_spark_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_rebuild_without_spark_draws_a_progress_bar(tmp_path, capsys):
    import json

    store_dir = FIXTURES[0] / "store"
    assert _cli(["spark", "rebuild", str(tmp_path / "out"), "--store", str(store_dir), "--master", "none",
                 "--json", "--progress"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["records"] > 0 and payload["master"] == "none"
    assert "rebuild [" in captured.err and "MiB" in captured.err
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(store_dir / "consumequeue")


def test_byte_progress_draws_and_clears():
    import io

    from store.pipeline.progress import ByteProgress

    stream = io.StringIO()
    bar = ByteProgress("x", stream=stream, min_interval_s=0)
    bar(512 << 20, 1 << 30)
    bar(1 << 30, 1 << 30)
    bar.close()
    text = stream.getvalue()
    assert "x [" + "#" * 15 + "." * 15 + "] 512.0/1,024.0 MiB" in text and text.endswith("\r")
