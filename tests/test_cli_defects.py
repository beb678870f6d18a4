"""Regression tests for reported `rmqstore` defects, each on a copy of a real fixture."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from store.cli import main
from store.cli.common import format_time_ms, message_row
from tests.fixtures_util import REPO_ROOT, copy_store, fixture_dirs, load_dump, tree_fingerprint

ROLLED = next(f for f in fixture_dirs() if f.endswith("rolled-64k"))
CONFIG = os.path.join(ROLLED, "store.properties")
UTC_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def root(tmp_path):
    return copy_store(ROLLED, tmp_path)


def test_verify_does_not_call_the_unwritten_tail_damage(capsys, root):
    code, out, err = run(capsys, "dump", "records", "--verify", "--limit", "5000", "--store", root,
                         "--config", CONFIG, "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows[-1]["kind"] == "END" and rows[-1]["phyOffset"] == \
        load_dump(ROLLED)["commitLog"]["maxPhyOffset"]
    assert not any(r.get("valid") is False for r in rows)
    assert sum(r["kind"] == "RECORD" for r in rows) == load_dump(ROLLED)["totalMessages"]
    code, out, _ = run(capsys, "dump", "records", "--verify", "--limit", "5000", "--store", root,
                       "--config", CONFIG)
    assert code == 0 and "INVALID" not in out


def test_dump_says_when_the_limit_cut_it(capsys, root):
    code, out, _ = run(capsys, "dump", "records", "--store", root, "--config", CONFIG)
    assert code == 0 and "stopped at --limit 100" in out
    code, out, _ = run(capsys, "dump", "records", "--store", root, "--config", CONFIG, "--json")
    assert json.loads(out)["truncated"] is True and len(json.loads(out)["rows"]) == 100
    code, out, _ = run(capsys, "dump", "records", "--limit", "5000", "--store", root, "--config",
                       CONFIG, "--json")
    assert json.loads(out)["truncated"] is False


def test_query_without_index_says_why(capsys, root):
    shutil.rmtree(os.path.join(root, "index"))
    code, out, err = run(capsys, "query-msg-by-key", "TopicA", "k0", "--store", root, "--config",
                         CONFIG)
    assert code == 0 and "no index files" in err and "--rebuild-index" in err
    code, out, _ = run(capsys, "check", "--store", root, "--config", CONFIG)
    assert code == 1 and "no index files" in out


@pytest.mark.parametrize("store", ["empty", "file-only", "commitlog-dir"])
def test_a_directory_without_a_store_is_refused(capsys, root, tmp_path, store):
    directory = {"empty": tmp_path / "empty", "file-only": tmp_path / "other",
                 "commitlog-dir": os.path.join(root, "commitlog")}[store]
    os.makedirs(directory, exist_ok=True)
    if store == "file-only":
        (tmp_path / "other" / "notes.txt").write_text("x")
    code, out, err = run(capsys, "check", "--store", str(directory))
    assert code == 2 and "not a RocketMQ store" in err and "0 errors" not in out
    if store == "commitlog-dir":
        assert "commit-log directory" in err and f"--store {root}" in err


def test_a_dledger_style_store_is_not_refused(capsys, root, tmp_path):
    """DLedger keeps its log under dledger-<id>/: a root holding only that is still a store."""
    store = tmp_path / "dledger-store"
    (store / "dledger-n0").mkdir(parents=True)
    code, _out, err = run(capsys, "check", "--store", str(store))
    assert "not a RocketMQ store" not in err


@pytest.mark.parametrize("value", ["-1", "0"])
def test_query_max_must_be_positive(capsys, root, value):
    before = tree_fingerprint(root)
    code, out, err = run(capsys, "query-msg-by-key", "TopicA", "k0", "--max", value, "--store",
                         root, "--config", CONFIG)
    assert code == 2 and "--max" in err and not out
    assert tree_fingerprint(root) == before


BAD_TOPIC = "TopicA/../TopicB"


@pytest.mark.parametrize("argv", [
    ("dump", "consume-queue", "--topic", BAD_TOPIC, "--queue", "1"),
    ("pull", "G", BAD_TOPIC, "1"),
    ("query-msg-by-key", BAD_TOPIC, "k0"),
    ("query-msg-by-offset", BAD_TOPIC, "1", "0"),
    ("query-msg-by-id", "7F00000100002A9F0000000000000000", "--topic", BAD_TOPIC),
    ("print-msg", BAD_TOPIC),
], ids=lambda argv: argv[0])
def test_every_command_validates_the_topic(capsys, root, argv):
    code, out, err = run(capsys, *argv, "--store", root, "--config", CONFIG)
    assert code == 2 and "topic" in err and "'/'" in err and not out


def test_dump_index_verify_finds_a_bad_entry(capsys, root):
    code, out, _ = run(capsys, "dump", "index", "--verify", "--limit", "50", "--store", root,
                       "--config", CONFIG, "--json")
    rows = json.loads(out)["rows"]
    assert code == 0 and all(r["valid"] for r in rows)
    name = rows[3]["file"]
    path = os.path.join(root, "index", name)
    position = 40 + 64 * 4 + 3 * 20 + 4                      # entry 3's phyOffset
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write((rows[3]["phyOffset"] + 1).to_bytes(8, "big"))
    code, out, _ = run(capsys, "dump", "index", "--verify", "--limit", "50", "--store", root,
                       "--config", CONFIG, "--json")
    bad = [r for r in json.loads(out)["rows"] if not r["valid"]]
    assert code == 1 and [(r["file"], r["entry"]) for r in bad] == [(name, 3)]
    assert "not the start of a record" in bad[0]["problem"]


def test_query_by_id_takes_a_uniq_key(capsys, root):
    dump = load_dump(ROLLED)
    message = dump["queues"][1]["messages"][5]
    for extra in ((), ("--topic", message["topic"])):
        code, out, err = run(capsys, "query-msg-by-id", message["uniqKey"], *extra, "--store", root,
                             "--config", CONFIG, "--json")
        assert code == 0, err
        assert json.loads(out)["commitLogOffset"] == message["commitLogOffset"]
    code, _out, err = run(capsys, "query-msg-by-id", "7F0000010001000000000000DEADBEEF", "--store",
                          root, "--config", CONFIG)
    assert code == 2 and "UNIQ_KEY" in err


def test_misspelled_config_key_is_named_once(capsys, root, tmp_path):
    config = tmp_path / "broker.conf"
    config.write_text(open(CONFIG).read() + "mappedFileSizeComitLog=65536\nbrokerName=b1\n")
    code, out, err = run(capsys, "check", "--writable", "--store", root, "--config", str(config))
    assert err.count("mappedFileSizeComitLog") == 1 and "'mappedFileSizeCommitLog'" in err
    assert "brokerName" not in err
    assert "did you mean 'mappedFileSizeCommitLog'" in out


def _subprocess(*argv, **kwargs):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "store.cli", *argv], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=120, **kwargs)


def test_closed_pipe_exits_quietly(root):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    shell = (f"{sys.executable} -m store.cli dump records --limit 5000 --store {root} "
             f"--config {CONFIG} | head -1")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=120)
    assert done.stdout.startswith("phyOffset") and done.stderr == ""
    assert done.returncode in (0, 141)


def test_version():
    done = _subprocess("--version")
    assert done.returncode == 0 and re.match(r"rmqstore \d+\.\d+", done.stdout)


def test_readme_spark_master_matches_the_code():
    with open(os.path.join(REPO_ROOT, "store", "pipeline", "session.py")) as handle:
        default = re.search(r'DEFAULT_MASTER = "([^"]+)"', handle.read()).group(1)
    with open(os.path.join(REPO_ROOT, "README.md")) as handle:
        readme = handle.read()
    mentioned = set(re.findall(r"`(local\[[^\]]+\])` by default", readme))
    assert mentioned == {default}


def test_times_have_one_readable_form_with_a_zone(capsys, root):
    assert format_time_ms(1795334344939) == "2026-11-22 07:59:04.939 UTC"
    first = load_dump(ROLLED)["queues"][0]["messages"][0]
    for argv in (("print-msg", "TopicA", "--max", "2"), ("query-msg-by-key", "TopicA", "k0"),
                 ("query-msg-by-offset", "TopicA", "0", "0"), ("pull", "G", "TopicA", "0"),
                 ("dump", "records", "--limit", "2"), ("dump", "index", "--limit", "2")):
        code, out, _ = run(capsys, *argv, "--store", root, "--config", CONFIG)
        assert code == 0 and UTC_TIME.search(out), argv
        assert str(first["storeTimestamp"]) not in out, argv          # no raw ms for humans
        code, out, _ = run(capsys, *argv, "--store", root, "--config", CONFIG, "--json")
        assert "UTC" not in out, argv                                 # JSON keeps the raw ms
    assert UTC_TIME.fullmatch(message_row(_Record(first["storeTimestamp"]))["storeTime"])


class _Record:
    def __init__(self, store_timestamp):
        self.store_timestamp = store_timestamp
        self.msg_id = self.topic = self.tags = self.keys = self.uniq_key = "x"
        self.queue_id = self.queue_offset = self.commit_log_offset = self.store_size = 0
        self.body_crc = self.flag = self.sys_flag = self.born_timestamp = 0
        self.reconsume_times = self.prepared_transaction_offset = 0
        self.born_host = self.store_host = "127.0.0.1:1"
        self.properties = {}
        self.body = b""
