"""[5.x] Batch consume queues in `rmqstore` (store/cli/batch.py): `queryCq` on a batch topic,
`batch-queues` (with `--check`), and batch topics in `topicStatus` / `topicList` / `statsAll`.
Stores are written by the engine with a batch topic (tests/test_batch_view.make_batch_store)."""

from __future__ import annotations

import json
import os

import pytest

from store.cli import main
from tests.fixtures_util import tree_fingerprint
from tests.test_batch_view import BASES, COUNTS, make_batch_store, unit_path

PROPERTIES = ("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\n"
              "maxIndexNum=256\nmapperFileSizeBatchConsumeQueue=184\nstoreFormat=5.x\n")


@pytest.fixture()
def store_args(tmp_path):
    config = make_batch_store(tmp_path / "s")
    (tmp_path / "store.properties").write_text(PROPERTIES)     # found as DIR/../store.properties
    return config, ["--store", config.store_path_root_dir]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_query_cq_on_a_batch_topic(capsys, store_args):
    config, args = store_args
    before = tree_fingerprint(config.store_path_root_dir)
    code, out, err = run(capsys, "queryCq", "-t", "B", "-q", "0", "-i", "4", "-c", "6", *args)
    assert (code, err) == (0, "")
    assert "offsets in messages" in out and "max: 16, min: 0" in out
    # -c counts queue offsets (messages), as 5.3.3's queryConsumeQueue loop: bases 4 and 9 < 4 + 6
    assert [line for line in out.splitlines() if line.startswith("idx: ")] == ["idx: 4", "idx: 9"]
    assert "msgBaseOffset=4, batchSize=5, compactedOffset=-1, queueOffsets=4..8}" in out
    assert "unit: 00000000000000000000 at byte 92: " in out
    records = [line for line in out.splitlines() if line.startswith("record: ")]
    assert len(records) == 2 and all(line.endswith(": OK") for line in records)
    assert "B/0 QUEUEOFFSET 4, INNER_BASE 4, INNER_NUM 5, stored 20" in records[0]
    assert " UTC" in records[0] and "UTC)" in out            # times carry their zone
    assert tree_fingerprint(config.store_path_root_dir) == before


def test_query_cq_json_crosses_files_and_shows_the_group(capsys, store_args):
    config, args = store_args
    from store import MessageStore
    with MessageStore.open(config, start_services=False) as store:
        store.commit_consumer_offset("g", "B", 0, 9)
    code, out, _ = run(capsys, "queryCq", "-t", "B", "-q", "0", "-i", "0", "-c", "100", "-g", "g",
                       "--json", *args)
    value = json.loads(out)
    assert code == 0 and value["batch"] is True and (value["min"], value["max"]) == (0, 16)
    assert value["consumerOffset"] == 9
    assert [u["msg_base_offset"] for u in value["units"]] == BASES
    assert [u["batch_size"] for u in value["units"]] == COUNTS
    assert [u["file"] for u in value["units"]] == ["00000000000000000000"] * 4 + \
        ["00000000000000000184"] * 2                          # past the first file's end
    assert all(u["valid"] and u["record_topic"] == "B" for u in value["units"])
    assert value["truncated"] is False


@pytest.mark.parametrize("index", ["16", "99", "-1"])
def test_query_cq_outside_the_queue_is_one_line(capsys, store_args, index):
    config, args = store_args
    code, out, err = run(capsys, "queryCq", "-t", "B", "-q", "0", "-i", index, *args)
    assert code == 2 and out == ""
    [line] = err.splitlines()
    path = os.path.join(config.store_path_root_dir, "batchconsumequeue", "B", "0")
    assert line == f"rmqstore: error: {path}: no unit holds message offset {index}; the queue " \
                   f"holds messages [0, 16)"


def test_query_cq_on_a_plain_topic_is_unchanged(capsys, store_args):
    _config, args = store_args
    code, out, _ = run(capsys, "queryCq", "-t", "T", "-q", "0", "-i", "0", *args)
    assert code == 0 and "ConsumeQueueData{physicOffset=" in out and "Batch" not in out


def test_batch_queues(capsys, store_args):
    _config, args = store_args
    code, out, _ = run(capsys, "batch-queues", *args)
    header, row = out.splitlines()[:2]
    assert code == 0 and header.split()[:4] == ["topic", "queue", "files", "units"]
    assert row.split()[:8] == ["B", "0", "2", "6", "0", "16", "16", "True"]
    assert row.count(" UTC") == 2
    code, out, _ = run(capsys, "batch-queues", "--json", "--check", *args)
    [value] = json.loads(out)
    assert code == 0 and (value["units"], value["messages"], value["findings"]) == (6, 16, [])
    code, out, _ = run(capsys, "batch-queues", "-t", "T", *args)
    assert code == 0 and out.strip() == "no batch consume queues in this store for topic T"
    code, _out, err = run(capsys, "batch-queues", "-t", "../x", *args)
    assert code == 2 and len(err.splitlines()) == 1


