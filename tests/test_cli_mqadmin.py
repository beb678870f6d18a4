"""`rmqstore`'s mqadmin verbs (store/cli/mqadmin*.py) on every fixture, compared with read-dump.json."""

from __future__ import annotations

import json
import os

import pytest

from store.cli import main
from store.cli.common import format_time_ms
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, tree_fingerprint

HOUR_MS = 3_600_000


@pytest.fixture(scope="module", params=fixture_dirs(), ids=fixture_id)
def fx(request, tmp_path_factory):
    """(args naming a copy of the fixture's store, its read-dump.json, the copy's root)."""
    fixture = request.param
    root = copy_store(fixture, str(tmp_path_factory.mktemp("mqadmin")))
    return ["--store", root, "--config", os.path.join(fixture, "store.properties")], \
        load_dump(fixture), root


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _messages(dump):
    return [m for q in dump["queues"] for m in q["messages"]]


def test_topic_list_and_status(capsys, fx):
    store, dump, _root = fx
    topics = {q["topic"] for q in dump["queues"]}
    code, out, _ = run(capsys, "topicList", *store)
    assert code == 0 and topics <= set(out.split())
    listed = {r["topic"]: r for r in run_json(capsys, "topicList", *store)}
    for topic in topics:
        queues = sorted((q for q in dump["queues"] if q["topic"] == topic), key=lambda q: q["queueId"])
        assert listed[topic]["messages"] == sum(q["maxOffset"] - q["minOffset"] for q in queues)
        rows = run_json(capsys, "topicStatus", "-t", topic, *store)
        assert [(r["queue_id"], r["min_offset"], r["max_offset"]) for r in rows] == \
            [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in queues]
        code, out, _ = run(capsys, "topicStatus", "-t", topic, *store)
        lines = out.splitlines()
        assert lines[0].split()[:3] == ["#Broker", "Name", "#QID"] and len(lines) == len(queues) + 1
        last = rows[0]["last_updated_ms"]
        assert last is None or format_time_ms(last) in lines[1]


def test_consumer_progress_matches_the_committed_offsets(capsys, fx):
    store, dump, _root = fx
    rows = run_json(capsys, "consumerProgress", *store)
    maxima = {(q["topic"], q["queueId"]): q["maxOffset"] for q in dump["queues"]}
    for key, offsets in dump["consumerOffsets"].items():
        topic, group = key.split("@", 1)
        mine = {r["queue_id"]: r for r in run_json(capsys, "consumerProgress", "-g", group, *store)
                if r["topic"] == topic}
        for queue_id, offset in offsets.items():
            row = mine[int(queue_id)]
            assert row["consumer_offset"] == offset
            assert row["broker_offset"] == maxima.get((topic, int(queue_id)), 0)
            assert row["lag"] == max(0, row["broker_offset"] - offset) or row["note"]
            assert row["lag"] >= 0
        code, out, _ = run(capsys, "consumerProgress", "-g", group, *store)
        assert code == 0 and out.startswith("#Topic") and "Diff Total: " in out
        total = sum(r["lag"] for r in rows if r["group"] == group)
        assert f"Diff Total: {total}" in out
        if any(r["note"] for r in rows if r["group"] == group):
            assert "Notes:" in out
    assert all(r["lag"] >= 0 for r in rows)
    code, out, _ = run(capsys, "consumerProgress", *store)
    listed = {line.split()[0]: int(line.split()[-1]) for line in out.splitlines()[1:]
              if line.strip() and not line.startswith((" ", "Notes:"))}
    for key in dump["consumerOffsets"]:
        group = key.split("@", 1)[1]
        assert listed[group] == sum(r["lag"] for r in rows if r["group"] == group)
    code, _out, err = run(capsys, "consumerProgress", "-g", "NoSuchGroup", *store)
    assert code == 2 and "NoSuchGroup" in err


def test_broker_status_and_stats_all(capsys, fx):
    store, dump, _root = fx
    status = run_json(capsys, "brokerStatus", *store)
    assert status["runtime"]["commit_log_max_offset"] == dump["commitLog"]["maxPhyOffset"]
    assert status["runtime"]["messages"] == dump["totalMessages"]
    assert status["cleanup"]["file_reserved_time_hours"] == 72
    code, out, _ = run(capsys, "brokerStatus", *store)
    assert code == 0 and "commitLogMaxOffset" in out and "Cleanup:" in out
    assert f": {dump['commitLog']['maxPhyOffset']}\n" in out
    stats = run_json(capsys, "statsAll", *store)
    per_topic = {r["topic"]: r["messages"] for r in stats}
    for topic in {q["topic"] for q in dump["queues"] if not q["topic"].startswith("%")}:
        assert per_topic[topic] == sum(q["maxOffset"] - q["minOffset"] for q in dump["queues"]
                                       if q["topic"] == topic)
    code, out, _ = run(capsys, "statsAll", *store)
    assert out.startswith("#Topic") and "#Accumulation" in out


