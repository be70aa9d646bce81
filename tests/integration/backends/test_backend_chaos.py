"""Chaos runs on the docker and ssh backends, whatever ``--chaos-backend`` says: the proof that
they are equal citizens of the local backend.

- ``test_echo_chaos_on_backend``: the whole runner (clients, a fixed nemesis schedule that
  partitions, kills, restarts, pauses and resumes, journals collected) with the echo node,
  needing no protocol.
- ``test_protocol_chaos_on_backend``: each registered protocol (``harness.protocols``) under
  a random partition/kill/pause schedule; the run must pass as ``chaos_run`` demands of a
  correct node on the local backend (valid, a minimum of ok ops, every fault kind applied,
  every True leaf with evidence). Garlic Farm's and ANTACID's pairs are also ``smoke``: the
  docker and ssh chaos tests that the default test command (CI) runs on every submission.

Both go through ``chaos_run`` with the backend pinned (``backend=``), so their runs land in
the chaos store with the session's seed and time limit, like every other chaos test's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from backend_helpers import sshd_available

from faults import schedules as sch
from harness.nemesis_generator import Faults, from_schedule
from harness.protocols import get_protocol, names
from harness.spec import TestSpec
from tests.integration.harness.test_cluster import ECHO

#: every registered protocol; each must pass on every backend (a missing one is a failure)
PROTOCOLS = tuple(names())
BACKENDS = ("docker", "ssh")
#: ok client ops a 15 s run must reach (SWIM's only client op is its clock-sync)
MIN_OK = {"garlicfarm": 100, "drip": 30, "sds": 30, "swim": 1, "antacid": 30}
#: the pairs the default test command (CI) runs on every submission
SMOKE = ("garlicfarm", "antacid")


def extra_fields(protocol: str) -> dict[str, Any]:
    """Spec fields a protocol needs beyond the shared ones. ANTACID: replicas pulling often,
    and a quiesce long enough for submissions cut off from the primary by a partition, kill
    or pause to get through once it heals (each server retries its propagation for 10 s) and
    for liveness to be judged. Such a submission's client stops waiting after 4 s (``info``);
    the availability checker counts it as having its outcome when its GlobalSubmitID was
    committed later, so the run reaches a definite verdict under the same random faults as
    the others (docs/antacid.md, "Random faults")."""
    if protocol != "antacid":
        return {}
    return {"options": {"pull_interval": 0.3}, "quiesce_s": 8.0}


def _backend_ready(backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "local":
        return
    if backend.startswith("docker"):
        request.getfixturevalue("docker_client")  # skips (or fails in CI) without an engine
    elif not sshd_available():
        request.getfixturevalue("sshd")  # same: the fixture says what to install


@pytest.mark.chaos
@pytest.mark.parametrize("backend", BACKENDS)
def test_echo_chaos_on_backend(backend, chaos_run, request):
    _backend_ready(backend, request)
    nodes = ["n1", "n2", "n3"]
    schedule = sch.explicit([
        (0.5, sch.op("start-partition", {"shape": "isolate", "node": "n1"})),
        (1.0, sch.op("stop-partition")),
        (0.3, sch.op("kill", {"node": "n2"})),
        (1.0, sch.op("restart", {"node": "n2"})),
        (0.3, sch.op("pause", {"node": "n3"})),
        (1.0, sch.op("resume", {"node": "n3"})),
    ])
    spec = TestSpec(name=f"echo-chaos-{backend}", protocol=ECHO, nodes=len(nodes), seed=11,
                    nemesis=from_schedule(schedule), nemesis_desc="explicit", time_limit=6,
                    concurrency=3, quiesce_s=0.5)
    res = chaos_run(spec, min_ok=20, backend=backend)  # clients got through between faults
    rd = res.run_dir.path
    ops = [json.loads(line) for line in (rd / "history.jsonl").read_text().splitlines()]
    done = {o["f"] for o in ops if o["process"] == "nemesis" and o["type"] == "info"
            and not o.get("error")}
    assert {"kill", "restart", "pause", "resume", "start-partition"} <= done, done
    journal = [json.loads(x) for x in (rd / "nodes" / "n2" / "events.jsonl").read_text().splitlines()]
    # one journal across the restart: the data dir was kept
    assert [e["seq"] for e in journal] == list(range(len(journal)))
    assert sum(e["type"] == "start" for e in journal) == 2


@pytest.mark.chaos
@pytest.mark.parametrize("protocol,backend", [
    pytest.param(p, b, id=f"{p}-{b}", marks=[pytest.mark.smoke] if p in SMOKE else [])
    for p in PROTOCOLS for b in BACKENDS] + [
    # ANTACID on a bridge network per run: nodes in their own namespaces reach the proxies
    # and the client's notification listener on the bridge's gateway
    pytest.param("antacid", "docker-bridge", id="antacid-docker-bridge",
                 marks=[pytest.mark.smoke]),
    # SWIM, the UDP one: the relay's link sockets on the gateway, delivering to each
    # container's own address, so members still know each other by sender address
    pytest.param("swim", "docker-bridge", id="swim-docker-bridge", marks=[pytest.mark.smoke]),
    # the same random faults on the local backend, beside the other three
    pytest.param("antacid", "local", id="antacid-local", marks=[pytest.mark.smoke])])
def test_protocol_chaos_on_backend(protocol, backend, chaos_run, request):
    _backend_ready(backend, request)
    nodes = 5 if protocol in ("garlicfarm", "swim") else 3
    seed = 20261123
    fields = {"faults": Faults("partition,kill,pause", 2.0), "time_limit": 15,
              **extra_fields(protocol)}
    spec = TestSpec(name=f"{protocol}-chaos-{backend}", protocol=get_protocol(protocol),
                    nodes=nodes, seed=seed, **fields)
    chaos_run(spec, min_ok=MIN_OK[protocol], backend=backend)
