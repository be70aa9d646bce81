"""The session-start reaper (harness.pytest_plugin.pytest_collection_finish), against the
real Docker engine: containers, networks and volumes labelled by a session that was killed
(its owner pid gone) are removed when the next chaos session starts; those of a session still
alive are kept, and go once their owner has died."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.backends.docker import LABEL_OWNER, LABEL_RUN
from harness.backends.images.build import image_tag

PROBE = '''
import pytest

@pytest.mark.chaos
def test_nothing():
    pass
'''


def _session(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real pytest session, in its own process, with one chaos test selected."""
    (tmp / "pytest.ini").write_text("[pytest]\n")
    (tmp / "test_probe.py").write_text(PROBE)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p",
                           "no:cacheprovider", "--rootdir", str(tmp), "-m", "chaos", *args,
                           str(tmp / "test_probe.py")], capture_output=True, text=True,
                          timeout=120, cwd=tmp)


def _make(client: Any, labels: dict[str, str]) -> list[tuple[str, Any]]:
    tag = labels[LABEL_RUN]
    return [("volume", client.volumes.create(tag, labels=labels)),
            ("network", client.networks.create(tag, labels=labels)),
            ("container", client.containers.create(image_tag(), ["sleep", "60"], name=tag,
                                                   labels=labels))]


def _left(client: Any, run: str) -> list[str]:
    f = {"label": f"{LABEL_RUN}={run}"}
    return ([f"container {c.name}" for c in client.containers.list(all=True, filters=f)]
            + [f"volume {v.name}" for v in client.volumes.list(filters=f)]
            + [f"network {n.name}" for n in client.networks.list(filters=f)])


def test_a_chaos_session_reaps_what_dead_sessions_left_and_keeps_live_ones(tmp_path,
                                                                           docker_client):
    host = socket.gethostname()
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    live_owner = subprocess.Popen(["sleep", "300"])  # stands in for a session still running
    dead = {LABEL_RUN: f"test-reaper-dead-{os.getpid()}", LABEL_OWNER: f"{host}:{dead_owner.pid}"}
    live = {LABEL_RUN: f"test-reaper-live-{os.getpid()}", LABEL_OWNER: f"{host}:{live_owner.pid}"}
    made: list[tuple[str, Any]] = []
    try:
        made += _make(docker_client, dead) + _make(docker_client, live)
        assert len(_left(docker_client, dead[LABEL_RUN])) == 3

        opted_out = _session(tmp_path, "--chaos-no-reap")
        assert opted_out.returncode == 0, opted_out.stdout + opted_out.stderr
        assert len(_left(docker_client, dead[LABEL_RUN])) == 3, opted_out.stdout

        first = _session(tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "chaos reaper: removed" in first.stdout, first.stdout
        assert _left(docker_client, dead[LABEL_RUN]) == [], first.stdout
        assert len(_left(docker_client, live[LABEL_RUN])) == 3, first.stdout
        assert f"container {dead[LABEL_RUN]}" in first.stdout

        live_owner.kill()
        live_owner.wait()
        second = _session(tmp_path)
        assert second.returncode == 0, second.stdout + second.stderr
        assert _left(docker_client, live[LABEL_RUN]) == [], second.stdout
    finally:
        live_owner.kill()
        live_owner.wait()
        for kind, o in reversed(made):
            with contextlib.suppress(Exception):
                o.remove(**({} if kind == "network" else {"force": True}))
