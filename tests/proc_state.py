"""A process's scheduler state from /proc, for tests that check what a backend did to it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.waiting import eventually

# D is live too: a process may be waiting on disk (loading Python on a busy CI machine).
RUNNING = ("S", "R", "D")


def state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (None once it is reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def gone(pid: int) -> bool:
    return state(pid) in (None, "Z")


async def settles(pid: int, states: tuple[str | None, ...], within_s: float = 5.0) -> str | None:
    """The state ``pid`` reaches within the time; signals land asynchronously and a process in D
    takes its SIGSTOP only when the wait ends."""
    async def there() -> bool:
        return state(pid) in states

    await eventually(there, within_s, 0.02)
    return state(pid)


def processes_mentioning(*markers: str) -> dict[int, str]:
    """Live (non-zombie) processes, other than this one, whose command line holds every marker."""
    out = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if all(m in cmd for m in markers) and not gone(int(p.name)):
                out[int(p.name)] = cmd
    return out
