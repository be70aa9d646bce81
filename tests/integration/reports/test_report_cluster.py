"""``harness report --master spark://...`` against a real Spark standalone cluster on loopback.

The master and one worker are started from pyspark's own distribution (``bin/spark-class``)
on free 127.0.0.1 ports, each in its own session with a parent-death signal, and are always
stopped by the fixture's finalizer (and by an ``atexit`` hook, for a Ctrl-C or an error that
skips the finalizer). The report runs as the real CLI in a subprocess: its driver ships the
project to the executors as a zip (``spark_engine.project_zip`` via ``addPyFile``) and the
executors read the store by path (one machine: a shared filesystem).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest

SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Daemon:
    """One Spark daemon (master or worker) in its own process group."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name, self.log = name, log
        self._out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=self._out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True, preexec_fn=_die_with_parent)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._out.close()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _master_json(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("spark-cluster")
    port, ui, wport, wui = (free_port() for _ in range(4))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1",
           "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(d), "SPARK_PID_DIR": str(d),
           "SPARK_HOME": str(SPARK_HOME)}
    env.pop("PYTHONPATH", None)  # executors must get the project from the driver, not here
    daemons: list[Daemon] = []

    def stop_all() -> None:
        for dm in reversed(daemons):
            dm.stop()
        daemons.clear()

    atexit.register(stop_all)
    try:
        daemons.append(Daemon("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(ui)], d / "master.log", env))
        url = f"spark://127.0.0.1:{port}"
        daemons.append(Daemon("worker", [
            "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
            "--port", str(wport), "--webui-port", str(wui), "--cores", "2", "--memory", "2g",
            "--work-dir", str(d / "work")], d / "worker.log", env))
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for dm in daemons:
                if dm.proc.poll() is not None:
                    pytest.fail(f"spark {dm.name} exited ({dm.proc.returncode}):\n{dm.tail()}")
            with contextlib.suppress(OSError, ValueError):
                if _master_json(ui).get("aliveworkers", 0) >= 1:
                    break
            if time.monotonic() > deadline:
                pytest.fail("no worker registered with the master in "
                            f"{START_TIMEOUT_S}s:\n{daemons[0].tail()}\n{daemons[1].tail()}")
            time.sleep(0.5)
        yield {"url": url, "ui": ui, "work": d / "work", "daemons": daemons}
    finally:
        stop_all()
        atexit.unregister(stop_all)


def harness_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "harness"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())"]


def test_report_on_a_standalone_cluster(cluster, store, tmp_path):
    cmd = harness_cmd() + [
        "report", "--store", str(store["store"]), "--engine", "spark",
        "--master", cluster["url"], "--pages", "none", "--recovery-window", "0.1",
        "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2",
        "--conf", "spark.driver.memory=1g", "--conf", "spark.sql.shuffle.partitions=2"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 1, p.stdout + p.stderr  # invalid runs in the store
    assert "run(s) where a stored verdict" in p.stderr, p.stderr
    data = json.loads((store["store"] / "_report" / "data" / "report.json").read_text())
    print("cluster report timings:", data["timings"])
    runs = {r["run_id"]: r for r in data["runs"]}
    assert runs[f"kv/{store['ok'].name}"]["verdict"] == "true"
    assert runs[f"kv-stale/{store['stale'].name}"]["verdict"] == "false"
    raft = runs[f"gf-kv/{store['raft'].name}"]
    assert raft["verdict"] == "false" and "raft (stored true, re-run false)" in raft["mismatch"]
    agree = {(a["run_id"].split("/")[0], a["checker"], a["status"])
             for a in data["tables"]["agreement"]}
    assert {("gf-kv", "raft", "MISMATCH"), ("sds", "ordering", "agree"),
            ("gf-kv", "linearizable", "agree")} <= agree
    # the tasks ran on the cluster's executor, which got the project as a shipped zip
    app = _master_json(cluster["ui"])["completedapps"]
    assert app and app[-1]["name"] == "harness-report"
    shipped = list(cluster["work"].glob("app-*/*/harness-pkgs.zip"))
    assert shipped, sorted(str(p) for p in cluster["work"].rglob("*"))[:40]
