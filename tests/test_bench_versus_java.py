"""bench/versus_java.py's plumbing, with a stand-in for the Java harness (the real one lives outside the
repository): the command line it is given, the JSON figures it prints, rounds that alternate the side
going first, and ratios against its values. No timing asserts."""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from bench import versus_java

FAKE = r'''
import json, sys
scenario, args = sys.argv[1], sys.argv[2:]
with open(sys.argv[0] + ".calls", "a") as log:
    log.write(json.dumps([scenario] + args) + "\n")
names = {"put-single": ["put single 1024 B x1 thr: end-to-end indexed"],
         "put-batch32": ["put batch32 1024 B x1 thr: end-to-end indexed"],
         "pull": ["pull 32, bytes copied", "pull 32, no copy (ByteBuffer slices)",
                  "pull 32, decoded (MessageDecoder.decodes)"]}[scenario]
reps = int(args[args.index("--reps") + 1])
print("SLF4J noise that is not JSON")
for name in names:
    print(json.dumps({"name": name, "unit": "msg/s", "values": [1000.0] * reps}))
'''


def test_without_a_java_command_the_scenario_says_it_is_skipped(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("RMQ_BENCH_JAVA", raising=False)
    report = versus_java.main(["--size", "smoke", "--workdir", str(tmp_path), "--no-json"])
    assert report.skipped and "RMQ_BENCH_JAVA" in report.skipped and not report.rows


def test_rows_pair_our_figures_with_the_harness_figures(tmp_path, capsys):
    fake = tmp_path / "fake_java.py"
    fake.write_text(FAKE)
    work = tmp_path / "work"
    report = versus_java.main(["--size", "smoke", "--workdir", str(work), "--no-json",
                               "--java", f"{sys.executable} {fake}", "--only", "put,pull",
                               "--rounds", "2"])
    assert report.skipped is None
    rows = {(row.case, row.metric): row for row in report.rows}
    assert set(rows) == {("single put 1 KiB", "end-to-end indexed"),
                         ("batch of 32 x 1 KiB", "end-to-end indexed"),
                         ("pull of 32", "bytes copied"), ("pull of 32", "no copy"),
                         ("pull of 32", "decoded")}
    for row in rows.values():
        assert row.reference == [1000.0, 1000.0], row          # one rep per round, two rounds
        assert len(row.ours) == 2 and all(v > 0 for v in row.ours)
        assert row.ratio == pytest.approx(statistics.median(row.ours) / 1000.0)
    calls = [json.loads(line) for line in open(f"{fake}.calls")]
    assert [c[0] for c in calls] == ["put-single", "put-single", "put-batch32", "put-batch32",
                                     "pull", "pull"]
    assert all(c[1:5] == ["--reps", "1", "--warmup", "3"] and
               c[c.index("--count") + 1] in ("512", "2048") for c in calls)
    assert list(work.iterdir()) == [], "scratch stores must be deleted"
    assert "RocketMQ 4.9.7 (Java)" in capsys.readouterr().out


def test_a_failing_harness_is_named_with_its_stderr(tmp_path):
    with pytest.raises(RuntimeError, match="exited 3: boom"):
        versus_java.java_run(f"{sys.executable} -c 'import sys; sys.stderr.write(\"boom\"); sys.exit(3)'",
                             "pull", 1, str(tmp_path))


def test_unknown_scenarios_are_refused():
    with pytest.raises(SystemExit, match="unknown scenario 'puts'"):
        versus_java.main(["--only", "puts"])