def test_query_cq_and_message_lookups(capsys, fx):
    store, dump, _root = fx
    queue = max(dump["queues"], key=lambda q: q["maxOffset"])
    start = queue["minOffset"]
    got = run_json(capsys, "queryCq", "-t", queue["topic"], "-q", str(queue["queueId"]),
                   "-i", str(start), "-c", "5", *store)
    assert (got["min"], got["max"]) == (queue["minOffset"], queue["maxOffset"])
    want = [u for u in queue["cq"] if start <= u["queueOffset"] < start + 5]
    assert [(u["queueOffset"], u["physicOffset"], u["physicSize"], u["tagsCode"]) for u in got["units"]] \
        == [(u["queueOffset"], u["commitLogOffset"], u["size"], u["tagsCode"]) for u in want]
    message = [m for m in queue["messages"] if m["queueOffset"] >= queue["minOffset"]][-1]
    by_offset = run_json(capsys, "queryMsgByOffset", "-t", queue["topic"], "-i",
                         str(queue["queueId"]), "-o", str(message["queueOffset"]), *store)
    assert by_offset["msgId"] == message["msgId"]
    by_id = run_json(capsys, "queryMsgById", "-i", message["msgId"], *store)
    assert by_id["commitLogOffset"] == message["commitLogOffset"]
    decoded = run_json(capsys, "decodeMessageId", "-i", message["msgId"])
    assert decoded["commitLogOffset"] == message["commitLogOffset"]
    assert f"{decoded['host']}:{decoded['port']}" == message["storeHost"].strip("/")
    if message.get("uniqKey"):
        by_uniq = run_json(capsys, "queryMsgByUniqueKey", "-t", queue["topic"],
                           "-i", message["uniqKey"], *store)
        assert [m["msgId"] for m in by_uniq] == [message["msgId"]]
        for track in by_uniq[0]["tracks"]:
            committed = dump["consumerOffsets"].get(f"{queue['topic']}@{track['consumerGroup']}", {})
            offset = committed.get(str(queue["queueId"]), -1)
            assert track["trackType"] == ("CONSUMED" if offset > message["queueOffset"]
                                          else "NOT_CONSUME_YET")
        code, out, _ = run(capsys, "queryMsgByUniqueKey", "-t", queue["topic"], "-i",
                           message["uniqKey"], *store)
        assert code == 0 and f"{'CommitLog Offset:':<20} {message['commitLogOffset']}" in out


def test_query_by_key_matches_the_real_index_and_the_kebab_verb(capsys, fx):
    store, dump, _root = fx
    query = next((q for q in dump["queries"] if q["hits"]), None)
    if query is None:
        pytest.skip("the fixture recorded no key query with hits")
    got = run_json(capsys, "queryMsgByKey", "-t", query["topic"], "-k", query["key"], "-c", "64", *store)
    real = {m["msgId"] for m in _messages(dump)
            if m["topic"] == query["topic"] and (query["key"] in (m.get("keys") or "").split(" ")
                                                 or m.get("uniqKey") == query["key"])}
    assert {m["msgId"] for m in got["messages"]} == real
    assert run_json(capsys, "query-msg-by-key", query["topic"], query["key"], "--max", "64", *store) \
        == got


def test_print_msg_by_queue_and_print_msg(capsys, fx):
    store, dump, _root = fx
    queue = max(dump["queues"], key=lambda q: q["maxOffset"] - q["minOffset"])
    stored = [m for m in queue["messages"] if m["queueOffset"] >= queue["minOffset"]]
    got = run_json(capsys, "printMsgByQueue", "-t", queue["topic"], "-i", str(queue["queueId"]), *store)
    assert [m["msgId"] for m in got["messages"]] == [m["msgId"] for m in stored]
    tags: dict[str, int] = {}
    for m in got["messages"]:
        if m["tags"]:
            tags[m["tags"]] = tags.get(m["tags"], 0) + 1
    assert got["tagCounts"] == {t: tags[t] for t in got["tagCounts"]} and set(got["tagCounts"]) == set(tags)
    code, out, _ = run(capsys, "printMsgByQueue", "-t", queue["topic"], "-i", str(queue["queueId"]),
                       "-p", "true", "-m", "3", *store)
    lines = [line for line in out.splitlines() if line.startswith("MSGID: ")]
    assert code == 0 and len(lines) == min(3, len(stored))
    if stored:
        assert lines[0].startswith(f"MSGID: {stored[0]['msgId']} MessageExt [")
        assert lines[0].endswith("BODY: NOT PRINT BODY")
    whole = run_json(capsys, "printMsg", "-t", queue["topic"], *store)
    assert len(whole["messages"]) == sum(q["maxOffset"] - q["minOffset"] for q in dump["queues"]
                                         if q["topic"] == queue["topic"]) and not whole["truncated"]


