"""``harness clean`` after a harness killed with -9 (no finally, no atexit): what it left
in Docker and on the loopback ssh host is found by label/path and removed; what a live
harness owns is kept."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from backend_helpers import docker_leftovers

from harness.backends.clean import clean
from harness.backends.docker import LABEL_OWNER, LABEL_RUN
from harness.backends.images.build import image_tag

ROOT = Path(__file__).resolve().parents[3]


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_clean_removes_orphans_keeps_live(docker_client):
    dead = {LABEL_RUN: f"test-clean-dead-{os.getpid()}", LABEL_OWNER: f"{socket.gethostname()}:{_dead_pid()}"}
    live = {LABEL_RUN: f"test-clean-live-{os.getpid()}", LABEL_OWNER: f"{socket.gethostname()}:{os.getpid()}"}
    made = []
    try:
        for labels in (dead, live):
            tag = labels[LABEL_RUN]
            made.append(("volume", docker_client.volumes.create(tag, labels=labels)))
            made.append(("network", docker_client.networks.create(tag, labels=labels)))
            made.append(("container", docker_client.containers.create(
                image_tag(), ["sleep", "60"], name=tag, labels=labels)))
        rep = clean(ssh_hosts="")
        assert sum(dead[LABEL_RUN] in r for r in rep.removed) == 3, rep.summary()
        assert not any(live[LABEL_RUN] in r for r in rep.removed), rep.summary()
        assert sum(live[LABEL_RUN] in k for k in rep.kept) == 3, rep.summary()
        f = {"label": f"{LABEL_RUN}={dead[LABEL_RUN]}"}
        assert not docker_client.containers.list(all=True, filters=f)
        assert not docker_client.volumes.list(filters=f) and not docker_client.networks.list(filters=f)
    finally:
        for kind, o in reversed(made):
            with contextlib.suppress(Exception):
                o.remove(**({} if kind == "network" else {"force": True}))


def _start_and_kill9(tmp_path: Path, backend: str) -> Path:
    code = f"""
import sys; sys.path.insert(0, {str(ROOT)!r})
from tests.integration.harness.test_cluster import ECHO
from harness.runner import run
from harness.spec import TestSpec
run(TestSpec(name="k9", protocol=ECHO, nodes=3, seed=2, store={str(tmp_path)!r},
             time_limit=60, backend={backend!r}))
"""
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        runs = list((tmp_path / "k9").glob("*/history.jsonl"))
        if runs and runs[0].stat().st_size > 200:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            return runs[0].parent
        time.sleep(0.1)
    p.kill()
    raise AssertionError(f"run did not start: {p.stderr.read()}")


def test_clean_after_kill9_docker(tmp_path, docker_client):
    rd = _start_and_kill9(tmp_path, "docker")
    assert len(docker_leftovers(docker_client, rd)) == 6  # 3 containers + 3 volumes left
    rep = clean(ssh_hosts="")
    assert docker_leftovers(docker_client, rd) == [], rep.summary()


def _loopback_nodes() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes()
                st = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if b"/chaos-harness-sshd-" in cmd and b"echo_node" in cmd and st != "Z":
                out.append(int(p.name))
    return out


def test_clean_after_kill9_ssh(tmp_path, sshd):
    before = set(_loopback_nodes())
    _start_and_kill9(tmp_path, "ssh")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(set(_loopback_nodes()) - before) < 3:
        time.sleep(0.05)
    assert len(set(_loopback_nodes()) - before) == 3  # sshd died with the harness; nodes did not
    rep = clean(ssh_hosts="")
    time.sleep(0.2)
    assert set(_loopback_nodes()) - before == set(), rep.summary()
    assert any("loopback sshd dir" in r for r in rep.removed), rep.summary()
