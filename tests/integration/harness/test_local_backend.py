"""The local backend really changes process state: kill -9, SIGSTOP/SIGCONT, restart."""

import asyncio
import os
import sys
from pathlib import Path

import pytest

from harness.backends.base import BackendError, NodeSpec
from harness.backends.local import LocalBackend
from tests.proc_state import RUNNING, gone, settles, state
from tests.waiting import until

SLEEPER = "import os, time, pathlib; pathlib.Path('pid').write_text(str(os.getpid())); time.sleep(120)"


def spec(tmp_path: Path) -> NodeSpec:
    return NodeSpec(id="n1", argv=["{python}", "-c", SLEEPER], config_path=tmp_path / "c.json",
                    data_dir=tmp_path / "data", log_path=tmp_path / "log.txt", cwd=tmp_path)


def test_kill_pause_resume_restart(tmp_path):
    async def body():
        b = LocalBackend()
        try:
            await b.start(spec(tmp_path))
            pid = b.pid("n1")
            assert b.is_running("n1") and await settles(pid, RUNNING) in RUNNING
            with pytest.raises(BackendError, match="already running"):
                await b.start(spec(tmp_path))
            await b.pause("n1")
            assert await settles(pid, ("T",)) == "T"
            await b.resume("n1")
            assert await settles(pid, RUNNING) in RUNNING
            await b.kill("n1")
            assert state(pid) is None and not b.is_running("n1")
            await b.start(spec(tmp_path))  # restart keeps the data dir
            assert b.pid("n1") != pid and b.is_running("n1")
            assert (tmp_path / "data").is_dir()
            pid2 = b.pid("n1")
        finally:
            await b.close()
        assert state(pid2) is None
    asyncio.run(body())


def test_stop_of_a_paused_node_still_ends_it(tmp_path):
    async def body():
        b = LocalBackend(stop_grace_s=1)
        await b.start(spec(tmp_path))
        pid = b.pid("n1")
        await b.pause("n1")
        await b.close()
        assert state(pid) is None
    asyncio.run(body())


def test_harness_killed_with_sigkill_leaves_no_node(tmp_path):
    """PR_SET_PDEATHSIG: a harness that dies hard takes its nodes with it."""
    code = (
        "import asyncio, sys; from pathlib import Path\n"
        "from harness.backends.local import LocalBackend\nfrom harness.backends.base import NodeSpec\n"
        f"d = Path({str(tmp_path)!r})\n"
        f"s = NodeSpec(id='n1', argv=['{{python}}', '-c', {SLEEPER!r}], config_path=d/'c', data_dir=d/'data',"
        " log_path=d/'log.txt', cwd=d)\n"
        "b = LocalBackend(); asyncio.run(b.start(s)); print(b.pid('n1'), flush=True); import time; time.sleep(60)\n"
    )
    import subprocess

    harness = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).resolve().parents[3])
    pid = int(harness.stdout.readline())
    assert state(pid) is not None
    os.kill(harness.pid, 9)
    harness.wait()
    assert until(lambda: gone(pid), 2.5), state(pid)
