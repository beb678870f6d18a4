"""bench/schedule_bench.py at smoke size through bench.run_all (no timing asserts)."""

from __future__ import annotations


def test_schedule_scenario_runs_through_run_all(tmp_path, capsys, monkeypatch):
    from bench import run_all
    monkeypatch.setattr(run_all.common, "RESULTS_DIR", str(tmp_path / "results"))
    assert "schedule" in run_all.SCENARIOS
    assert run_all.main(["--size", "smoke", "--only", "schedule", "--workdir",
                         str(tmp_path / "work")]) == 0
    assert (tmp_path / "results" / "all-smoke.json").exists()
    assert list((tmp_path / "work").iterdir()) == [], "scratch stores must be deleted"


def test_schedule_scenario_reports_every_row(tmp_path, capsys):
    from bench import schedule_bench
    report = schedule_bench.main(["--size", "smoke", "--workdir", str(tmp_path), "--no-json"])
    assert "## schedule_bench (smoke)" in capsys.readouterr().out
    assert len(report.rows) == 4 and all(row.ours and min(row.ours) > 0 for row in report.rows)
