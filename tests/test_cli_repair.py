"""`rmqstore check` -> `recover` -> `check`: damaged copies of every fixture are repaired to 0 errors,
every finding says what RocketMQ does on restart and which command repairs it, and no message the
damage left whole is lost (compared with the real store's answers in read-dump.json)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from store import MessageStore
from store.cli import main
from store.cli.common import print_table
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump, store_config

FIXTURES = fixture_dirs()


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_json(capsys, root, config):
    code, out, err = run(capsys, "check", "--store", root, "--config", config, "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def served_messages(fixture, root) -> dict:
    """(topic, queue) -> [(queueOffset, commitLogOffset, msgId)] the store serves, read-only."""
    served = {}
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        for queue in load_dump(fixture)["queues"]:
            key = (queue["topic"], queue["queueId"])
            offset, rows = store.get_min_offset_in_queue(*key), []
            for _ in range(10_000):
                result = store.get_message("repair-test", *key, offset, 32)
                if not result.messages:
                    break
                rows += [(m.queue_offset, m.commit_log_offset, m.msg_id) for m in result.messages]
                offset = result.next_begin_offset
            served[key] = rows
    return served


def expected_messages(fixture, kept=lambda message: True) -> dict:
    return {(q["topic"], q["queueId"]): [(m["queueOffset"], m["commitLogOffset"], m["msgId"])
                                         for m in q["messages"] if kept(m)]
            for q in load_dump(fixture)["queues"]}


def _first_queue_dir(root, fixture):
    for queue in load_dump(fixture)["queues"]:
        path = os.path.join(root, "consumequeue", queue["topic"], str(queue["queueId"]))
        if len(queue["cq"]) >= 2 and os.path.isdir(path):
            return path, queue
    pytest.skip("no file consume queue with two units")


def flip_cq_byte(root, fixture):
    """Bit 0 of unit 1's phy offset: the unit points one byte into its record."""
    path, queue = _first_queue_dir(root, fixture)
    first = sorted(os.listdir(path))[0]
    unit = queue["cq"][1]["queueOffset"] - int(first) // 20
    with open(os.path.join(path, first), "r+b") as handle:
        handle.seek(unit * 20 + 7)
        byte = handle.read(1)[0]
        handle.seek(unit * 20 + 7)
        handle.write(bytes([byte ^ 1]))
    return None


def delete_index(root, fixture):
    shutil.rmtree(os.path.join(root, "index"))
    return None


def delete_queue_dir(root, fixture):
    path, _queue = _first_queue_dir(root, fixture)
    shutil.rmtree(path)
    return None


def truncate_segment(root, fixture):
    """The first segment loses its last 100 bytes; returns (where its data now ends, where the
    next segment starts)."""
    directory = os.path.join(root, "commitlog")
    first = sorted(n for n in os.listdir(directory) if n.isdigit())[0]
    path = os.path.join(directory, first)
    size = os.path.getsize(path)
    os.truncate(path, size - 100)
    return int(first) + size - 100, int(first) + size


DAMAGES = {"flipped-cq-byte": flip_cq_byte, "deleted-index": delete_index,
           "deleted-queue-dir": delete_queue_dir, "truncated-segment": truncate_segment}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_check_recover_check_round_trip(capsys, tmp_path, fixture, damage):
    root = copy_store(fixture, tmp_path)
    if not os.path.isdir(os.path.join(root, "commitlog")) and damage == "truncated-segment":
        pytest.skip("not applicable: a DLedger store has no commitlog/ segment to cut (DLedger's own "
                    "torn-entry recovery is tested in test_dledger.py)")
    config = os.path.join(fixture, "store.properties")
    cut_at = DAMAGES[damage](root, fixture)

    code, before = check_json(capsys, root, config)
    # A queue missing after a crash is a warning (recovery re-dispatches); anything else an error.
    serious = [f for f in before["findings"] if f["severity"] in ("error", "warning")]
    assert serious and (code == 1 or os.path.exists(os.path.join(root, "abort"))), before
    for finding in before["findings"]:
        assert set(finding) >= {"severity", "component", "path", "position", "message",
                                "on_restart", "repair"}
    for finding in serious:
        assert finding["path"] and finding["on_restart"], finding
        assert finding["repair"].startswith("rmqstore recover "), finding
        assert f"--store {root}" in finding["repair"] and f"--config {config}" in finding["repair"]

    # The commands the findings name, as one run with every flag they ask for.
    flags = sorted({word for f in serious for word in f["repair"].split()
                    if word in ("--pad-truncated", "--rebuild-index")})
    command = ["recover", *flags, "--store", root, "--config", config]
    code, out, err = run(capsys, *command)
    assert code == 0, (command, err)
    assert "repairs:" in out and "none needed" not in out, out
    assert not os.path.exists(os.path.join(root, "abort")), "recover left the crash's abort file"

    code, after = check_json(capsys, root, config)
    assert after["counts"]["error"] == 0 and code == 0, after["findings"]
    assert not [f for f in after["findings"] if f["severity"] == "warning"
                and f["component"] in ("consumequeue", "index")], after["findings"]

    # Nothing the damage left whole is lost: every queue serves what the real store served.
    kept = (lambda m: True) if cut_at is None else \
        (lambda m: m["commitLogOffset"] + m["storeSize"] <= cut_at[0] or
         m["commitLogOffset"] >= cut_at[1])
    expected = expected_messages(fixture, kept)
    served = served_messages(fixture, root)
    for key, rows in expected.items():
        assert [r for r in served[key] if r in rows] == rows, key

    if damage == "deleted-index":
        dump = load_dump(fixture)
        query = next(q for q in dump["queries"] if q["hits"])
        code, out, err = run(capsys, "query-msg-by-key", query["topic"], query["key"], "--store",
                             root, "--config", config, "--json")
        assert code == 0 and json.loads(out)["messages"] and not err


