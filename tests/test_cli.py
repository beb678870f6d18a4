"""`rmqstore`: in-process main([...]) on tmp stores and fixture copies, plus a few subprocess runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from store.cli import main
from tests.fixtures_util import (REPO_ROOT, copy_store, dump_message_body, fixture_dirs,
                                 fixture_id, load_dump, tree_fingerprint)

FIXTURES = fixture_dirs()
SMALL_PROPERTIES = ("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\n"
                    "maxHashSlotNum=64\nmaxIndexNum=256\n")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def small_store(tmp_path):
    """An empty store dir whose ../store.properties has tiny segments (picked up without --config)."""
    (tmp_path / "store.properties").write_text(SMALL_PROPERTIES)
    return str(tmp_path / "store")


def test_produce_pull_query_roundtrip(capsys, small_store):
    put = run_json(capsys, "produce", "TopicX", "--store", small_store, "--queue", "1",
                   "--tags", "TagA", "--keys", "order-1 order-2", "--property", "a=b",
                   "--body", "hi {i}", "--count", "5", "--batch", "2")
    assert [p["status"] for p in put] == ["PUT_OK"] * 5
    assert [p["queueOffset"] for p in put] == [0, 1, 2, 3, 4]
    assert all(len(p["uniqKey"]) in (32, 56) for p in put)
    assert len({p["uniqKey"] for p in put}) == 5

    pulled = run_json(capsys, "pull", "G", "TopicX", "1", "--store", small_store, "--commit")
    assert pulled["status"] == "FOUND" and pulled["found"] == 5 and pulled["committed"]
    assert [m["body"] for m in pulled["messages"]] == [f"hi {i}" for i in range(5)]
    assert pulled["messages"][0]["properties"]["a"] == "b"
    again = run_json(capsys, "pull", "G", "TopicX", "1", "--store", small_store)
    assert again["requestOffset"] == 5 and again["status"] == "OFFSET_OVERFLOW_ONE"

    by_key = run_json(capsys, "query-msg-by-key", "TopicX", "order-2", "--store", small_store)
    assert len(by_key["messages"]) == 5
    by_uniq = run_json(capsys, "query-msg-by-key", "TopicX", put[3]["uniqKey"], "--store",
                       small_store)
    assert [m["body"] for m in by_uniq["messages"]] == ["hi 3"]
    by_id = run_json(capsys, "query-msg-by-id", put[2]["msgId"], "--store", small_store)
    assert by_id["body"] == "hi 2" and by_id["uniqKey"] == put[2]["uniqKey"]
    by_offset = run_json(capsys, "query-msg-by-offset", "TopicX", "1", "4", "--store", small_store)
    assert by_offset["body"] == "hi 4"
    by_phy = run_json(capsys, "query-msg-by-offset", "--phy-offset", str(by_id["commitLogOffset"]),
                      "--store", small_store)
    assert by_phy["msgId"] == put[2]["msgId"]
    printed = run_json(capsys, "print-msg", "TopicX", "--store", small_store, "--max", "3")
    assert len(printed["messages"]) == 3 and printed["truncated"]
    code, out, _ = run(capsys, "check", "--store", small_store)
    assert code == 0 and "0 errors" in out


def test_produce_sizes_and_body_file(capsys, small_store, tmp_path):
    body = tmp_path / "body.bin"
    body.write_bytes(b"\x00\xff" * 10)
    put = run_json(capsys, "produce", "T", "--store", small_store, "--body-file", str(body))
    put += run_json(capsys, "produce", "T", "--store", small_store, "--size", "3000", "--count", "2")
    got = run_json(capsys, "pull", "G", "T", "0", "--store", small_store)
    assert [m["bodySize"] for m in got["messages"]] == [20, 3000, 3000]
    assert "bodyBase64" in got["messages"][0]


READ_COMMANDS = [
    ("check",),
    ("dump", "records", "--limit", "5", "--verify"),
    ("dump", "consume-queue", "--topic", "{topic}", "--queue", "{queue}", "--start", "{first}",
     "--limit", "5", "--verify"),
    ("dump", "index", "--limit", "5", "--verify"),
    ("pull", "G", "{topic}", "{queue}", "--offset", "{first}", "--max", "4"),
    ("query-msg-by-key", "{key_topic}", "{key}"),
    ("query-msg-by-offset", "{topic}", "{queue}", "{first}"),
    ("print-msg", "{topic}", "--max", "5"),
    ("recover", "--read-only"),
]
MESSAGE_FIELDS = ("msgId", "topic", "queueId", "queueOffset", "commitLogOffset", "storeSize",
                  "bodyCRC", "sysFlag", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost",
                  "reconsumeTimes", "tags", "keys", "uniqKey", "properties")


def _same_message(ours: dict, real: dict) -> None:
    for field in MESSAGE_FIELDS:
        if field in real:
            assert ours[field] == real[field], (field, ours[field], real[field])
    assert dump_message_body(ours) == dump_message_body(real), real["msgId"]


def _fixture_answers(fixture):
    """The names the commands take and the real store's answers, from read-dump.json."""
    dump = load_dump(fixture)
    # The first user topic (not rmq_sys_*/SCHEDULE_TOPIC_*): TopicA, or TimerA in timer fixtures.
    queue = next(q for q in dump["queues"] if q["messages"]
                 and not q["topic"].startswith(("rmq_sys_", "SCHEDULE_TOPIC")))
    by_offset = {m["commitLogOffset"]: m for q in dump["queues"] for m in q["messages"]}
    query = next(q for q in dump["queries"]
                 if any(q["key"] in (by_offset.get(h["commitLogOffset"], {}).get("keys") or "")
                        .split(" ") for h in q["hits"]))
    names = {"topic": queue["topic"], "queue": str(queue["queueId"]),
             "first": str(queue["messages"][0]["queueOffset"]), "key_topic": query["topic"],
             "key": query["key"]}
    return dump, queue, by_offset, query, names


