"""The ssh backend against a real sshd (Debian's, on a loopback port): code over SFTP,
nohup + pid file, kill -9, STOP/CONT, restart keeping data, logs and journals fetched,
host keys checked, and nothing left running after a clean run, a failure, or Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from harness.backends.base import BackendError
from harness.backends.ssh import HostConn, SshBackend, SshHost
from harness.cluster import open_cluster
from harness.runner import run
from harness.spec import TestSpec, Workload
from harness.store import new_run
from tests.child_run import interrupt_a_run
from tests.integration.harness.test_cluster import ECHO, Exploding
from tests.proc_state import RUNNING, gone, processes_mentioning, settles
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]


def _hosts_file(tmp_path: Path, host: SshHost) -> Path:
    f = tmp_path / "hosts.json"
    f.write_text(json.dumps({"hosts": [{
        "host": host.host, "port": host.port, "user": host.user, "key": str(host.key),
        "known_hosts": str(host.known_hosts), "python": host.python, "workdir": host.workdir}]}))
    return f


def sshd_procs() -> set[int]:
    """The loopback sshd and every node it started."""
    return set(processes_mentioning("chaos-harness-sshd-"))


async def _all_reachable(c) -> bool:
    for n in c.nodes:
        if not all((await c.admin(n, "GET", "/admin/state"))["reachable"].values()):
            return False
    return True


def test_cluster_over_ssh(tmp_path, sshd, monkeypatch):
    host = sshd.host()
    monkeypatch.setenv("HARNESS_SSH_HOSTS", str(_hosts_file(tmp_path, host)))
    spec = TestSpec(name="echo", protocol=ECHO, nodes=3, seed=5, store=str(tmp_path / "store"),
                    backend="ssh")

    async def body():
        rd = new_run("echo", tmp_path / "store")
        async with open_cluster(spec, rd) as c:
            b = c.backend
            assert isinstance(b, SshBackend) and b._sshd is None  # the hosts file was used
            pids = {n: b.remote_pid(n) for n in c.nodes}
            # the node runs the uploaded copy of the code, not the project tree
            cwd = Path(os.readlink(f"/proc/{pids['n1']}/cwd"))
            assert cwd.parent == Path(host.workdir) / "code" and (cwd / "nodes" / "common").is_dir()
            assert await eventually(lambda: _all_reachable(c))
            await c.nemesis_invoke({"f": "start-partition", "value": {"shape": "isolate", "node": "n1"}})

            async def n1_cut():
                got = (await c.admin("n1", "GET", "/admin/state"))["reachable"]
                return got == {"n2": False, "n3": False}

            assert await eventually(n1_cut)
            await c.nemesis_invoke({"f": "stop-partition", "value": None})
            await c.nemesis_invoke({"f": "kill", "value": {"node": "n2"}})
            assert gone(pids["n2"]) and not b.is_running("n2")
            await c.nemesis_invoke({"f": "pause", "value": {"node": "n3"}})
            assert await settles(pids["n3"], ("T",)) == "T" and b.is_running("n3")
            await c.heal_all()
            assert await settles(pids["n3"], RUNNING) in RUNNING
            assert b.remote_pid("n2") != pids["n2"] and not gone(b.remote_pid("n2"))
            assert await eventually(lambda: _all_reachable(c))
            ev = (await c.admin("n2", "GET", "/admin/events?since=0"))["events"]
            assert [e["seq"] for e in ev if e["type"] == "start"] == [0, 1]  # data dir kept
            # a paused node can be killed and restarted
            p1 = b.remote_pid("n1")
            await c.pause("n1")
            await c.kill("n1")
            assert gone(p1) and not b.is_running("n1")
            await c.restart("n1")
            assert await eventually(lambda: _all_reachable(c))
            await c.collect()
            last = {n: b.remote_pid(n) for n in c.nodes}
        assert all(gone(p) for p in last.values())
        assert not (Path(host.workdir) / "runs" / b.run_id).exists()  # remote run files removed
        for n in ("n1", "n2", "n3"):
            nd = rd.path / "nodes" / n
            assert (nd / "events.jsonl").stat().st_size > 0
            assert (nd / "data" / "events.jsonl").exists()  # the data dir came home
            assert "starting with bugs" in (nd / "log.txt").read_text()

    asyncio.run(body())


def test_host_key_checked(tmp_path, sshd):
    """A host whose key is not in known_hosts is refused, with the command that fixes it."""
    h = sshd.host()
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{h.port} ssh-ed25519 "
                     "AAAAC3NzaC1lZDI1NTE5AAAAIE7ZPQBqZVxv0AMmRmSOCIHdvHCMVdhPuRYGWDDmMMsE\n")
    with pytest.raises(BackendError, match="host key does not match"):
        HostConn(SshHost(h.host, h.port, h.user, h.key, wrong))
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(BackendError, match="ssh-keyscan"):
        HostConn(SshHost(h.host, h.port, h.user, h.key, empty))


def test_failing_run_leaves_nothing(tmp_path):
    """Over the backend's own loopback sshd (no hosts file): nodes and sshd all gone."""
    wl = Workload(client=Exploding, generator=lambda s: iter(lambda: {"f": "read"}, None),
                  checkers={})
    spec = TestSpec(name="explode", protocol=ECHO, workload=wl, nodes=3, concurrency=2, seed=1,
                    store=str(tmp_path), time_limit=5, backend="ssh")
    before = sshd_procs()
    with pytest.raises(RuntimeError, match="exploded midway"):
        run(spec)
    rd = sorted((tmp_path / "explode").iterdir())[-1]
    assert json.loads((rd / "test.json").read_text())["status"] == "failed"
    assert sshd_procs() - before == set()


