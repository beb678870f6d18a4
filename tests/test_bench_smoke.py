"""Every benchmark scenario at smoke size: it runs, prints its table and reports rows (no timing
asserts; the figures of a smoke run mean nothing)."""

from __future__ import annotations

import importlib
import os
import shutil

import pytest

SCENARIOS = ["put", "put_cores", "sync_flush", "pull", "lookups", "topic_count", "recovery", "dashboard",
             "timer_bench", "check_bench"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_runs_at_smoke_size(name, tmp_path, capsys):
    module = importlib.import_module(f"bench.{name}")
    report = module.main(["--size", "smoke", "--workdir", str(tmp_path), "--no-json"])
    out = capsys.readouterr().out
    assert f"## {name} (smoke)" in out
    assert report.skipped is None, f"{name} skipped: {report.skipped}"
    assert report.rows, f"{name} reported no rows"
    for row in report.rows:                 # every figure measured, none of them empty or negative
        assert row.ours and all(value >= 0 for value in row.ours), (row.case, row.metric, row.ours)
        assert f"| {row.case} |" in out or row.case in out
    assert list(tmp_path.iterdir()) == [], "scratch stores must be deleted"


def test_run_all_runs_the_decode_scenario(tmp_path, capsys, monkeypatch):
    from bench import run_all
    monkeypatch.setattr(run_all.common, "RESULTS_DIR", str(tmp_path / "results"))
    assert run_all.main(["--size", "smoke", "--only", "decode", "--workdir", str(tmp_path)]) == 0
    assert "decode" in capsys.readouterr().out


def test_the_c_references_are_in_the_repository_and_build(tmp_path, monkeypatch):
    """The same-run references come with the checkout (bench/ref/), not from beside it."""
    from bench import common
    for name in common.REFERENCE_LIBS:
        assert os.path.exists(os.path.join(common.REPO_ROOT, "bench", "ref", f"{name}.c")), name
    if shutil.which("gcc") is None:
        pytest.skip("not applicable: no gcc to build the C references")
    monkeypatch.setattr(common, "BIN_DIR", str(tmp_path))
    assert common.reference_binary("fsync_lat") == str(tmp_path / "fsync_lat")


def test_percentile_and_interleaving():
    from bench import common
    assert common.percentile([5, 1, 3, 2, 4], 50) == 3
    assert common.percentile(list(range(1, 101)), 99) == 99
    order = []
    common.interleaved(2, {"a": lambda: order.append("a"), "b": lambda: order.append("b")})
    assert order == ["a", "b", "b", "a"]
