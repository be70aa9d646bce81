"""Free loopback ports for nodes and proxies, never handed out twice by one harness process.

Ports come from *below* the kernel's ephemeral range: a node killed by the nemesis must get
its port back on restart, and a port from the ephemeral range may meanwhile have been taken
as the source port of some outgoing connection (Toxiproxy opens many), which makes the
restart fail with "address in use".
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_given: set[int] = set()
_lock = threading.Lock()
_rng = random.Random()


def ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def _free(port: int, host: str, kind: int) -> bool:
    """Free for both TCP and UDP, so one allocator serves every transport."""
    for k in (kind, socket.SOCK_DGRAM if kind == socket.SOCK_STREAM else socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, k) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    """A port free now, outside the ephemeral range, not handed out before by this process."""
    lo, hi = ephemeral_range()
    ranges = [(r0, r1) for r0, r1 in ((10000, lo - 1), (hi + 1, 65535)) if r1 - r0 > 1000]
    with _lock:
        for _ in range(2000):
            r0, r1 = _rng.choice(ranges) if ranges else (1024, 65535)
            port = _rng.randint(r0, r1)
            if port not in _given and _free(port, host, kind):
                _given.add(port)
                return port
    raise RuntimeError("no free loopback port outside the ephemeral range after 2000 tries")


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    return [free_port(host) for _ in range(n)]


def is_listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0
