"""The hex view of a record whose [5.x] property CRC fails (apache/rocketmq#9852): `rmqstore dump
records --verify` and `MessageStore.inspect.record_hex` (the dashboard's door)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from store import MessageStore
from store.cli import main
from store.inspect.record_hex import hex_lines, record_hex_view
from tests.fixtures_util import REPO_ROOT, copy_store, store_config

FIXTURE = os.path.join(REPO_ROOT, "tests", "data", "fixtures", "rocketmq-5.3.3", "prop-crc")
SECOND_RECORD = 227          # the fixture's second record: 267 bytes (write-result.json)


@pytest.fixture
def damaged(tmp_path):
    """A copy of the prop-crc store whose second record has one flipped FLAG byte."""
    root = copy_store(FIXTURE, str(tmp_path))
    shutil.copy(os.path.join(FIXTURE, "store.properties"), tmp_path / "store.properties")
    with open(os.path.join(root, "commitlog", f"{0:020d}"), "r+b") as handle:
        handle.seek(SECOND_RECORD + 16)
        handle.write(b"\x05")
    return root


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dump_verify_prints_the_failing_record_with_its_crc_field_marked(capsys, damaged):
    code, out, err = _run(capsys, "dump", "records", "--store", damaged, "--verify", "--limit", "5")
    assert code == 1, err
    assert "__CRC32#: property CRC 241516394 does not match the record" in out
    assert f"Record at {SECOND_RECORD} (267 bytes)" in out
    lines = out.splitlines()
    digits_line = next(i for i, line in enumerate(lines) if line.startswith(f"{SECOND_RECORD + 256:016x}"))
    # The digits "4936151420" and the final \x02 sit on that line; ^^ marks exactly the 10 digits.
    assert "34 39 33 36 31 35 31 34 32 30 02" in lines[digits_line]
    assert lines[digits_line + 1].split() == ["^^"] * 10 + ["--"]
    assert "least significant first: stored '4936151420' -> 241516394" in out
    # Only the damaged record is shown.
    assert out.count("Record at ") == 1


def test_dump_verify_json_carries_the_hex_view(capsys, damaged):
    code, out, _ = _run(capsys, "dump", "records", "--store", damaged, "--verify", "--json")
    assert code == 1
    document = json.loads(out)
    (failure,) = document["crcFailures"]
    assert failure["phyOffset"] == SECOND_RECORD and failure["ok"] is False
    assert (failure["crcFieldStart"], failure["crcDigitsStart"]) == (247, 256)
    assert failure["expectedCrc"] == 241516394 != failure["computedCrc"]
    assert [row["valid"] for row in document["rows"] if row["kind"] == "RECORD"].count(False) == 1


def test_an_intact_store_prints_no_hex(capsys, tmp_path):
    root = copy_store(FIXTURE, str(tmp_path))
    shutil.copy(os.path.join(FIXTURE, "store.properties"), tmp_path / "store.properties")
    code, out, _ = _run(capsys, "dump", "records", "--store", root, "--verify", "--limit", "200")
    assert code == 0 and "Record at" not in out and "__CRC32#:" not in out


def test_the_inspection_api_gives_the_dashboard_the_same_view(damaged):
    config = store_config(FIXTURE, damaged)
    with MessageStore.open(config, read_only=True) as store:
        intact = store.inspect.record_hex(0)
        broken = store.inspect.record_hex(SECOND_RECORD)
        assert store.inspect.record_hex(10**9) is None
    assert intact.ok and intact.reason == "property CRC matches"
    assert intact.expected_crc == intact.computed_crc == 1182552839
    assert not broken.ok and broken.crc_start == 247 and broken.digits_start == 256
    assert broken.as_dict()["hex"] == hex_lines(broken)


def test_a_record_without_a_trailer_says_so():
    from store.codec import message as msgcodec
    record = msgcodec.encode_message(topic="T", queue_id=0, body=b"x", properties_raw=b"a\x01b\x02",
                                     born_timestamp=1, born_host="127.0.0.1:1", store_timestamp=2,
                                     store_host="127.0.0.1:2")
    view = record_hex_view(bytes(record), 4096)
    assert not view.ok and view.crc_start is None and "no __CRC32# property" in view.reason
    assert hex_lines(view)[0].startswith(f"{4096:016x}  ")
    assert "no __CRC32# trailer" in hex_lines(view)[-1]
    assert not any(set(line.split()) <= {"^^", "--"} for line in hex_lines(view))