def _compare_with_dump(command, out, dump, queue, by_offset, query):
    """The --json answer of one read command against the real store's (real values)."""
    name = command[0] if command[0] != "dump" else f"dump {command[1]}"
    if name == "check":
        assert out["counts"]["error"] == 0 and out["counts"]["warning"] == 0, out["findings"]
    elif name == "dump records":
        records = [r for r in out["rows"] if r["kind"] == "RECORD"]
        assert records and out["truncated"] and all(r["valid"] for r in records)
        last = out["rows"][-1]["phyOffset"]
        assert [r["phyOffset"] for r in records if r["phyOffset"] in by_offset] == \
            sorted(o for o in by_offset if o <= last)
        for row in records:
            real = by_offset.get(row["phyOffset"])
            if real is not None:
                assert (row["topic"], row["queueId"], row["queueOffset"], row["size"]) == \
                    (real["topic"], real["queueId"], real["queueOffset"], real["storeSize"])
    elif name == "dump consume-queue":
        want = [(u["queueOffset"], u["commitLogOffset"], u["size"], u["tagsCode"])
                for u in queue["cq"][:5]]
        assert [(r["queueOffset"], r["phyOffset"], r["size"], r["tagsCode"])
                for r in out["rows"]] == want
        assert all(r["valid"] for r in out["rows"]) and out["truncated"] == (len(queue["cq"]) > 5)
    elif name == "dump index":
        assert out["rows"] and all(r["valid"] for r in out["rows"]), out["rows"]
        assert all(r["phyOffset"] in by_offset or r["phyOffset"] < dump["commitLog"]["maxPhyOffset"]
                   for r in out["rows"])
    elif name == "pull":
        assert (out["minOffset"], out["maxOffset"]) == (queue["minOffset"], queue["maxOffset"])
        assert out["found"] == len(out["messages"]) == min(4, len(queue["messages"]))
        for ours, real in zip(out["messages"], queue["messages"]):
            _same_message(ours, real)
    elif name == "query-msg-by-key":
        true_hits = sorted(h["commitLogOffset"] for h in query["hits"]
                           if query["key"] in (by_offset.get(h["commitLogOffset"], {}).get("keys")
                                               or "").split(" "))
        assert sorted(m["commitLogOffset"] for m in out["messages"]) == true_hits
        assert out["indexLastUpdateTimestamp"] == query["indexLastUpdateTimestamp"]
        for ours in out["messages"]:
            _same_message(ours, by_offset[ours["commitLogOffset"]])
    elif name == "query-msg-by-offset":
        _same_message(out, queue["messages"][0])
    elif name == "print-msg":
        total = sum(len(q["messages"]) for q in dump["queues"] if q["topic"] == queue["topic"])
        assert len(out["messages"]) == min(5, total) and out["truncated"] == (total > 5)
        for ours in out["messages"]:
            _same_message(ours, by_offset[ours["commitLogOffset"]])
    elif name == "recover":
        assert out["pointers"]["max_phy_offset"] == dump["commitLog"]["maxPhyOffset"]
        assert out["pointers"]["min_phy_offset"] == dump["commitLog"]["minPhyOffset"]
    else:
        raise AssertionError(f"no comparison for {command}")


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_read_commands_on_every_fixture(capsys, fixture, tmp_path):
    root = copy_store(fixture, tmp_path)
    config = os.path.join(fixture, "store.properties")
    dump, queue, by_offset, query, names = _fixture_answers(fixture)
    before = tree_fingerprint(root)
    for template in READ_COMMANDS:
        command = [part.format(**names) for part in template]
        code, out, err = run(capsys, *command, "--store", root, "--config", config)
        assert code == 0, (command, err)
        assert out and not err, command
        code, out, err = run(capsys, *command, "--store", root, "--config", config, "--json")
        assert code == 0, (command, err)
        _compare_with_dump(command, json.loads(out), dump, queue, by_offset, query)
    first = queue["messages"][0]
    by_id = run_json(capsys, "query-msg-by-id", first["msgId"], "--store", root, "--config", config)
    _same_message(by_id, first)
    uniq_key = first.get("uniqKey") or first["properties"].get("UNIQ_KEY")
    if uniq_key:                                     # mqadmin queryMsgById takes it too
        by_uniq = run_json(capsys, "query-msg-by-id", uniq_key, "--store", root, "--config",
                           config)
        _same_message(by_uniq, first)
    assert tree_fingerprint(root) == before


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_write_commands_on_every_fixture(capsys, fixture, tmp_path):
    root = copy_store(fixture, tmp_path)
    config = os.path.join(fixture, "store.properties")
    report = run_json(capsys, "recover", "--store", root, "--config", config)
    assert report["recovery"]["mode"] in ("normal", "abnormal")
    assert not os.path.exists(os.path.join(root, "abort"))
    cleaned = run_json(capsys, "clean", "--store", root, "--config", config)
    assert cleaned["commit_log_files_deleted"] == 0        # fresh copies are not expired
    put = run_json(capsys, "produce", "TopicA", "--store", root, "--config", config)
    assert put[0]["status"] == "PUT_OK"
    code, out, err = run(capsys, "check", "--store", root, "--config", config)
    assert code == 0, out


