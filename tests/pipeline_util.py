"""Test helpers for the pipeline: fixture discovery, read-dump expectations, one shared Spark session.

Imported by tests/test_pipeline_*.py (`from tests.pipeline_util import spark`); pytest then sees the
session-scoped `spark` fixture. The session is created once per test process and never stopped by a
test (the JVM exits with the process), so every module that imports the fixture shares it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

import pytest

from tests import fixtures_util

TRANSACTION_TYPE_MASK = 0x0C
DISPATCHED_TRANSACTION_TYPES = (0x00, 0x08)  # NOT_TYPE, COMMIT_TYPE

# read-dump message field -> pipeline column
DUMP_TO_COLUMN = {
    "topic": "topic", "queueId": "queue_id", "queueOffset": "queue_offset", "commitLogOffset": "commit_log_offset",
    "storeSize": "store_size", "bodyCRC": "body_crc", "flag": "flag", "sysFlag": "sys_flag",
    "bornTimestamp": "born_timestamp", "bornHost": "born_host", "storeTimestamp": "store_timestamp",
    "storeHost": "store_host", "reconsumeTimes": "reconsume_times",
    "preparedTransactionOffset": "prepared_transaction_offset", "msgId": "msg_id", "uniqKey": "uniq_key",
    "tags": "tags", "keys": "keys",
}


def fixture_dirs() -> list[Path]:
    """Every fixture folder with a read-dump.json (tests/data/fixtures, then RMQ_FIXTURES roots)."""
    return [Path(p) for p in fixtures_util.fixture_dirs()]


def fixture_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@lru_cache(maxsize=None)
def read_dump(fixture: Path) -> dict:
    with open(fixture / "read-dump.json", encoding="utf-8") as handle:
        return json.load(handle)


def dump_messages(fixture: Path) -> dict[int, dict]:
    """read-dump messages keyed by commit-log offset."""
    return {m["commitLogOffset"]: m for q in read_dump(fixture)["queues"] for m in q["messages"]}


def dump_units(fixture: Path) -> list[tuple]:
    return sorted((q["topic"], q["queueId"], u["queueOffset"], u["commitLogOffset"], u["size"], u["tagsCode"])
                  for q in read_dump(fixture)["queues"] for u in q["cq"])


def message_body(message: dict) -> bytes:
    if message.get("bodyBase64") is not None:
        return base64.b64decode(message["bodyBase64"])
    return (message.get("body") or "").encode("utf-8")


def compare_with_dump(rows: list[dict], fixture: Path, store_dir: Path) -> list[str]:
    """Differences between decoded rows (all columns) and read-dump; [] when identical.

    Every dumped message must be decoded exactly. Extra records are allowed only when the store would
    never put them in a consume queue (PREPARED / ROLLBACK transaction records).
    """
    problems = []
    expected = dump_messages(fixture)
    by_offset = {r["phy_offset"]: r for r in rows}
    if len(by_offset) != len(rows):
        problems.append("duplicate phy_offset rows")
    for offset, message in expected.items():
        row = by_offset.get(offset)
        if row is None:
            problems.append(f"missing record at {offset}")
            continue
        for dump_name, column in DUMP_TO_COLUMN.items():
            if row[column] != message[dump_name]:
                problems.append(f"{offset} {column}: {row[column]!r} != {message[dump_name]!r}")
        properties = dict(row["properties"]) if not isinstance(row["properties"], dict) else row["properties"]
        checks = {
            "properties": (properties, message["properties"]),
            "properties_raw": (row["properties_raw"], message["propertiesString"].encode("utf-8")),
            "body": (bytes(row["body"]), message_body(message)),
            "raw": (_raw_record(store_dir, row), base64.b64decode(message["rawBase64"])),
        }
        for name, (got, want) in checks.items():
            if got != want:
                problems.append(f"{offset} {name} differs")
    for offset, row in by_offset.items():
        if offset not in expected and (row["sys_flag"] & TRANSACTION_TYPE_MASK) in DISPATCHED_TRANSACTION_TYPES:
            problems.append(f"record at {offset} is not in read-dump")
    return problems


def _raw_record(store_dir: Path, row: dict) -> bytes:
    from store.pipeline.layout import list_commit_log      # a DLedger store: its data files
    paths = {os.path.basename(s.path): s.path for s in list_commit_log(store_dir)}
    with open(paths[row["file_name"]], "rb") as handle:
        handle.seek(row["position"])
        return handle.read(row["store_size"])


def copy_store(fixture: Path, destination: Path) -> Path:
    """A writable copy of a fixture's store/ (fixtures are read-only)."""
    target = destination / "store"
    shutil.copytree(fixture / "store", target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    for name in ("store.properties",):
        if (fixture / name).exists():
            shutil.copy(fixture / name, destination / name)
    return target


# pytest resets warning filters around each test, so the session's filters are repeated as marks.
SPARK_WARNING_FILTERS = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

_SESSION = None


def shared_session():
    """The one local Spark session of a test process (local[2], UI off, small shuffles)."""
    global _SESSION
    if _SESSION is None:
        from store.pipeline.session import build_session

        _SESSION = build_session("local[2]", "rmqstore-tests", extra_conf={"spark.sql.shuffle.partitions": "2"})
    return _SESSION


@pytest.fixture(scope="session")
def spark():
    return shared_session()
