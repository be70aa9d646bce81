"""Drive the @waku/sds bridge (interop/waku_sds/bridge.mjs) and our SDS node as real processes
on loopback, for the interop tests (docs/sds.md, "Interop with @waku/sds")."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodes.sds.client import SdsClient

ROOT = Path(__file__).resolve().parents[3]
BRIDGE_DIR = ROOT / "interop" / "waku_sds"


def bridge_ready() -> str | None:
    """None when the bridge can run (installing it if needed), else why not."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node/npm not on PATH: the @waku/sds interop test needs Node.js 20+"
    subprocess.run([str(ROOT / "scripts" / "setup-waku-sds")], check=True, timeout=300)
    return None


def free_ports(n: int) -> list[int]:
    """Ports free for both UDP and TCP on 127.0.0.1 (held until all are picked)."""
    socks, ports = [], []
    while len(ports) < n:
        t = socket.socket()
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", port))
        except OSError:
            t.close()
            u.close()
            continue
        socks += [t, u]
        ports.append(port)
    for s in socks:
        s.close()
    return ports


@dataclass
class Member:
    """One group member: ``kind`` "ours" (python -m nodes.sds) or "waku" (the bridge)."""

    name: str
    kind: str
    peer_port: int
    client_port: int = 0
    admin_port: int = 0
    proc: subprocess.Popen[str] | None = field(default=None, repr=False)

    # ---- the bridge: JSON lines over stdin/stdout ----
    def call(self, **req: Any) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"bridge {self.name} exited (rc {self.proc.poll()}); see its stderr")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise RuntimeError(f"bridge {self.name} refused {req}: {reply.get('error')}")
        return reply

    # ---- both kinds ----
    def send(self, payload: str, exclude: list[str] | None = None) -> str:
        if self.kind == "waku":
            return str(self.call(op="send", payload=payload, exclude=exclude or [])["id"])
        assert not exclude, "our node has no per-message exclusion; cut it at the bridge"

        async def go() -> str:
            c = SdsClient("127.0.0.1", self.client_port)
            try:
                return str((await asyncio.wait_for(c.send(payload), 10))["id"])
            finally:
                await c.close()
        return asyncio.run(go())

    def state(self) -> dict[str, Any]:
        if self.kind == "waku":
            return self.call(op="state")
        url = f"http://127.0.0.1:{self.admin_port}/admin/state"
        with urllib.request.urlopen(url, timeout=5) as r:
            return dict(json.loads(r.read()))

    def events(self) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.admin_port}/admin/events?since=0"
        with urllib.request.urlopen(url, timeout=5) as r:
            return list(json.loads(r.read())["events"])

    def log_ids(self) -> list[str]:
        return [e["id"] for e in self.state()["log"]]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout) if self.proc else ():
            if f is not None:
                f.close()


#: timings compressed for a test (spec defaults are T_min 30 s, T_max 120 s)
T_MIN_MS, T_MAX_MS, SYNC_MS = 200, 1500, 500


def start_group(ours: list[str], waku: list[str], data: Path) -> dict[str, Member]:
    """Start a mixed group; every member has every other as a peer. Stop it with `stop_group`."""
    names = ours + waku
    ports = free_ports(len(ours) * 3 + len(waku))
    members: dict[str, Member] = {}
    it = iter(ports)
    for n in ours:
        members[n] = Member(n, "ours", next(it), next(it), next(it))
    for n in waku:
        members[n] = Member(n, "waku", next(it))
    try:
        for i, n in enumerate(names):
            m = members[n]
            addrs = {p: f"127.0.0.1:{members[p].peer_port}" for p in names if p != n}
            if m.kind == "ours":
                cfg = {"id": n, "num_id": i + 1, "host": "127.0.0.1", "data_dir": str(data / n),
                       "ports": {"peer": m.peer_port, "client": m.client_port, "admin": m.admin_port},
                       "peers": {p: {"peer": a} for p, a in addrs.items()}, "seed": i,
                       "options": {"verify_ids": False, "fsync": False, "t_min_ms": T_MIN_MS,
                                   "t_max_ms": T_MAX_MS, "sync_interval_ms": SYNC_MS,
                                   "resend_unacked_ms": 1000, "resend_possibly_ms": 3000}}
                path = data / f"{n}.json"
                path.write_text(json.dumps(cfg))
                with open(data / f"{n}.stderr", "w") as err:
                    m.proc = subprocess.Popen(
                        [sys.executable, "-m", "nodes.sds", "--config", str(path)],
                        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True)
            else:
                with open(data / f"{n}.stderr", "w") as err:
                    m.proc = subprocess.Popen(
                        ["node", "bridge.mjs", "--id", n, "--port", str(m.peer_port),
                         "--peers", json.dumps(addrs), "--t-min-ms", str(T_MIN_MS),
                         "--t-max-ms", str(T_MAX_MS), "--sync-ms", str(SYNC_MS)],
                        cwd=BRIDGE_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=err, text=True)
                ready = m.proc.stdout.readline() if m.proc.stdout else ""
                if '"ready":true' not in ready:
                    raise RuntimeError(f"bridge {n} did not start: {ready!r}; see {data / (n + '.stderr')}")
        for m in members.values():
            if m.kind == "ours":
                wait_for(lambda m=m: _up(m), 20, f"{m.name} admin API")
    except BaseException:
        stop_group(members)
        raise
    return members


def _up(m: Member) -> bool:
    try:
        m.state()
        return True
    except OSError:
        return False


def stop_group(members: dict[str, Member]) -> None:
    for m in members.values():
        m.stop()


def wait_for(cond: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while True:
        if cond():
            return
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)