def test_recover_on_a_clean_store_changes_nothing(capsys, tmp_path):
    from tests.fixtures_util import tree_fingerprint
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    config = os.path.join(fixture, "store.properties")
    code, out, _ = run(capsys, "recover", "--store", root, "--config", config)
    assert code == 0 and "none needed" in out
    before = {p: v[0] for p, v in tree_fingerprint(root).items() if "lock" not in p}
    code, out, _ = run(capsys, "recover", "--store", root, "--config", config, "--json")
    report = json.loads(out)
    assert report["repairs"] == [] and report["backupDir"] is None
    assert report["recovery"]["consume_queues_truncated"] is False        # item 14
    after = {p: v[0] for p, v in tree_fingerprint(root).items() if "lock" not in p}
    changed = sorted(p for p in before if after.get(p) != before[p])
    assert set(changed) <= {"checkpoint"}, changed


def test_truncated_segment_refusal_names_the_way_forward(capsys, tmp_path):
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    truncate_segment(root, fixture)
    config = os.path.join(fixture, "store.properties")
    for argv in (("recover",), ("pull", "G", "TopicA", "0"), ("check", "--writable")):
        code, _out, err = run(capsys, *argv, "--store", root, "--config", config)
        assert code == 2 and "--pad-truncated" in err and "00000000000000000000" in err, argv
    code, out, _ = run(capsys, "check", "--store", root, "--config", config)
    assert code == 1 and "--pad-truncated" in out


def test_wrong_segment_size_config_is_not_called_truncation(capsys, tmp_path):
    """Without its store.properties the 64 KiB segments are all 'short' of 1 GiB: that is the
    wrong config, and padding them would ruin the store."""
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    for argv in (("recover", "--pad-truncated"), ("pull", "G", "TopicA", "0")):
        code, _out, err = run(capsys, *argv, "--store", root)
        assert code == 2 and "--config" in err and "mappedFileSizeCommitLog=65536" in err, argv
    assert all(os.path.getsize(os.path.join(root, "commitlog", n)) == 65536
               for n in os.listdir(os.path.join(root, "commitlog")))
    code, out, _ = run(capsys, "check", "--store", root, "--json")
    assert "--pad-truncated" not in out


def test_bad_unit_errors_point_at_the_file_and_the_repair(capsys, tmp_path):
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    flip_cq_byte(root, fixture)
    config = os.path.join(fixture, "store.properties")
    code, _out, err = run(capsys, "query-msg-by-offset", "TopicA", "0", "1", "--store", root,
                          "--config", config)
    assert code == 2
    assert "consumequeue/TopicA/0/00000000000000000000" in err and "byte 20" in err
    assert "rmqstore recover" in err
    code, out, _ = run(capsys, "pull", "G", "TopicA", "0", "--store", root, "--config", config)
    assert code == 0 and "rmqstore recover" in out


def test_table_never_cuts_and_fits_the_width(capsys):
    path = "/very/long/" + "directory/" * 12 + "00000000000000000000"
    message = "unit 7 points at 1339, which is not the start of a record " * 3
    rows = [{"severity": "error", "path": path, "position": 20, "message": message}]
    print_table(rows, ("severity", "path", "position", "message"), wrap=("message",), width=400)
    out = capsys.readouterr().out
    assert path in out and " ".join(message.split()) in " ".join(out.split())
    assert max(len(line) for line in out.splitlines()) <= 400
    print_table(rows, ("severity", "path", "position", "message"), wrap=("message",), width=80)
    out = capsys.readouterr().out
    assert path in out and "..." not in out
    assert " ".join(message.split()) in " ".join(out.split())
    short = [{"a": "x", "message": message}]
    print_table(short, ("a", "message"), wrap=("message",), width=60)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 60
    assert " ".join(message.split()) in " ".join(out.split())


