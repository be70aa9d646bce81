"""Free loopback ports for nodes and proxies, never handed out twice by one harness process.

Ports come from *below* the kernel's ephemeral range: a node killed by the nemesis must get
its port back on restart, and a port from the ephemeral range may meanwhile have been taken
as the source port of some outgoing connection (Toxiproxy opens many), which makes the
restart fail with "address in use".

"Free now" is not enough when several harness processes run at once (pytest workers, agents,
CI jobs on one machine): two of them could probe the same port before either node binds it,
and the later node then exits at start-up with "address already in use". So every port
handed out is also *reserved* machine-wide: a file named after it in `reservation_dir()` holding
the owner's pid, claimed under an flock. Another process skips a port whose owner still lives;
a dead owner's files are swept, so a crash leaks nothing but a stale file that the next run
removes.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from osutil.procs import pid_alive

_given: set[int] = set()
_lock = threading.Lock()
_rng = random.Random()
_swept: set[Path] = set()  # reservation dirs already swept of dead owners by this process

#: where reservations live; an override for tests and for machines whose /tmp is per-user
PORTS_DIR_ENV = "HARNESS_PORTS_DIR"


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


def reservation_dir() -> Path:
    """One directory per machine (not per user), so runs of different users avoid each other too."""
    tmp = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())  # not $TMPDIR: ports are per machine
    d = Path(os.environ.get(PORTS_DIR_ENV) or tmp / "chaos-harness-ports")
    if not d.is_dir():
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RuntimeError(f"cannot make the port reservation directory {d} ({e}); "
                               f"set {PORTS_DIR_ENV} to a writable directory") from e
        try:
            d.chmod(0o1777)  # sticky: anyone may reserve, only an owner may remove its own files
        except OSError:
            pass
    return d


def _owner(f: Path) -> int | None:
    """The pid a reservation file names; None when it is unreadable or half-written (treat as live)."""
    try:
        return int(f.read_text().strip())
    except (OSError, ValueError):
        return None


@contextmanager
def _dir_locked(d: Path) -> Iterator[None]:
    """Check-and-claim is atomic across processes: held only for the few file operations."""
    try:
        # read-only suffices for flock, so a lock file another user created serves us too
        fd = os.open(d / ".lock", os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as e:
        raise RuntimeError(f"cannot use the port reservation directory {d} ({e}); make it "
                           f"writable for this user (chmod 1777) or set {PORTS_DIR_ENV}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def _sweep(d: Path) -> None:
    """Remove reservations whose owner died (a crashed or finished run); once per process."""
    for f in d.glob("*.port"):
        pid = _owner(f)
        if pid is not None and not pid_alive(pid):
            try:
                f.unlink()
            except OSError:
                pass  # another user's file in a sticky dir: it stays reserved, harmlessly


def _reserve(port: int, d: Path) -> bool:
    """Claim `port` for this process unless a live process holds it; caller holds the dir lock."""
    f = d / f"{port}.port"
    if f.exists():
        pid = _owner(f)
        if pid == os.getpid():
            return False  # ours already: _given should have said so, never hand out twice
        if pid is None or pid_alive(pid):
            return False
        try:
            f.unlink()
        except OSError:
            return False
    try:
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    except PermissionError as e:
        raise RuntimeError(f"cannot reserve ports in {d} ({e}); make it writable for this user "
                           f"(chmod 1777) or set {PORTS_DIR_ENV}") from e
    with os.fdopen(fd, "w") as out:
        out.write(f"{os.getpid()}\n")
    return True


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    """A port free now, outside the ephemeral range, reserved for this process machine-wide.

    Never handed out twice by this process, nor to another process while this one lives.
    """
    lo, hi = ephemeral_range()
    ranges = [(r0, r1) for r0, r1 in ((10000, lo - 1), (hi + 1, 65535)) if r1 - r0 > 1000]
    d = reservation_dir()
    with _lock, _dir_locked(d):
        if d not in _swept:
            _sweep(d)
            _swept.add(d)
        for _ in range(2000):
            r0, r1 = _rng.choice(ranges) if ranges else (1024, 65535)
            port = _rng.randint(r0, r1)
            if port not in _given and _free(port, host, kind) and _reserve(port, d):
                _given.add(port)
                return port
    raise RuntimeError("no free loopback port outside the ephemeral range after 2000 tries; "
                       f"stale reservations may fill {d}: remove its *.port files of dead pids")


def release(released: Iterable[int]) -> None:
    """Give back ports whose users are gone (a run's stopped nodes), so a long session does not
    hold thousands of reservations; only this process's own reservations are removed."""
    d = reservation_dir()
    with _lock, _dir_locked(d):
        for port in released:
            _given.discard(port)
            f = d / f"{port}.port"
            if _owner(f) == os.getpid():
                f.unlink(missing_ok=True)


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    return [free_port(host) for _ in range(n)]


def is_listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0