def test_rebuild_index_from_scratch(capsys, tmp_path):
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    config = os.path.join(fixture, "store.properties")
    before = run_json(capsys, "query-msg-by-key", "TopicA", "k0", "--store", root, "--config", config)
    import shutil
    shutil.rmtree(os.path.join(root, "index"))
    out = run_json(capsys, "recover", "--rebuild-index", "--store", root, "--config", config)
    assert out["rebuildIndex"]["records"] == 720 and out["rebuildIndex"]["indexFiles"] >= 6
    after = run_json(capsys, "query-msg-by-key", "TopicA", "k0", "--store", root, "--config", config)
    assert [m["msgId"] for m in after["messages"]] == [m["msgId"] for m in before["messages"]]
    code, text, _ = run(capsys, "check", "--store", root, "--config", config)
    assert code == 0, text


def test_check_exits_1_on_errors(capsys, tmp_path):
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    with open(os.path.join(root, "commitlog", "00000000000000000000"), "r+b") as handle:
        handle.seek(11)
        handle.write(b"\x55")
    code, out, _ = run(capsys, "check", "--store", root, "--config",
                       os.path.join(fixture, "store.properties"))
    assert code == 1 and "BODYCRC" in out


BAD_INPUTS = [
    (("check", "--store", "{missing}"), "does not exist"),
    (("check", "--store", "{root}", "--config", "{missing}"), "config file"),
    (("produce", "bad/topic", "--store", "{root}"), "topic"),
    (("produce", "T", "--store", "{root}", "--property", "novalue"), "name=value"),
    (("produce", "T", "--store", "{root}", "--body-file", "{missing}"), "does not exist"),
    (("produce", "T", "--store", "{root}", "--read-only"), "read-only"),
    (("query-msg-by-id", "XYZ", "--store", "{root}"), "msgId"),
    (("query-msg-by-offset", "--store", "{root}"), "--phy-offset"),
    (("query-msg-by-key", "TopicA", "k", "--store", "{root}", "--begin", "yesterday"), "time"),
    (("recover", "--store", "{root}", "--config", "{bad_config}"), "maxHashSlotNum"),
    (("dump", "consume-queue", "--store", "{root}"), "--topic"),
    (("check", "--store", "{file}"), "not a directory"),
    (("pull", "G", "TopicA", "0", "--store", "{root}", "--max", "0"), "--max"),
]


@pytest.mark.parametrize("argv, expected", BAD_INPUTS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_bad_input_exits_2_and_changes_nothing(capsys, tmp_path, argv, expected):
    fixture = next(f for f in FIXTURES if f.endswith("crash-64k"))   # abort file: any write shows
    root = copy_store(fixture, tmp_path)
    (tmp_path / "bad.properties").write_text("maxHashSlotNum=lots\n")
    (tmp_path / "afile").write_text("x")
    names = {"missing": str(tmp_path / "nope"), "root": root, "file": str(tmp_path / "afile"),
             "bad_config": str(tmp_path / "bad.properties")}
    (tmp_path / "store.properties").write_text(
        open(os.path.join(fixture, "store.properties")).read())
    before = tree_fingerprint(root)
    code, out, err = run(capsys, *(a.format(**names) for a in argv))
    assert code == 2
    assert err.count("\n") <= 2 and "Traceback" not in err
    assert expected.lower() in err.lower()
    assert tree_fingerprint(root) == before


def _subprocess(*argv):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "store.cli", *argv], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=120)


def test_subprocess_check_and_error():
    fixture = FIXTURES[0]
    done = _subprocess("check", "--store", os.path.join(fixture, "store"), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["counts"]["error"] == 0
    failed = _subprocess("pull", "G", "T", "0", "--store", "/definitely/not/here")
    assert failed.returncode == 2 and failed.stderr.startswith("rmqstore: error:")
    assert "Traceback" not in failed.stderr


def test_subprocess_help_and_spark_placeholder():
    done = _subprocess("--help")
    assert done.returncode == 0 and "query-msg-by-key" in done.stdout and "spark" in done.stdout
    spark = _subprocess("spark", "anything")
    assert spark.returncode in (0, 2)