def test_clean_explain_changes_nothing_and_names_the_reasons(capsys, fx, monkeypatch):
    import store.services.cleanup as cleanup
    monkeypatch.setattr(cleanup, "disk_usage_ratio", lambda _path: 0.5)
    store, _dump, root = fx
    before = tree_fingerprint(root)
    explain = run_json(capsys, "clean", "--explain", *store)
    code, out, _ = run(capsys, "clean", "--explain", *store)
    assert tree_fingerprint(root) == before
    assert code == 0 and "fileReservedTime is 72 h" in out and "deleteWhen is '04'" in out
    assert explain["disk_space_warning_level_ratio"] == 0.90
    assert explain["disk_space_clean_forcibly_ratio"] == 0.85
    assert explain["disk_max_used_space_ratio"] == 0.75
    assert not explain["oldest_file_expired"] and "not expired yet" in out    # a fresh copy
    assert explain["would_delete_files"] == explain["manual_would_delete_files"] == []
    assert "below diskMaxUsedSpaceRatio" in out


@pytest.mark.parametrize("ratio, words", [(0.80, "above diskMaxUsedSpaceRatio"),
                                          (0.87, "above diskSpaceCleanForciblyRatio"),
                                          (0.93, "the store refuses puts")])
def test_clean_explain_at_each_watermark_with_expired_files(capsys, tmp_path, monkeypatch, ratio, words):
    fixture = next(f for f in fixture_dirs()
                   if len(os.listdir(os.path.join(f, "store", "commitlog"))) >= 3)
    root = copy_store(fixture, str(tmp_path))
    log_dir = os.path.join(root, "commitlog")
    old_s = (os.path.getmtime(log_dir) * 1000 - 100 * HOUR_MS) / 1000
    for name in os.listdir(log_dir):
        os.utime(os.path.join(log_dir, name), (old_s, old_s))
    import store.services.cleanup as cleanup
    monkeypatch.setattr(cleanup, "disk_usage_ratio", lambda _path: ratio)
    args = ["--store", root, "--config", os.path.join(fixture, "store.properties")]
    before = tree_fingerprint(root)
    explain = run_json(capsys, "clean", "--explain", *args)
    _code, out, _ = run(capsys, "clean", "--explain", *args)
    assert tree_fingerprint(root) == before and words in out
    files = sorted(os.listdir(log_dir))
    end = load_dump(fixture)["commitLog"]["maxPhyOffset"]      # files the log's data ends beyond stay
    want = [f for f in files[:-1] if int(f) + os.path.getsize(os.path.join(log_dir, f)) <= end]
    assert want and explain["oldest_file_expired"] and explain["would_delete_files"] == want
    assert explain["writes_refused"] is (ratio > 0.90)


def test_docs_list_every_verb_with_an_example():
    """docs/cli.md has an example line `rmqstore VERB` for every subcommand of the parser."""
    from store.cli import build_parser
    parser = build_parser([])
    verbs = set()
    for action in parser._subparsers._group_actions:
        verbs |= set(action.choices)
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "cli.md"), encoding="utf-8") as f:
        examples = {line.split()[1] for line in f if line.startswith("rmqstore ")}
    assert verbs - examples == set()


def test_kebab_names_are_aliases_taking_positionals_or_flags(capsys, tmp_path):
    """`query-msg-by-key TOPIC KEY` (the old form), `queryMsgByKey -t TOPIC -k KEY` and any mix give
    one answer; the same argument given twice, differently, is refused."""
    from store.cli import main
    fixture = fixture_dirs()[0]
    dump = load_dump(fixture)
    query = dump["queries"][0]
    queue = next(q for q in dump["queues"] if q["cq"])
    store = os.path.join(fixture, "store")
    runs = {
        "kebab": ["query-msg-by-key", query["topic"], query["key"]],
        "camel": ["queryMsgByKey", "-t", query["topic"], "-k", query["key"]],
        "mixed": ["query-msg-by-key", query["topic"], "-k", query["key"]],
    }
    answers = {}
    for name, argv in runs.items():
        assert main([*argv, "--store", store, "--json"]) == 0, name
        answers[name] = json.loads(capsys.readouterr().out)
    assert answers["kebab"] == answers["camel"] == answers["mixed"]
    assert main(["queryMsgByKey", query["topic"], "-t", "Other", "-k", "x", "--store", store]) == 2
    assert "given twice" in capsys.readouterr().err
    unit = queue["cq"][0]
    for argv in (["query-msg-by-offset", queue["topic"], str(queue["queueId"]), str(unit["queueOffset"])],
                 ["queryMsgByOffset", "-t", queue["topic"], "-i", str(queue["queueId"]),
                  "-o", str(unit["queueOffset"])],
                 ["query-msg-by-offset", "--phy-offset", str(unit["commitLogOffset"])]):
        assert main([*argv, "--store", store, "--json"]) == 0, argv
        assert str(unit["commitLogOffset"]) in capsys.readouterr().out


def test_clean_explain_runs_read_only(capsys, tmp_path):
    from store.cli import main
    fixture = fixture_dirs()[0]
    root = copy_store(fixture, str(tmp_path))
    before = tree_fingerprint(root)
    assert main(["clean", "--explain", "--read-only", "--store", root,
                 "--config", os.path.join(fixture, "store.properties")]) == 0
    assert "fileReservedTime" in capsys.readouterr().out
    assert tree_fingerprint(root) == before