def test_ctrl_c_leaves_nothing(tmp_path):
    before = sshd_procs()
    interrupt_a_run(tmp_path, "ssh",  # sshd + 3 nodes, then none of them
                    running=lambda rd: len(sshd_procs() - before) >= 4,
                    gone=lambda rd: sshd_procs() - before == set())


READER = """
import json, sys, pathlib, time
cfg = json.loads(pathlib.Path(sys.argv[1]).read_text())
ca = cfg["tls"]["ca"]
pathlib.Path(cfg["data_dir"], "out.json").write_text(json.dumps({"ca": ca, "text": open(ca).read()}))
time.sleep(60)
"""


def test_run_wide_files_are_shipped(tmp_path, sshd):
    """A config naming a file elsewhere in the run dir (DRiP's <run>/tls) gets it uploaded
    to the host and the path rewritten; the data dir is remote and fetched back."""
    from harness.backends.base import NodeSpec

    run_dir = tmp_path / "run"
    nd = run_dir / "nodes" / "n1"
    (run_dir / "tls").mkdir(parents=True)
    nd.mkdir(parents=True)
    (run_dir / "tls" / "ca.pem").write_text("not really a CA")
    cfg = {"id": "n1", "data_dir": str(nd / "data"), "tls": {"ca": str(run_dir / "tls" / "ca.pem")}}
    (nd / "config.json").write_text(json.dumps(cfg))
    spec = NodeSpec(id="n1", argv=["{python}", "-c", READER, str(nd / "config.json")],
                    config_path=nd / "config.json", data_dir=nd / "data", log_path=nd / "log.txt",
                    cwd=ROOT)

    async def body():
        b = SshBackend([sshd.host()])
        try:
            await b.start(spec)
            got = None

            async def fetched():
                nonlocal got
                if await b.fetch("n1", "out.json", tmp_path / "out.json"):
                    got = json.loads((tmp_path / "out.json").read_text())
                return got is not None

            assert await eventually(fetched, 10), (await b.fetch_log("n1")).read_text()
            assert got["text"] == "not really a CA"
            assert got["ca"].startswith(sshd.host().workdir + "/runs/")
        finally:
            await b.close()
        assert (nd / "data" / "out.json").exists()  # the remote data dir came home at close

    asyncio.run(body())


def test_code_bundle_is_what_the_module_imports():
    import io
    import tarfile

    from harness.backends.ssh import code_bundle

    b = code_bundle("tests.integration.harness.echo_node")
    names = set(tarfile.open(fileobj=io.BytesIO(b.tar_gz)).getnames())
    assert "tests/integration/harness/echo_node.py" in names and "tests/__init__.py" in names
    assert "nodes/common/runtime.py" in names
    assert not any("__pycache__" in n or n.startswith(("harness/", "checkers/")) for n in names)
    assert not any(n.startswith("tests/unit/") for n in names)
    assert code_bundle("tests.integration.harness.echo_node").digest == b.digest  # stable
