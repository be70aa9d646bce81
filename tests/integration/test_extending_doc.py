"""docs/extending.md's worked examples, run as written: every ``console`` block, from the
project root with the venv's ``bin`` first on PATH and ``$WORK`` a scratch directory, must end
with the exit code the ``<!-- exit: N -->`` comment above it promises."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "extending.md"
BLOCK = re.compile(r"<!-- exit: (\d+) -->\n```console\n(.*?)```", re.S)


def blocks() -> list[tuple[int, list[str]]]:
    found = [(int(code), [line[2:] for line in body.splitlines() if line.startswith("$ ")])
             for code, body in BLOCK.findall(DOC.read_text())]
    # every console block carries its promise: one without would never be run
    assert len(found) == DOC.read_text().count("```console"), "a console block lacks <!-- exit: N -->"
    return found


def test_the_doc_has_worked_examples_of_both_kinds() -> None:
    commands = " ".join(c for _, cmds in blocks() for c in cmds)
    assert "--node-command" in commands and "primary-register" in commands
    assert {code for code, _ in blocks()} == {0, 1}  # a pass and a catch


@pytest.fixture
def tidy_examples():
    """pip builds an example suite in its own tree (build/, *.egg-info): remove what this test
    made there, leave what was there before."""
    made = [ROOT / "examples" / "primary_register" / "build",
            ROOT / "examples" / "primary_register" / "primary_register_suite.egg-info"]
    before = {p for p in made if p.exists()}
    yield
    for p in made:
        if p not in before:
            shutil.rmtree(p, ignore_errors=True)


@pytest.mark.chaos
@pytest.mark.smoke
@pytest.mark.usefixtures("tidy_examples")
def test_every_console_block_ends_as_the_doc_says(tmp_path: Path) -> None:
    env = {**os.environ, "WORK": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for i, (code, commands) in enumerate(blocks()):
        # the block's lines in one shell, stopping at the first that fails: its code is the block's
        script = "set -e\n" + "\n".join(commands)
        out = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == code, (f"block {i + 1} of {DOC.name} exited {out.returncode}, "
                                        f"the doc says {code}:\n{script}\n"
                                        f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
