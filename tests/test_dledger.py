"""DLedger commit logs (RocketMQ 5.3.3, enableDLegerCommitLog=true): codecs, layout, read-only and
hosted opens against the real store's answers, recovery of a cut log, check() on damaged copies, the
CLI dump and the pipeline.

The fixture (tests/data/fixtures/rocketmq-5.3.3/dledger-clean) keeps DLedger's 160 MiB index file
gzipped beside store/ (`dledger-index.gz`); `install_index` puts it back, sparse, where the broker
keeps it (store/dledger-n0/index/00000000000000000000) for the tests that need it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct

import pytest

from store import MessageStore, StoreConfig
from store.check.run import has_errors
from store.dledger.entries import IndexFiles, walk_entries
from store.dledger.entry_codec import (DEFAULT_INDEX_FILE_BYTES, ENTRY_HEADER_BYTES,
                                       INDEX_UNIT_BYTES, decode_entry_header, decode_index_unit,
                                       encode_blank, encode_entry_header, encode_index_unit)
from store.dledger.layout import find_dledger
from store.errors import ConfigError, CorruptDataError, ReadOnlyStoreError
from store.tools.check_directory import check_config
from tests.fixtures_util import FIXTURES_ROOT, copy_store, load_dump, store_config, tree_fingerprint
from tests.pipeline_util import spark  # noqa: F401 (a fixture; the session starts only when used)

FIXTURE = os.path.join(FIXTURES_ROOT, "rocketmq-5.3.3", "dledger-clean")
pytestmark = pytest.mark.skipif(not os.path.isdir(FIXTURE), reason="no DLedger fixture")
DATA = os.path.join("dledger-n0", "data")


def install_index(root: str) -> str:
    """Unpack dledger-index.gz to its place in `root`, as a sparse file (zeros are skipped)."""
    directory = os.path.join(root, "dledger-n0", "index")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "00000000000000000000")
    with gzip.open(os.path.join(FIXTURE, "dledger-index.gz"), "rb") as source, \
            open(path, "wb") as target:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            if chunk.count(0) == len(chunk):
                target.seek(len(chunk), os.SEEK_CUR)
            else:
                target.write(chunk)
        target.truncate()
    return path


def entries_of(root: str):
    directory = os.path.join(root, DATA)
    files = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as handle:
            data = handle.read()
        files.append((int(name), data, len(data), os.path.join(directory, name)))
    return [(files[n][3], p, h) for step, n, p, h in walk_entries(files) if step == "entry"]


def patch(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(data)


def serious(findings):
    return [f for f in findings if f.severity in ("error", "warning")]


# -- codecs and layout ----------------------------------------------------------------------------

def test_entry_and_index_codecs_round_trip():
    header = encode_entry_header(size=985, index=7, term=3, pos=4096, body_size=937)
    assert len(header) == ENTRY_HEADER_BYTES == 48
    decoded = decode_entry_header(header, 0)
    assert (decoded.magic, decoded.size, decoded.index, decoded.term, decoded.pos,
            decoded.body_size, decoded.body_pos) == (1, 985, 7, 3, 4096, 937, 4144)
    unit = encode_index_unit(pos=4096, size=985, index=7, term=3)
    assert len(unit) == INDEX_UNIT_BYTES
    assert decode_index_unit(unit, 0) == decode_index_unit(bytes(4) + unit, 4)
    assert (decode_index_unit(unit, 0).pos, decode_index_unit(unit, 0).size) == (4096, 985)
    assert encode_blank(721) == struct.pack(">ii", -1, 721)
    assert DEFAULT_INDEX_FILE_BYTES == 167_772_160
    with pytest.raises(CorruptDataError, match="byte 10"):
        decode_entry_header(bytes(40), 10)


def test_fixture_entries_match_the_layout_dump():
    want = load_dump(FIXTURE)["dledgerAfterStart"]["entries"]
    got = entries_of(os.path.join(FIXTURE, "store"))
    assert len(got) == len(want) == 212
    for (_path, _position, header), entry in zip(got, want):
        assert (header.index, header.term, header.pos, header.size, header.magic, header.channel,
                header.chain_crc, header.body_crc, header.body_size, header.body_pos) == (
            entry["index"], entry["term"], entry["pos"], entry["size"], entry["magic"],
            entry["channel"], entry["chainCrc"], entry["bodyCrc"], entry["bodySize"],
            entry["commitLogOffset"])


def test_layout_from_config_or_detection(tmp_path):
    root = copy_store(FIXTURE, tmp_path)
    layout = find_dledger(store_config(FIXTURE, root))
    assert layout.data_dir == os.path.join(root, DATA) and layout.peers == 1
    detected = find_dledger(StoreConfig(store_path_root_dir=root))     # no properties at all
    assert detected.data_dir == layout.data_dir and detected.peers is None
    # Flag off on a store whose only log is DLedger's: detection reads it (see store.dledger.layout).
    assert find_dledger(StoreConfig.from_dict(
        {"storePathRootDir": root, "enableDLegerCommitLog": "false"})).data_dir == layout.data_dir
    with pytest.raises(ConfigError, match="dLegerSelfId"):
        find_dledger(StoreConfig.from_dict({"storePathRootDir": root,
                                            "enableDLegerCommitLog": "true"}))
    os.makedirs(os.path.join(root, "dledger-n1", "data"))
    with pytest.raises(ConfigError, match="several DLedger logs"):
        find_dledger(StoreConfig(store_path_root_dir=root))
    shutil.rmtree(os.path.join(root, "dledger-n1"))
    os.makedirs(os.path.join(root, "commitlog"))
    with open(os.path.join(root, "commitlog", "00000000000000000000"), "wb") as handle:
        handle.truncate(65536)
    with pytest.raises(ConfigError, match="mixed"):
        find_dledger(store_config(FIXTURE, root))


# -- opening ----------------------------------------------------------------------------------------

def test_read_only_open_answers_like_the_broker_and_writes_nothing():
    root = os.path.join(FIXTURE, "store")
    dump = load_dump(FIXTURE)
    before = tree_fingerprint(root)
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        pointers = store.pointers()
        assert (pointers["min_phy_offset"], pointers["max_phy_offset"]) == (0, 143308)
        assert store.get_earliest_message_time() == dump["commitLog"]["earliestMessageTime"]
        for record in dump["commitLogRecords"]:
            got = store.look_message_by_offset(record["commitLogOffset"])
            assert (got.topic, got.queue_id, got.queue_offset, got.store_size, got.uniq_key) == (
                record["topic"], record["queueId"], record["queueOffset"], record["size"],
                record["uniqKey"])
        for query in dump["queries"]:
            hits = store.query_message(query["topic"], query["key"], query["maxNum"]).messages
            assert sorted(m.msg_id for m in hits) >= sorted(h["msgId"] for h in query["hits"])
            for hit in query["hits"]:
                assert store.view_message(hit["msgId"]).commit_log_offset == hit["commitLogOffset"]
        with pytest.raises(ReadOnlyStoreError):
            store.commit_log.append_one(bytearray(100), None)
    assert tree_fingerprint(root) == before


def test_readers_see_the_log_up_to_committed_pos(tmp_path):
    """getMaxOffset and getData stop at DLedger's committedPos: the checkpoint's committedIndex for
    a member of a larger group; the last entry for a single-member group (it leads and commits)."""
    from store.errors import MessageNotFoundError
    root = copy_store(FIXTURE, tmp_path)
    with open(os.path.join(root, "dledger-n0", "checkpoint"), "w", encoding="latin-1") as handle:
        handle.write("committedIndex=200\nendIndex=211\n")
    entries = {h.index: h for _p, _q, h in entries_of(root)}
    two = store_config(FIXTURE, root, d_leger_peers="n0-127.0.0.1:40911;n1-127.0.0.1:40912")
    with MessageStore.open(two, read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == entries[200].pos + entries[200].size
        assert store.look_message_by_offset(entries[200].body_pos).queue_offset >= 0
        with pytest.raises(MessageNotFoundError):
            store.look_message_by_offset(entries[205].body_pos)
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == entries[211].pos + entries[211].size


def test_a_member_of_a_larger_group_refuses_puts(tmp_path):
    from store import Message
    root = copy_store(FIXTURE, tmp_path)
    config = store_config(FIXTURE, root,
                          d_leger_peers="n0-127.0.0.1:40911;n1-127.0.0.1:40912")
    with MessageStore.open(config) as store:
        with pytest.raises(ReadOnlyStoreError, match="quorum"):
            store.put_message(Message("DlA", b"x", queue_id=0))
        assert store.total_messages() == 212


def test_hosted_writes_of_a_single_member_group(tmp_path):
    """Puts become entries (index 212..., term 0, pos + 48 offsets), a batch one entry per message,
    files roll with a DLedger BLANK; the index and checkpoint follow; check() stays clean and a
    read-only open reads everything back."""
    from store import Message
    root = copy_store(FIXTURE, tmp_path)
    with MessageStore.open(store_config(FIXTURE, root)) as store:
        results = [store.put_message(Message("DlA", bytes([i % 251]) * 900, queue_id=i % 2,
                                             keys=(f"w{i}",))) for i in range(130)]
        batch = store.put_messages([Message("DlB", b"b%d" % i, queue_id=1) for i in range(3)])
    assert all(r.status.name == "PUT_OK" for r in results) and batch.status.name == "PUT_OK"
    assert len(batch.msg_ids) == 3
    written = entries_of(root)[212:]
    assert [h.index for _p, _q, h in written] == list(range(212, 345))
    assert [h.body_pos for _p, _q, h in written[:130]] == [r.wrote_offset for r in results]
    assert len(os.listdir(os.path.join(root, DATA))) == 5                  # rolled twice
    with open(os.path.join(root, "dledger-n0", "checkpoint"), encoding="latin-1") as handle:
        assert handle.read() == "committedIndex=344\nendIndex=344\n"
    findings = check_config(store_config(FIXTURE, root))
    assert serious(findings) == [] and not any("index file" in f.message for f in findings)
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        assert store.total_messages() == 212 + 133
        assert store.pointers()["max_phy_offset"] == written[-1][2].pos + written[-1][2].size
        for i, result in enumerate(results):
            got = store.view_message(result.msg_id)
            assert got.keys == f"w{i}" and got.body == bytes([i % 251]) * 900
            assert got.commit_log_offset == result.wrote_offset
        assert [m.body for m in store.get_message("g", "DlB", 1, 54, 8).messages] == \
            [b"b0", b"b1", b"b2"]


def _queue_answers(store):
    return {(t, q): [(u.phy_offset, u.size, u.tags_code) for u in
                     (store.consume_queues.get_unit(t, q, o) for o in
                      range(store.get_min_offset_in_queue(t, q), store.get_max_offset_in_queue(t, q)))]
            for t, q in store.queues()}


def _dump_queues():
    return {(q["topic"], q["queueId"]): [(u["commitLogOffset"], u["size"], u["tagsCode"])
                                         for u in q["cq"]] for q in load_dump(FIXTURE)["queues"]}


@pytest.mark.parametrize("crashed", [False, True])
def test_hosted_open_dispatches_by_walking_the_entries(tmp_path, crashed):
    """A lost queue: after a crash, dispatch re-walks the entries from the data file
    isMmapFileMatchedRecover picks and rebuilds it; after a clean shutdown dispatch starts at the
    queues' end, as RocketMQ's (the queue stays missing)."""
    root = copy_store(FIXTURE, tmp_path)
    shutil.rmtree(os.path.join(root, "consumequeue", "DlB", "1"))
    if crashed:
        open(os.path.join(root, "abort"), "wb").close()
    with MessageStore.open(store_config(FIXTURE, root)) as store:
        assert store.recovery_report.mode == ("abnormal" if crashed else "normal")
        wanted = _dump_queues()
        if not crashed:
            del wanted[("DlB", 1)]
        assert _queue_answers(store) == wanted
        assert store.dispatch_behind_bytes() == 0


def test_torn_last_entry_is_cut_like_dledger_recovery(tmp_path):
    root = copy_store(FIXTURE, tmp_path)
    path, position, last = entries_of(root)[-1]
    patch(path, position + 8, bytes(40))        # header half written: index..bodySize are zeros
    findings = check_config(store_config(FIXTURE, root))
    assert any("invalid DLedger entry" in f.message and f.position == position and
               f.path == path for f in findings)
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == last.pos
        assert store.recovery_report.process_offset == last.pos
        assert "pos field" in store.recovery_report.stop_reason
    with MessageStore.open(store_config(FIXTURE, root)) as store:
        assert store.pointers()["max_phy_offset"] == last.pos
        assert store.total_messages() == 211                 # the queues are cut at the log's end
        wanted = _dump_queues()
        got = _queue_answers(store)
        assert sum(len(v) for v in got.values()) == 211
        assert all(got[key] == [u for u in units if u[0] < last.pos] for key, units in wanted.items())
    findings = check_config(store_config(FIXTURE, root))     # the cut tail was zeroed
    assert not any("invalid DLedger entry" in f.message for f in findings)


# -- check ----------------------------------------------------------------------------------------

def test_check_is_clean_with_the_index_file_and_notes_its_absence(tmp_path):
    root = copy_store(FIXTURE, tmp_path)
    findings = check_config(store_config(FIXTURE, root))
    assert serious(findings) == []
    assert any("no DLedger index file" in f.message for f in findings)
    install_index(root)
    last = entries_of(root)[-1][2]
    unit = IndexFiles(os.path.join(root, "dledger-n0", "index")).unit(211)
    assert (unit.magic, unit.pos, unit.size, unit.index, unit.term) == (1, last.pos, last.size, 211, 0)
    findings = check_config(store_config(FIXTURE, root))
    assert serious(findings) == [] and not any("index file" in f.message for f in findings)
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        # recover() starts at the third-last file whose first entry matches its index unit
        assert store.recovery_report.start_file.endswith("00000000000000000000")
        assert "no index file" not in store.recovery_report.steps[0].detail


def test_check_finds_each_damage(tmp_path):
    root = copy_store(FIXTURE, tmp_path)
    index_path = install_index(root)
    entries = entries_of(root)
    path3, position3, _ = entries[3]
    patch(path3, position3 + ENTRY_HEADER_BYTES + 200, b"\x99")         # inside the record's body
    path5, position5, _ = entries[5]
    patch(path5, position5 + 40, struct.pack(">i", 0x1234))             # bodyCrc
    patch(index_path, 9 * INDEX_UNIT_BYTES + 12, struct.pack(">i", 1))  # unit 9's size
    findings = check_config(store_config(FIXTURE, root))
    assert has_errors(findings)
    messages = [(f.severity, f.message) for f in findings if f.severity != "info"]
    assert any(s == "error" and "entry 3 " in m and "BODYCRC" in m for s, m in messages), messages
    assert any(s == "warning" and "entry 5 " in m and "bodyCrc" in m for s, m in messages)
    assert any(s == "warning" and "index unit 9 " in m for s, m in messages)
    assert len(serious(findings)) == 3, messages


def test_check_reports_a_broken_index_sequence_and_where_recovery_cuts(tmp_path):
    root = copy_store(FIXTURE, tmp_path)
    path, position, header = entries_of(root)[100]
    patch(path, position + 8, struct.pack(">q", 7))                      # index 100 -> 7
    findings = check_config(store_config(FIXTURE, root))
    cut = [f for f in findings if "invalid DLedger entry" in f.message]
    assert len(cut) == 1 and "does not follow 99" in cut[0].message and cut[0].severity == "error"
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == header.pos


# -- CLI and pipeline -------------------------------------------------------------------------------

def test_cli_dump_records_shows_entries_and_records(capsys):
    from store.cli import main
    root = os.path.join(FIXTURE, "store")
    code = main(["dump", "records", "--store", root, "--config",
                 os.path.join(FIXTURE, "store.properties"), "--limit", "300", "--verify", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    records = [r for r in out["rows"] if r["kind"] == "RECORD"]
    assert [r["dledgerIndex"] for r in records] == list(range(212))
    assert all(r["valid"] and r["phyOffset"] == r["entryPos"] + 48 for r in records)
    assert [r["phyOffset"] for r in records] == \
        [r["commitLogOffset"] for r in load_dump(FIXTURE)["commitLogRecords"]]
    assert [r["kind"] for r in out["rows"] if r["kind"] != "RECORD"] == ["BLANK", "BLANK", "END"]


def test_cli_rebuild_index_reads_the_entries(capsys, tmp_path):
    from store.cli import main
    root = copy_store(FIXTURE, tmp_path)
    config = os.path.join(FIXTURE, "store.properties")
    shutil.rmtree(os.path.join(root, "index"))
    assert main(["recover", "--rebuild-index", "--store", root, "--config", config, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rebuildIndex"]["records"] == 212 and out["rebuildIndex"]["indexFiles"] == 2
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        for query in load_dump(FIXTURE)["queries"][:20]:
            hits = store.query_message(query["topic"], query["key"], query["maxNum"]).messages
            assert {h["msgId"] for h in query["hits"]} <= {m.msg_id for m in hits}


def test_cli_rebuild_cq_dispatches_the_entries(capsys, tmp_path):
    from store.cli import main
    root = copy_store(FIXTURE, tmp_path)
    shutil.rmtree(os.path.join(root, "consumequeue", "DlB", "1"))
    assert main(["recover", "--rebuild-cq", "DlB/1", "--store", root, "--config",
                 os.path.join(FIXTURE, "store.properties"), "--json"]) == 0
    capsys.readouterr()
    with MessageStore.open(store_config(FIXTURE, root), read_only=True) as store:
        assert _queue_answers(store) == _dump_queues()


def test_pipeline_tables_over_dledger():
    from store.pipeline.dledger_scan import dledger_entries_table
    from store.pipeline.frames import commitlog_table
    root = os.path.join(FIXTURE, "store")
    records = commitlog_table(root, columns=["phy_offset", "topic", "queue_offset"]).to_pylist()
    dump = load_dump(FIXTURE)["commitLogRecords"]
    assert [(r["phy_offset"], r["topic"], r["queue_offset"]) for r in records] == \
        [(d["commitLogOffset"], d["topic"], d["queueOffset"]) for d in dump]
    entries = dledger_entries_table(root).to_pylist()
    assert [e["dledger_index"] for e in entries] == list(range(212))
    assert [e["commit_log_offset"] for e in entries] == [d["commitLogOffset"] for d in dump]


@pytest.mark.spark
def test_spark_sources_over_dledger(spark):
    root = os.path.join(FIXTURE, "store")
    dump = load_dump(FIXTURE)["commitLogRecords"]
    rows = spark.read.format("rocketmq-commitlog").load(root).select("phy_offset").collect()
    assert sorted(r.phy_offset for r in rows) == [d["commitLogOffset"] for d in dump]
    stream = spark.readStream.format("rocketmq-commitlog").load(root).writeStream \
        .format("memory").queryName("dledger_stream").trigger(availableNow=True).start()
    with pytest.raises(Exception, match="DLedger log"):     # batch reads only, said plainly
        stream.awaitTermination(120)
    stream.stop()
    entries = spark.read.format("rocketmq-dledger").load(root).collect()
    assert sorted((e.dledger_index, e.term, e.entry_pos) for e in entries) == \
        [(i, 0, d["entryPos"]) for i, d in enumerate(dump)]
