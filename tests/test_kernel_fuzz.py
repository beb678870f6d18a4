"""The native kernel under AddressSanitizer + UBSan, fuzzed against its pure-Python twins.

tests/kernel_fuzz/build.py compiles store/kernel/c/*.c with `-fsanitize=address,undefined
-fno-sanitize-recover=all` into a temp dir; tests/kernel_fuzz/driver.py runs it (ASan preloaded) on
mutated records of tests/data/kernel_corpus/ and on extreme arguments, comparing with the twins, for
RMQ_KERNEL_FUZZ_SECONDS (default 150) of wall time. Any sanitizer report or disagreement fails.
The slow test skips only when there is no C compiler and RMQ_REQUIRE_KERNEL is unset (CI sets it).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from tests.kernel_fuzz import build, make_corpus

FUZZ_SECONDS = float(os.environ.get("RMQ_KERNEL_FUZZ_SECONDS", "150"))


def _sanitizer_report(stderr: str) -> bool:
    return "ERROR: AddressSanitizer" in stderr or "runtime error:" in stderr or \
        "ERROR: UndefinedBehaviorSanitizer" in stderr


@pytest.mark.slow
def test_sanitized_kernel_survives_fuzzing_and_agrees_with_its_twins(tmp_path, capsys):
    if build.compiler() is None:
        if not os.environ.get("RMQ_REQUIRE_KERNEL"):
            pytest.skip("no C compiler to build the sanitized kernel (RMQ_REQUIRE_KERNEL unset)")
        pytest.fail("RMQ_REQUIRE_KERNEL is set but there is no C compiler (gcc) for the fuzz build")
    module = build.build(str(tmp_path))
    report = tmp_path / "disagreement.json"
    done = subprocess.run(
        [sys.executable, "-m", "tests.kernel_fuzz.driver", "--module", module,
         "--seconds", str(FUZZ_SECONDS), "--report", str(report)],
        cwd=build.REPO_ROOT, env=build.sanitizer_env(), capture_output=True, text=True,
        timeout=FUZZ_SECONDS + 600)
    assert not _sanitizer_report(done.stderr), done.stderr[-12000:]
    assert done.returncode == 0, done.stderr[-12000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["sanitizers"] == {"asan_runtime": True, "asan_checks": True, "ubsan_checks": True}
    assert all(count > 0 for count in summary["by_target"].values()), summary
    assert all(count > 0 for count in summary["compared_with_twin"].values()), summary
    with capsys.disabled():
        print(f"\nkernel fuzz: {summary['executions']} executions in {summary['seconds']} s "
              f"(seed {summary['seed']}), no sanitizer report, no twin disagreement; "
              f"by target {summary['by_target']}; compared with a twin {summary['compared_with_twin']}")


def test_the_corpus_is_what_make_corpus_writes(tmp_path, monkeypatch):
    """The committed seeds are the fixtures' records cut by make_corpus (regenerate, don't hand-edit)."""
    monkeypatch.setattr(make_corpus, "CORPUS_DIR", str(tmp_path))
    make_corpus.main()
    committed = {os.path.basename(p): open(p, "rb").read()
                 for p in glob.glob(os.path.join(build.REPO_ROOT, "tests", "data", "kernel_corpus",
                                                 "*.bin"))}
    written = {os.path.basename(p): open(p, "rb").read() for p in glob.glob(str(tmp_path / "*.bin"))}
    assert committed == written, ("tests/data/kernel_corpus/ is not what make_corpus writes from "
                                  "tests/data/fixtures (a fixture was added?): run "
                                  "`python3 -m tests.kernel_fuzz.make_corpus` and commit the corpus")
    assert 50 <= len(committed) and sum(map(len, committed.values())) < 300_000
