"""migrate: file consume queues -> RocksDB -> files, verified unit by unit (store/pipeline/jobs_migrate.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from store.errors import ConfigError
from store.pipeline.jobs_migrate import QueueStoreSpec, migrate, verify_stores
from store.pipeline.jobs_rebuild import NO_MASTER
from tests.pipeline_util import SPARK_WARNING_FILTERS, copy_store, fixture_dirs, fixture_id, spark  # noqa: F401

FIXTURES = fixture_dirs()
pytestmark = pytest.mark.skipif(not FIXTURES, reason="no RocketMQ fixtures found")


def queue_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "consumequeue").rglob("*"))
            if p.is_file()}


def _copy(fixture: Path, tmp_path: Path) -> Path:
    root = copy_store(fixture, tmp_path)
    shutil.copy(fixture / "store.properties", root / "store.properties")
    return root


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_round_trip_file_rocksdb_file_is_byte_identical(fixture, tmp_path):
    root = _copy(fixture, tmp_path)
    original = queue_files(root)
    to_rocks = migrate(root, "rocksdb", master=NO_MASTER)  # in place
    assert to_rocks.clean and to_rocks.verify.units == to_rocks.units_copied > 0
    assert (root / "consumequeue" / "CURRENT").exists()
    backup = Path(to_rocks.backup_dir)
    assert backup == root / "consumequeue.default-backup"
    assert {f"consumequeue/{p.relative_to(backup)}": p.read_bytes() for p in sorted(backup.rglob("*"))
            if p.is_file()} == original
    back = migrate(root, "file", out_dir=tmp_path / "back", master=NO_MASTER)
    assert back.clean and back.units_copied == to_rocks.units_copied
    assert queue_files(tmp_path / "back") == original
    assert not (root / ".migrate-rocksdb").exists()


@pytest.mark.spark
@SPARK_WARNING_FILTERS[0]
@SPARK_WARNING_FILTERS[1]
def test_spark_verification_finds_a_changed_unit(spark, tmp_path):  # noqa: F811
    fixture = FIXTURES[-1]
    root = _copy(fixture, tmp_path)
    result = migrate(root, "rocksdb", out_dir=tmp_path / "rocks", spark=spark)
    assert result.clean and result.verify.queues >= 2
    source = QueueStoreSpec(str(root), "default", result.source.file_size_bytes)
    target = QueueStoreSpec(str(tmp_path / "rocks"), "defaultRocksDB", result.source.file_size_bytes)
    # Change one unit's tagsCode in the file queues: the Spark verification must name it.
    first_file = sorted((root / "consumequeue").rglob("0" * 20))[0]
    data = bytearray(first_file.read_bytes())
    data[12 + 20:20 + 20] = (12345).to_bytes(8, "big")  # unit 1's tagsCode
    first_file.write_bytes(bytes(data))
    counts = verify_stores(source, target, spark=spark)
    assert counts.mismatches == 1 and "@1:" in counts.examples[0]


def test_wrong_direction_and_used_target_are_refused(tmp_path):
    root = _copy(FIXTURES[0], tmp_path)
    with pytest.raises(ConfigError, match="already holds file"):
        migrate(root, "file", out_dir=tmp_path / "x", master=NO_MASTER)
    (tmp_path / "used" / "consumequeue").mkdir(parents=True)
    with pytest.raises(ConfigError, match="fresh target"):
        migrate(root, "rocksdb", out_dir=tmp_path / "used", master=NO_MASTER)
    with pytest.raises(ConfigError, match="to must be"):
        migrate(root, "kafka", master=NO_MASTER)


def test_cli_migrate_without_spark(tmp_path, capsys):
    import argparse
    import json

    from store.pipeline.cli import add_spark_subcommands

    root = _copy(FIXTURES[0], tmp_path)
    parser = argparse.ArgumentParser()
    add_spark_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["spark", "migrate", "--store", str(root), "--to", "rocksdb", "--output",
                              str(tmp_path / "rocks"), "--master", "none", "--json"])
    assert args.func(args) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["clean"] and payload["mismatches"] == 0 and payload["verified_units"] == payload["units_copied"]
    assert (tmp_path / "rocks" / "consumequeue" / "CURRENT").exists()
