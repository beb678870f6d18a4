"""The pipeline on a standalone Spark cluster: one master and one worker started by the test itself.

`bin/spark-class` from the pyspark package runs `org.apache.spark.deploy.master.Master` and
`org.apache.spark.deploy.worker.Worker` (1 core, so the shared 2-core machine keeps a core for the
driver). The job runs in a child process (`python -m store.cli spark rebuild ...` with `SPARK_MASTER`),
because a test process that already holds the suite's local session cannot create a second
SparkContext. The master and worker are stopped through the process groups this test created.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipeline_util import fixture_dirs

FIXTURES = fixture_dirs()
REPO_ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120

pytestmark = [pytest.mark.spark, pytest.mark.slow,
              pytest.mark.skipif(not FIXTURES, reason="no RocketMQ fixtures found")]


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(log: Path, text: str, process: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # bounded by the deadline
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise AssertionError(f"{log.name} exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"no {text!r} in {log.name} after {timeout_s} s:\n{log.read_text(errors='replace')[-3000:]}")


def _start(argv: list[str], log: Path, env: dict) -> subprocess.Popen:
    handle = open(log, "wb")
    # A new session: the JVM and anything it forks form one process group we can stop by its id.
    return subprocess.Popen([str(_spark_class()), *argv], stdout=handle, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory):
    work = tmp_path_factory.mktemp("standalone")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYSPARK_PYTHON=sys.executable, SPARK_LOG_DIR=str(work),
               SPARK_WORKER_DIR=str(work / "worker"), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    master = _start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(_free_port())], work / "master.log", env)
    worker = None
    try:
        _wait_for(work / "master.log", "I have been elected leader", master, START_TIMEOUT_S)
        worker = _start(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                         "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(work / "worker")],
                        work / "worker.log", env)
        _wait_for(work / "worker.log", "Successfully registered with master", worker, START_TIMEOUT_S)
        yield url, env
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def test_rebuild_on_a_standalone_cluster(standalone_master, tmp_path):
    url, env = standalone_master
    fixture = FIXTURES[-1]
    env = dict(env, SPARK_MASTER=url)
    command = [sys.executable, "-m", "store.cli", "spark", "rebuild", str(tmp_path / "out"),
               "--store", str(fixture / "store"), "--json", "--no-progress"]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    payload = json.loads(done.stdout)
    assert payload["master"] == url
    rebuilt = {str(p.relative_to(tmp_path / "out")): p.read_bytes()
               for p in sorted((tmp_path / "out" / "consumequeue").rglob("*")) if p.is_file()}
    real = {str(p.relative_to(fixture / "store")): p.read_bytes()
            for p in sorted((fixture / "store" / "consumequeue").rglob("*")) if p.is_file()}
    assert rebuilt == real