def test_batch_queues_check_names_the_file_and_position(capsys, store_args):
    config, args = store_args
    path = unit_path(config)
    with open(path, "r+b") as handle:                   # unit 1: batchSize 2, its INNER_NUM is 1
        handle.seek(46 + 36)
        handle.write((2).to_bytes(2, "big"))
    code, out, _ = run(capsys, "batch-queues", "--check", *args)
    assert code == 1
    assert f"error: {path} @46: batch queue B/0 unit (base 3): batchSize 2 but the record's " \
           f"INNER_NUM is 1" in out
    code, out, _ = run(capsys, "queryCq", "-t", "B", "-q", "0", "-i", "3", "-c", "1", *args)
    assert code == 0
    assert "INVALID: batchSize 2 but the record's INNER_NUM is 1" in out


def test_status_commands_show_a_batch_topic_in_messages(capsys, store_args):
    _config, args = store_args
    code, out, _ = run(capsys, "topicStatus", "-t", "B", *args)
    [row] = out.splitlines()[1:]
    assert code == 0 and row.split()[1:4] == ["0", "0", "16"] and row.endswith(" UTC")
    code, out, _ = run(capsys, "topicList", *args)
    assert out.split() == ["B", "T"]
    code, out, _ = run(capsys, "statsAll", "-t", "B", "--json", *args)
    [value] = json.loads(out)
    assert value["messages"] == 16


def test_batch_queues_says_when_topics_json_does_not_serve_them(capsys, store_args):
    config, args = store_args
    from store import MessageStore
    from store.meta.topic_config import TopicConfig
    with MessageStore.open(config, start_services=False) as store:
        store._parts.topics.put_topic(TopicConfig("B"))      # no queue.type=BatchCQ any more
        store._parts.topics.persist()
    code, out, _ = run(capsys, "batch-queues", *args)
    assert code == 0 and out.splitlines()[1].split()[7] == "False"
    assert "topics.json does not make the topic a batch topic" in out
    code, out, _ = run(capsys, "queryCq", "-t", "B", "-q", "0", "-i", "0", *args)
    assert code == 0 and "max: 0, min: 0" in out and "Batch" not in out    # served as SimpleCQ


def test_dump_batch_consume_queue_reads_the_files(capsys, store_args):
    config, args = store_args
    code, out, _ = run(capsys, "dump", "batch-consume-queue", "--topic", "B", "--queue", "0",
                       "--start", "5", "--json", "--verify", *args)
    value = json.loads(out)
    assert code == 0 and value["kind"] == "batch-consume-queue" and not value["truncated"]
    assert [r["msgBaseOffset"] for r in value["rows"]] == BASES[2:]      # 4..8 holds 5
    assert all(r["valid"] and r["recovered"] and r["compactedOffset"] == -1 for r in value["rows"])
    path = unit_path(config)
    with open(path, "r+b") as handle:
        handle.seek(46 + 36)                         # unit 1: batchSize 2 (its INNER_NUM is 1)
        handle.write((2).to_bytes(2, "big"))
        handle.seek(2 * 46 + 36)                     # unit 2: batchSize 0, recovery stops there
        handle.write((0).to_bytes(2, "big"))
    code, out, _ = run(capsys, "dump", "batch-consume-queue", "--topic", "B", "--queue", "0",
                       "--json", "--verify", *args)
    rows = json.loads(out)["rows"]
    assert code == 1                                            # an invalid unit, like dump --verify
    assert [r["recovered"] for r in rows] == [True, True, False, False, False, False]
    assert rows[1]["problem"] == "batchSize 2 but the record's INNER_NUM is 1"
    assert rows[2]["problem"] == "batchSize 0 but the record's INNER_NUM is 5"
    code, _out, err = run(capsys, "dump", "batch-consume-queue", "--topic", "X", "--queue", "0",
                          *args)
    assert code == 2 and err.strip() == "rmqstore: error: no batch consume queue directory " + \
        os.path.join(config.store_path_root_dir, "batchconsumequeue", "X", "0")
    code, _out, err = run(capsys, "dump", "batch-consume-queue", "--topic", "B", *args)
    assert code == 2 and "needs --topic and --queue" in err


def test_message_commands_find_a_batch_topic_queue(capsys, store_args):
    """Regression: printMsg / print-msg listed queues through the facade's queues() (ordinary consume
    queues only: "topic 'B' has no consume queue"), queryMsgByOffset read an ordinary unit ("no
    unit at queue offset 10"). On a batch queue a message offset reads the record holding it."""
    _config, args = store_args
    code, out, err = run(capsys, "printMsg", "-t", "B", "-d", "false", *args)
    assert (code, err) == (0, "")
    assert out.splitlines()[0].startswith("minOffset=0, maxOffset=16, MessageQueue [topic=B")
    assert [line.split("queueOffset=")[1].split(",")[0] for line in out.splitlines()[1:]] == \
        [str(base) for base in BASES]
    code, out, _ = run(capsys, "print-msg", "B", "--json", *args)
    assert code == 0 and [m["queueOffset"] for m in json.loads(out)["messages"]] == BASES
    code, out, _ = run(capsys, "queryMsgByOffset", "-t", "B", "-i", "0", "-o", "10", "--json", *args)
    value = json.loads(out)
    assert code == 0 and value["queueOffset"] == 9 and value["properties"]["INNER_NUM"] == "2"
    code, _out, err = run(capsys, "queryMsgByOffset", "-t", "B", "-i", "0", "-o", "16", *args)
    assert code == 2 and "no unit at queue offset 16 (min 0, max 16)" in err
