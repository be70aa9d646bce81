"""``--node-command`` for real: the reference node started through it passes on every backend,
and a deliberately broken implementation (examples/lonely_kv, no replication) is caught.

Both read the same config, get the same faults and the same client workload as the reference
node does; only where the journal is missing do the checks say unknown, and say why.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from backend_helpers import sshd_available

from harness.nemesis_generator import Faults
from harness.protocols import get_protocol
from harness.pytest_plugin import assert_correct_run
from harness.runner import run
from harness.spec import TestSpec

ROOT = Path(__file__).resolve().parents[3]
LONELY = ROOT / "examples" / "lonely_kv" / "lonely_kv.py"
REFERENCE = "{python} -m nodes.garlicfarm --config {config}"


def _ready(backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "docker":
        request.getfixturevalue("docker_client")  # skips (or fails in CI) without an engine
    elif backend == "ssh" and not sshd_available():
        request.getfixturevalue("sshd")


def _spec(name: str, backend: str, store: Path, command: str, seed: int = 20261125) -> TestSpec:
    return TestSpec(name=name, protocol=get_protocol("garlicfarm"), nodes=3, seed=seed,
                    faults=Faults("partition,kill", 1.5), time_limit=6, backend=backend,
                    store=str(store), node_command=command)


@pytest.mark.chaos
@pytest.mark.smoke
@pytest.mark.parametrize("backend", ["local", "docker", "ssh"])
def test_the_reference_node_through_node_command_passes(backend, chaos_store, request):
    _ready(backend, request)
    spec = _spec(f"node-command-reference-{backend}", backend, chaos_store, REFERENCE)
    res = run(spec)
    assert_correct_run(spec, res, min_ok=40)
    # the reference node wrote its journal (that the command, not the default, started it is
    # shown by test_a_broken_external_node_is_invalid on the same backend)
    for n in spec.node_ids:
        assert (res.run_dir.node_dir(n) / "events.jsonl").stat().st_size > 0


@pytest.mark.chaos
@pytest.mark.smoke
@pytest.mark.parametrize("backend", ["local", "docker", "ssh"])
def test_a_broken_external_node_is_invalid(backend, chaos_store, request):
    """Also the proof that each backend starts the command it is given: had it started the
    reference node instead, the run would be valid."""
    _ready(backend, request)
    spec = _spec(f"node-command-lonely-{backend}", backend, chaos_store,
                 f"python3 {LONELY} {{config}}")
    res = run(spec)
    r = res.result
    lin = r.find("linearizable")
    assert lin is not None and lin.valid is False, r.explain()
    assert lin.anomalies and "not linearizable" in lin.anomalies[0].message
    assert r.find("stats").valid is True  # the client side judged real, completed ops
    raft = r.find("raft.election-safety")
    assert raft.valid == "unknown" and "--node-command (python3 " in raft.note, raft.note
    assert r.valid is False


def test_a_node_command_that_names_no_program_says_so(tmp_path):
    """The CLI refuses a template without {config} before anything starts, and a program that
    is not there fails the run with the path, not a traceback."""
    harness = [sys.executable, "-m", "harness.cli"]
    out = subprocess.run([*harness, "run", "garlicfarm", "--node-command", "./nope",
                          "--store", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 254 and "must pass the node its config" in out.stderr
    assert not any(tmp_path.iterdir())  # no run directory was made
    out = subprocess.run([*harness, "run", "garlicfarm", "--nodes", "1", "--time-limit", "0",
                          "--nemesis", "none", "--node-command", "./no-such-node {config}",
                          "--store", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    said = out.stdout + out.stderr
    assert out.returncode != 0, said
    assert "cannot start n1 (./no-such-node" in said and "No such file" in said, said[-2000:]
