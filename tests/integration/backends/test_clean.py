"""``harness clean`` after a harness killed with -9 (no finally, no atexit): what it left
in Docker and on the loopback ssh host is found by label/path and removed; what a live
harness owns is kept."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from pathlib import Path

from backend_helpers import docker_leftovers

from harness.backends.clean import clean
from harness.backends.docker import LABEL_OWNER, LABEL_RUN
from harness.backends.images.build import image_tag
from tests.child_run import kill9_a_run
from tests.proc_state import processes_mentioning
from tests.waiting import until

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


def test_clean_after_kill9_docker(tmp_path, docker_client):
    rd = kill9_a_run(tmp_path, "docker")
    assert len(docker_leftovers(docker_client, rd)) == 6  # 3 containers + 3 volumes left
    rep = clean(ssh_hosts="")
    assert docker_leftovers(docker_client, rd) == [], rep.summary()


def _loopback_nodes() -> set[int]:
    return set(processes_mentioning("/chaos-harness-sshd-", "echo_node"))


def test_clean_after_kill9_ssh(tmp_path, sshd):
    before = _loopback_nodes()
    kill9_a_run(tmp_path, "ssh")
    # sshd died with the harness; its nodes did not
    assert until(lambda: len(_loopback_nodes() - before) == 3, 5), _loopback_nodes() - before
    rep = clean(ssh_hosts="")
    assert until(lambda: _loopback_nodes() - before == set(), 5), rep.summary()
    assert any("loopback sshd dir" in r for r in rep.removed), rep.summary()
