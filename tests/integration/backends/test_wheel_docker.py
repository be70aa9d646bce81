"""The built wheel is the harness: installed with only the docker extra into a fresh venv
outside the repo, it runs a chaos run on the docker backend to a valid verdict.

What this catches that the editable install cannot: a data file the code reads at run time
but the wheel leaves out (the node image's Dockerfile and requirements, the report
templates), a core import that needs an extra, an entry point that names a module the wheel
lacks, and code that finds its files through the source tree. It runs from a cwd that is not
the repo, with no PYTHONPATH, so only the installed package can answer; the fresh venv
installs with constraints.txt from the warm pip cache. ~1 min: the wheel build, the install,
an 8 s run of 3 containers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("harness", "nodes", "faults", "checkers", "reports", "vocabulary", "osutil")
#: what the source copy leaves out: local state, never part of a build
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".tools", ".tox", "store", "build", "dist",
                                   "*.egg-info", "__pycache__", "*.pyc", ".*_cache", "mutants",
                                   "spark-warehouse", "metastore_db")
PIP = ["-m", "pip", "--disable-pip-version-check", "-q"]


def _run(argv: list[str], what: str, timeout: float, **kw: object) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    assert p.returncode == 0, f"{what} failed (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p


def _data_files() -> set[str]:
    """Every non-.py file in our packages: each is read at run time, so each must ship."""
    return {str(f.relative_to(ROOT)) for pkg in PACKAGES for f in (ROOT / pkg).rglob("*")
            if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts}


def build_wheel(dest: Path) -> Path:
    """``pip wheel`` of a copy of the source (so no build/ or egg-info lands in the repo)."""
    src = dest / "src"
    shutil.copytree(ROOT, src, ignore=NOT_SOURCE)
    _run([sys.executable, *PIP, "wheel", "--no-deps", "-w", str(dest), str(src)], "pip wheel",
         300)
    (whl,) = dest.glob("chaos_harness-*.whl")
    return whl


@pytest.mark.chaos
@pytest.mark.smoke
def test_the_wheel_runs_a_docker_chaos_run_from_a_fresh_venv(docker_client, tmp_path):
    t0 = time.monotonic()
    whl = build_wheel(tmp_path)
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert _data_files() and _data_files() <= names, f"left out: {_data_files() - names}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)[:5]
    assert "License-Expression: Apache-2.0" in meta
    assert "Provides-Extra: docker" in meta
    t_build = time.monotonic() - t0

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], "python -m venv", 120)
    py = str(venv / "bin" / "python")
    _run([py, *PIP, "install", "pip==25.3"], "pip upgrade", 300)
    _run([py, *PIP, "install", "-c", str(ROOT / "constraints.txt"), f"{whl}[docker]"],
         "pip install the wheel with the docker extra", 600)
    t_install = time.monotonic() - t0 - t_build

    # only the installed package can answer: cwd outside the repo, no PYTHONPATH, the venv's
    # bin first; toxiproxy-server from PATH (bootstrap's build here), as a library user has it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV",
                                                              "PYTHONHOME", "HARNESS_STORE")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), str(ROOT / ".tools" / "bin"),
                                   *[p for p in env.get("PATH", "").split(os.pathsep)
                                     if p and Path(p).resolve() != (ROOT / ".venv" / "bin").resolve()]])
    probe = _run([py, "-c", "import json, importlib.util as u, harness, nodes; print(json.dumps("
                  "[harness.__file__, nodes.__file__, [m for m in ('pandas', 'pyspark', "
                  "'paramiko', 'hypothesis', 'docker') if u.find_spec(m)]]))"],
                 "importing the installed package", 60, cwd=elsewhere, env=env)
    h_file, n_file, present = json.loads(probe.stdout)
    site = str(venv / "lib")
    assert h_file.startswith(site) and n_file.startswith(site), (h_file, n_file)
    # hypothesis is a core dependency (`harness sim run` searches with it); the rest are extras
    assert present == ["hypothesis", "docker"], \
        f"only the docker extra was asked for, yet {present} installed"

    store = tmp_path / "store"
    p = subprocess.run([str(venv / "bin" / "harness"), "run", "garlicfarm", "--backend", "docker",
                        "--nodes", "3", "--time-limit", "8", "--nemesis", "partition,kill",
                        "--nemesis-interval", "2", "--seed", "20261125", "--store", str(store)],
                       cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    t_run = time.monotonic() - t0 - t_build - t_install
    print(f"wheel {t_build:.1f}s, fresh venv + install {t_install:.1f}s, docker run {t_run:.1f}s")
    assert p.returncode == 0, f"harness run exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    (run_dir,) = [d for d in store.glob("*/*") if (d / "results.json").is_file()]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True, json.dumps(results)[:2000]
    test = json.loads((run_dir / "test.json").read_text())
    assert (test["status"], test["backend"]) == ("complete", "docker"), test
    ops = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    applied = {o["f"] for o in ops if o["process"] == "nemesis" and o["type"] == "info"
               and not o.get("error")}
    assert {"kill", "start-partition"} <= applied, applied
    assert sum(o["type"] == "ok" and o["process"] != "nemesis" for o in ops) >= 50
