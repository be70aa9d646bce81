"""Start real Garlic Farm node processes on loopback for integration tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from nodes.garlicfarm.tls import client_context, node_tls_material

ROOT = Path(__file__).resolve().parents[3]


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class LocalCluster:
    def __init__(self, base: Path, n: int = 3, bugs: list[str] | None = None, options: dict | None = None,
                 extra: int = 0) -> None:
        self.base = base
        self.ids = [f"n{i}" for i in range(1, n + extra + 1)]
        ports = free_ports(3 * len(self.ids))
        self.ports = {nid: dict(zip(("peer", "client", "admin"), ports[3 * k : 3 * k + 3], strict=True))
                      for k, nid in enumerate(self.ids)}
        self.procs: dict[str, subprocess.Popen] = {}
        self.members = list(range(1, n + 1))
        self.bugs = bugs or []
        self.options = options or {}

    def client_tls(self):
        """The client context for this cluster's peer ports (None when run with tls: false)."""
        return None if self.options.get("tls", True) is False else client_context(self.base / "tls" / "ca.pem")

    def num(self, nid: str) -> int:
        return int(nid[1:])

    def config_path(self, nid: str, join: bool = False) -> Path:
        d = self.base / nid
        d.mkdir(parents=True, exist_ok=True)
        # TLS by default, as the harness runs it; ``options={"tls": False}`` for plain TCP
        tls_opt = self.options.get("tls", True)
        tls_opt = node_tls_material(self.base / "tls", nid) if tls_opt is True else tls_opt
        cfg = {
            "id": nid, "num_id": self.num(nid), "host": "127.0.0.1", "data_dir": str(d / "data"),
            "ports": self.ports[nid],
            "peers": {o: {"num_id": self.num(o), "peer": f"127.0.0.1:{self.ports[o]['peer']}"}
                      for o in self.ids if o != nid},
            "bugs": self.bugs, "seed": 7,
            "options": {"members": self.members, "election_timeout_ms": [300, 600], "heartbeat_ms": 80,
                        "meta_interval_ms": 500, **self.options, "tls": tls_opt, **({"join": True} if join else {})},
        }
        p = d / "config.json"
        p.write_text(json.dumps(cfg))
        return p

    def start(self, nid: str, join: bool = False) -> None:
        cfg = self.config_path(nid, join)
        log = open(self.base / nid / "log.txt", "ab")  # noqa: SIM115 - owned by the process
        self.procs[nid] = subprocess.Popen([sys.executable, "-m", "nodes.garlicfarm", "--config", str(cfg)],
                                           cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})

    def start_all(self) -> None:
        for nid in self.ids[: len(self.members)]:
            self.start(nid)
        for nid in self.ids[: len(self.members)]:
            self.wait_health(nid)

    def admin(self, nid: str, path: str, timeout: float = 2.0) -> dict:
        url = f"http://127.0.0.1:{self.ports[nid]['admin']}{path}"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read())

    def wait_health(self, nid: str, limit: float = 15.0) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            try:
                if self.admin(nid, "/admin/health").get("ok"):
                    return
            except OSError:
                pass
            if self.procs[nid].poll() is not None:
                raise RuntimeError(f"{nid} exited: {(self.base / nid / 'log.txt').read_text()[-2000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"{nid} not healthy")

    def leader(self, among: list[str] | None = None, limit: float = 15.0) -> str:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            leaders = []
            for nid in among or list(self.procs):
                if self.procs[nid].poll() is not None:
                    continue
                try:
                    st = self.admin(nid, "/admin/state")
                except OSError:
                    continue
                if st["role"] == "leader":
                    leaders.append((st["term"], nid))
            if leaders:
                return max(leaders)[1]
            time.sleep(0.1)
        raise TimeoutError("no leader")

    def kill(self, nid: str, sig: int = signal.SIGKILL) -> None:
        p = self.procs[nid]
        if p.poll() is None:
            p.send_signal(sig)
            p.wait(10)

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