def test_columns_env_sets_the_width(capsys, monkeypatch, tmp_path):
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    flip_cq_byte(root, fixture)
    for columns in ("100", "250"):
        monkeypatch.setenv("COLUMNS", columns)
        code, out, _ = run(capsys, "check", "--store", root, "--config",
                           os.path.join(fixture, "store.properties"))
        assert code == 1
        path = os.path.join(root, "consumequeue", "TopicA", "0", "00000000000000000000")
        assert path in out and "..." not in out
        # Only a line holding an unbreakable word (a path) may be wider than the terminal.
        long_lines = [line for line in out.splitlines()
                      if len(line) > int(columns)
                      and not any(len(w) > 30 and "/" in w for w in line.split())]
        assert long_lines == [], long_lines


def test_records_the_cut_destroyed_leave_holes_not_renumbered_queues(capsys, tmp_path):
    """1000 bytes off a full middle segment take whole records: their units stay (pulls skip
    them), every other message keeps its queue offset, and check names exactly those units."""
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)
    config = os.path.join(fixture, "store.properties")
    segment = os.path.join(root, "commitlog", "00000000000000000000")
    os.truncate(segment, 65536 - 1000)
    code, out, err = run(capsys, "recover", "--pad-truncated", "--store", root, "--config", config)
    assert code == 0, err
    assert "keeps its units" in out and "records from byte" in out
    lost = {(m["topic"], m["queueId"], m["queueOffset"])
            for q in load_dump(fixture)["queues"] for m in q["messages"]
            if m["commitLogOffset"] + m["storeSize"] > 65536 - 1000
            and m["commitLogOffset"] < 65536}
    assert lost
    served = served_messages(fixture, root)
    for key, rows in expected_messages(fixture).items():
        assert served[key] == [r for r in rows if (*key, r[0]) not in lost], key
    code, after = check_json(capsys, root, config)
    assert code == 0 and [f for f in after["findings"] if f["severity"] == "error"] == []
    named = {f["message"].split(" (phy")[0] for f in after["findings"]
             if f["severity"] == "warning" and "the message is lost" in f["message"]}
    assert named == {f"{t}/{q} unit {o}" for t, q, o in lost}
    assert all(f["repair"] is None for f in after["findings"] if "the message is lost" in f["message"])
    # A second recover must not "repair" the holes by rebuilding (that renumbered the queue).
    code, out, err = run(capsys, "recover", "--store", root, "--config", config)
    assert code == 0, err
    assert "none needed" in out
    assert served_messages(fixture, root) == served


def test_pull_on_unreadable_data_names_the_queue_file_and_repair(capsys, tmp_path, monkeypatch):
    """A decoder error without a file (`corrupt data in byte 4: ...`) gets the queue, the CQ file
    and the repair command added."""
    from store.errors import CorruptDataError
    from store.message_store import MessageStore as Store
    fixture = next(f for f in FIXTURES if f.endswith("rolled-64k"))
    root = copy_store(fixture, tmp_path)

    def broken(*_args, **_kwargs):
        raise CorruptDataError(None, 4, "magic 0xa320a726 where a message record should start")
    monkeypatch.setattr(Store, "get_message", broken)
    code, _out, err = run(capsys, "pull", "G", "TopicA", "0", "--offset", "3", "--store", root,
                          "--config", os.path.join(fixture, "store.properties"))
    assert code == 2 and "magic 0xa320a726" in err
    assert "consumequeue/TopicA/0/00000000000000000000" in err and "byte 60" in err
    assert "rmqstore recover" in err and err.count("\n") == 1


def test_recover_delivers_no_due_delayed_message(capsys, tmp_path, monkeypatch):
    """`recover` repairs; it does not act as a running broker: no delivery service starts, and a due
    delay-level message stays in SCHEDULE_TOPIC_XXXX (a broker would deliver it once started; the
    operator did not ask for that)."""
    import time as _time
    from store.services.schedule import ScheduleMessageService
    from store.services.timer import TimerService

    def refuse(self):
        raise AssertionError(f"recover started {type(self).__name__}")
    from store import Message
    from tests.engine_util import small_config
    root = str(tmp_path / "store")
    config = small_config(root, store_format="4.9")
    with MessageStore.open(config, start_services=False) as store:
        put = store.put_message(Message("RealT", b"later", queue_id=0, properties={"DELAY": "1"}))
        assert put.ok
        while store.dispatch_pending():
            pass
    _time.sleep(1.2)                      # level 1 (1 s) is due now
    shutil.rmtree(os.path.join(root, "index"))      # something for recover to repair
    monkeypatch.setattr(ScheduleMessageService, "start", refuse)
    monkeypatch.setattr(TimerService, "start", refuse)
    properties = tmp_path / "store.properties"
    properties.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\n"
                          "maxHashSlotNum=64\nmaxIndexNum=256\nstoreFormat=4.9\n")
    code, out, err = run(capsys, "recover", "--store", root, "--config", str(properties))
    assert code == 0, err
    with MessageStore.open(config, read_only=True) as store:
        assert store.get_max_offset_in_queue("RealT", 0) == 0
        assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1
