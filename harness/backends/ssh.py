"""The ssh backend: Jepsen's control-node model, with paramiko.

Nodes run on hosts reached over SSH (key auth only; host keys checked against an explicit
known_hosts file, never accepted blindly). For each node the backend:

- uploads the node's code once per host (``nodes/`` plus the module's own package, as one
  tar over SFTP into ``<workdir>/code/<content hash>``: unchanged code is never re-sent);
- writes the node's config with its data dir moved to ``<workdir>/runs/<run>/<node>/data``;
- starts ``<python> -m <module> --config ...`` under ``setsid nohup`` (its own process
  group, detached from the SSH session) with a pid file; output goes to a remote log;
- kills with ``kill -9``, pauses with ``kill -STOP`` / ``kill -CONT`` (the whole group);
  a restart reuses the remote data dir, so state survives like a local restart;
- fetches files from the data dir over SFTP, and the log into the run dir on every stop,
  kill, failed start-up check, and at ``close`` (which also copies the whole remote data
  dir back and then removes the run's remote files).

Hosts come from the JSON file named by ``HARNESS_SSH_HOSTS`` (see docs/backends.md). With
no such file the backend starts its own sshd on a loopback port (``LoopbackSshd``: its own
host key, client key and known_hosts in a temp dir) and runs nodes there with this
interpreter: a real SSH round trip on one machine, used by the tests and ``--backend ssh``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import getpass
import hashlib
import io
import json
import os
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.base import BackendError, NodeSpec, copy_local
from harness.backends.docker import run_dir_of
from harness.optional import require

PROJECT_ROOT = Path(__file__).resolve().parents[2]
_live: weakref.WeakSet[SshBackend] = weakref.WeakSet()


@dataclass(frozen=True)
class SshHost:
    """One host nodes may run on, and how to log in to it."""

    host: str
    port: int = 22
    user: str = field(default_factory=getpass.getuser)
    key: Path | None = None  # private key file; None: paramiko's default key files
    known_hosts: Path | None = None  # must list the host's key; None: ~/.ssh/known_hosts
    python: str = "python3"  # the remote interpreter (with the node's dependencies)
    workdir: str = "/tmp/chaos-harness"  # remote root for code, configs, data, logs

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SshHost:
        kw = dict(d)
        for k in ("key", "known_hosts"):
            if kw.get(k):
                kw[k] = Path(os.path.expanduser(kw[k]))
        return cls(**kw)

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


def load_hosts(path: str | Path) -> list[SshHost]:
    """``{"hosts": [{"host": ..., "port": ..., "user": ..., "key": ..., ...}]}``."""
    try:
        doc = json.loads(Path(path).read_text())
        hosts = [SshHost.from_json(h) for h in doc["hosts"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BackendError(f"cannot read ssh hosts from {path}: {e}; expected "
                           '{"hosts": [{"host": "10.0.0.5", "user": "jepsen", "key": "~/.ssh/id_ed25519"}]}'
                           ) from None
    if not hosts:
        raise BackendError(f"{path} lists no hosts")
    return hosts


# ---- one host's connection -------------------------------------------------------------------
MAX_SHELLS = 6  # sessions per connection; sshd's default MaxSessions is 10 (SFTP takes one)


class RemoteShell:
    """One ``sh`` on the host, fed commands on stdin; each runs in a subshell (so ``cd`` and
    ``exit`` stay local), stdin from /dev/null, and ends with a marker line carrying ``$?``."""

    def __init__(self, client: Any) -> None:
        transport = client.get_transport()
        assert transport is not None
        self.chan = transport.open_session(timeout=30)
        self.chan.set_combine_stderr(True)
        self.chan.exec_command("exec sh")
        self.out = self.chan.makefile("rb")

    def run(self, cmd: str, timeout_s: float) -> tuple[int, str]:
        tok = secrets.token_hex(8)
        self.chan.settimeout(timeout_s)
        self.chan.sendall(f"( {cmd}\n) </dev/null 2>&1; printf '\\n{tok} %s\\n' $?\n".encode())
        lines: list[str] = []
        while True:
            raw = self.out.readline()
            if not raw:
                raise EOFError("the remote shell went away")
            line = raw.decode(errors="replace")
            if line.startswith(tok + " "):
                text = "".join(lines)
                return int(line.split()[1]), text[:-1] if text.endswith("\n") else text
            lines.append(line)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.chan.close()


class HostConn:
    """A paramiko connection to one host: commands, SFTP (serialized: not thread-safe), code."""

    def __init__(self, host: SshHost, connect_timeout_s: float = 10.0) -> None:
        require("ssh", "the ssh backend", "or use --backend local")
        import paramiko

        self.host = host
        self.client = paramiko.SSHClient()
        kh = host.known_hosts or Path.home() / ".ssh" / "known_hosts"
        if not kh.exists():
            raise BackendError(f"known_hosts file {kh} for {host.label} does not exist; add the host's "
                               f"key with: ssh-keyscan -p {host.port} {host.host} >> {kh}")
        self.client.load_host_keys(str(kh))
        self.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            self._connect(connect_timeout_s, kh)
        except BaseException:
            self.client.close()  # no half-open transport thread left behind
            raise
        transport = self.client.get_transport()
        assert transport is not None
        transport.set_keepalive(15)
        self._sftp_lock = threading.Lock()
        self._sftp: Any = None
        self._code_lock = threading.Lock()
        self._code: dict[str, str] = {}  # code hash -> remote dir
        self._shells_cv = threading.Condition()
        self._idle: list[RemoteShell] = []
        self._nshells = 0

    def _connect(self, connect_timeout_s: float, kh: Path) -> None:
        import paramiko

        host = self.host
        try:
            self.client.connect(host.host, port=host.port, username=host.user,
                                key_filename=str(host.key) if host.key else None,
                                look_for_keys=host.key is None, allow_agent=False,
                                timeout=connect_timeout_s, banner_timeout=connect_timeout_s,
                                auth_timeout=connect_timeout_s)
        except paramiko.BadHostKeyException as e:
            raise BackendError(f"{host.label}: host key does not match {kh} ({e}); if the host was "
                               "re-installed, remove its old line from that file") from None
        except paramiko.SSHException as e:
            raise BackendError(f"cannot log in to {host.label}: {e}. Is its key in {kh} "
                               f"(ssh-keyscan -p {host.port} {host.host} >> {kh}) and our public key "
                               "in the user's authorized_keys?") from None
        except OSError as e:
            raise BackendError(f"cannot reach {host.label}: {e}") from None

    def run(self, cmd: str, timeout_s: float = 60.0, check: bool = True) -> tuple[int, str]:
        """Run ``cmd`` in a subshell of a kept-open remote ``sh``; (exit code, stdout+stderr).

        A fresh SSH exec per command costs a session set-up plus the login shell's rc files
        (130 ms here, 100 of them a pyenv ``.bashrc``); a kept shell answers in ~2 ms, which is
        what makes a pause or a kill land when the nemesis says so.
        """
        sh = self._shell()
        try:
            rc, text = sh.run(cmd, timeout_s)
        except BaseException as e:
            sh.close()  # in an unknown state: never reuse it
            with self._shells_cv:
                self._nshells -= 1
                self._shells_cv.notify()
            if isinstance(e, (OSError, EOFError, TimeoutError)):
                raise BackendError(f"{self.host.label}: {cmd[:80]!r} failed: {e!r}") from None
            raise
        with self._shells_cv:
            self._idle.append(sh)
            self._shells_cv.notify()
        if check and rc != 0:
            raise BackendError(f"{self.host.label}: {cmd[:120]!r} exited {rc}: {text[-1500:]}")
        return rc, text

    def _shell(self) -> RemoteShell:
        with self._shells_cv:
            while not self._idle and self._nshells >= MAX_SHELLS:
                self._shells_cv.wait()
            if self._idle:
                return self._idle.pop()
            self._nshells += 1
        try:
            return RemoteShell(self.client)
        except BaseException:
            with self._shells_cv:
                self._nshells -= 1
                self._shells_cv.notify()
            raise

    @contextlib.contextmanager
    def sftp(self) -> Any:
        with self._sftp_lock:
            if self._sftp is None:
                self._sftp = self.client.open_sftp()
            yield self._sftp

    def put_bytes(self, data: bytes, remote: str) -> None:
        with self.sftp() as s:
            s.putfo(io.BytesIO(data), remote)

    def get_file(self, remote: str, dest: Path) -> bool:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        with self.sftp() as s:
            try:
                s.get(remote, str(tmp))
            except FileNotFoundError:
                tmp.unlink(missing_ok=True)
                return False
        tmp.replace(dest)
        return True

    def get_tree(self, remote: str, dest: Path) -> int:
        """Copy a remote directory tree into ``dest``; the number of files copied."""
        n = 0
        with self.sftp() as s:
            try:
                entries = s.listdir_attr(remote)
            except FileNotFoundError:
                return 0
            dest.mkdir(parents=True, exist_ok=True)
            todo = [(remote, dest, entries)]
            while todo:
                rdir, ldir, ents = todo.pop()
                for e in ents:
                    r, ll = f"{rdir}/{e.filename}", ldir / e.filename
                    if stat.S_ISDIR(e.st_mode or 0):
                        ll.mkdir(exist_ok=True)
                        todo.append((r, ll, s.listdir_attr(r)))
                    elif stat.S_ISREG(e.st_mode or 0):
                        s.get(r, str(ll))
                        n += 1
        return n

    def ensure_code(self, bundle: CodeBundle) -> str:
        """The remote dir holding ``bundle``; uploaded once per host and content hash."""
        with self._code_lock:
            if bundle.digest in self._code:
                return self._code[bundle.digest]
            d = f"{self.host.workdir}/code/{bundle.digest}"
            q = shlex.quote(d)
            rc, _ = self.run(f"test -f {q}/.complete", check=False)
            if rc != 0:
                tmp = f"{d}.{secrets.token_hex(4)}"
                self.run(f"mkdir -p {shlex.quote(tmp)}")
                self.put_bytes(bundle.tar_gz, f"{tmp}.tgz")
                qt = shlex.quote(tmp)
                self.run(f"tar -xzf {qt}.tgz -C {qt} && rm -f {qt}.tgz && touch {qt}/.complete && "
                         f"(mv -T {qt} {q} 2>/dev/null || rm -rf {qt})")
            self._code[bundle.digest] = d
            return d

    def close(self) -> None:
        with self._shells_cv:
            for sh in self._idle:
                sh.close()
            self._idle.clear()
        with contextlib.suppress(Exception):
            if self._sftp is not None:
                self._sftp.close()
        self.client.close()


# ---- what gets uploaded ------------------------------------------------------------------------
@dataclass(frozen=True)
class CodeBundle:
    digest: str
    tar_gz: bytes
    files: int


def code_bundle(module: str, root: Path = PROJECT_ROOT) -> CodeBundle:
    """``nodes/`` (every reference node's runtime) plus the module's own package directory
    and its ancestors' ``__init__.py``: what ``python -m module`` imports, not the whole tree."""
    parts = module.split(".")
    files: set[Path] = {p for p in (root / "nodes").rglob("*") if p.is_file()}
    pkg = root.joinpath(*parts[:-1]) if len(parts) > 1 else root
    files |= {p for p in pkg.glob("*") if p.is_file()}
    for i in range(1, len(parts)):
        init = root.joinpath(*parts[:i]) / "__init__.py"
        if init.exists():
            files.add(init)
    files = {p for p in files if "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")}
    h = hashlib.sha256()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tf:
        for p in sorted(files):
            rel = p.relative_to(root).as_posix()
            data = p.read_bytes()
            h.update(rel.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tf.addfile(info, io.BytesIO(data))
    return CodeBundle(h.hexdigest()[:16], buf.getvalue(), len(files))


# ---- the backend -------------------------------------------------------------------------------
@dataclass
class RemoteNode:
    spec: NodeSpec
    conn: HostConn
    dir: str  # <workdir>/runs/<run>/<node>
    pid: int = 0

    @property
    def data(self) -> str:
        return f"{self.dir}/data"

    @property
    def log(self) -> str:
        return f"{self.dir}/log.txt"


def _alive_test(pid: int) -> str:
    """Shell: true while ``pid`` exists and is not a zombie."""
    return (f"s=$(sed 's/.*) //' /proc/{pid}/stat 2>/dev/null | cut -c1) && "
            f'[ -n "$s" ] && [ "$s" != Z ]')


class SshBackend:
    """Nodes on SSH hosts, assigned round-robin in the order they first start."""

    name = "ssh"

    def __init__(self, hosts: list[SshHost], stop_grace_s: float = 3.0,
                 sshd: LoopbackSshd | None = None) -> None:
        if not hosts:
            raise BackendError("the ssh backend needs at least one host")
        self.hosts = hosts
        self.stop_grace_s = stop_grace_s
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"
        self.conns: dict[SshHost, HostConn] = {}
        self.nodes: dict[str, RemoteNode] = {}
        self.paused: set[str] = set()
        self._sshd = sshd  # our own loopback sshd, stopped at close
        self._lock = threading.Lock()
        self._assigned = 0
        self._bundles: dict[str, CodeBundle] = {}
        self._shipped: set[tuple[SshHost, str]] = set()
        self._ship_lock = threading.Lock()
        self._closed = False
        _live.add(self)

    def _conn(self, host: SshHost) -> HostConn:
        with self._lock:
            if host not in self.conns:
                self.conns[host] = HostConn(host)
                self.conns[host].run(f"mkdir -p {shlex.quote(self._run_dir(host))} && echo "
                                     f"{shlex.quote(socket.gethostname())}:{os.getpid()} > "
                                     f"{shlex.quote(self._run_dir(host))}/owner")
            return self.conns[host]

    def _bundle(self, module: str) -> CodeBundle:
        """One code version per run: packed once, however often nodes restart."""
        with self._lock:
            if module not in self._bundles:
                self._bundles[module] = code_bundle(module)
            return self._bundles[module]

    def _ship_files(self, value: Any, run_dir: Path, conn: HostConn) -> Any:
        """The config with every file it names inside the run dir (DRiP's TLS material in
        ``<run>/tls``) uploaded once per host to the remote run dir, and renamed to it."""
        if isinstance(value, dict):
            return {k: self._ship_files(v, run_dir, conn) for k, v in value.items()}
        if isinstance(value, list):
            return [self._ship_files(v, run_dir, conn) for v in value]
        if not (isinstance(value, str) and value.startswith("/")):
            return value
        local = Path(value)
        if not local.is_file() or run_dir not in local.resolve().parents:
            return value
        remote = f"{self._run_dir(conn.host)}/files/{local.resolve().relative_to(run_dir).as_posix()}"
        with self._ship_lock:  # held through the upload: no node starts before its file is there
            if (conn.host, remote) not in self._shipped:
                conn.run(f"mkdir -p {shlex.quote(remote.rsplit('/', 1)[0])}")
                conn.put_bytes(local.read_bytes(), remote)
                with conn.sftp() as s:
                    s.chmod(remote, local.stat().st_mode & 0o777)
                self._shipped.add((conn.host, remote))
        return remote

    def _run_dir(self, host: SshHost) -> str:
        return f"{host.workdir}/runs/{self.run_id}"

    def _node(self, node_id: str) -> RemoteNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise BackendError(f"unknown node {node_id!r}; known: {sorted(self.nodes)}") from None

    # ---- start --------------------------------------------------------------------------
    async def start(self, node: NodeSpec) -> None:
        await asyncio.to_thread(self._start, node)

    def _start(self, spec: NodeSpec) -> None:
        if self._closed:
            raise BackendError("this ssh backend is closed; make a new one")
        rn = self.nodes.get(spec.id)
        if rn is not None and self._alive(rn):
            raise BackendError(f"{spec.id} is already running on {rn.conn.host.label} "
                               f"(pid {rn.pid}); kill or stop it first")
        if rn is None:
            with self._lock:
                host = self.hosts[self._assigned % len(self.hosts)]
                self._assigned += 1
            rn = RemoteNode(spec, self._conn(host), f"{self._run_dir(host)}/{spec.id}")
            self.nodes[spec.id] = rn
        rn.spec = spec
        spec.data_dir.mkdir(parents=True, exist_ok=True)
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = list(spec.argv)
        module = argv[argv.index("-m") + 1] if "-m" in argv else None
        code = rn.conn.ensure_code(self._bundle(module)) if module else rn.conn.host.workdir
        cfg_remote = f"{rn.dir}/config.json"
        rn.conn.run(f"mkdir -p {shlex.quote(rn.data)}")
        if spec.config_path.exists():
            cfg = json.loads(spec.config_path.read_text())
            cfg["data_dir"] = rn.data
            cfg = self._ship_files(cfg, run_dir_of(spec).resolve(), rn.conn)
            rn.conn.put_bytes(json.dumps(cfg, indent=1).encode(), cfg_remote)
        argv = [rn.conn.host.python if a == "{python}" else
                a.replace(str(spec.config_path), cfg_remote) for a in argv]
        env = {**spec.env, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        pidf = shlex.quote(f"{rn.dir}/pid")
        # the background job is the node itself (env, setsid, nohup all exec), so $! is its pid
        # and, after setsid, its process group: what kill/STOP/CONT address
        cmd = (f"cd {shlex.quote(code)} || exit 97; env {envs} setsid nohup {shlex.join(argv)} "
               f">> {shlex.quote(rn.log)} 2>&1 < /dev/null & echo $! > {pidf}; cat {pidf}")
        _, out = rn.conn.run(cmd)
        rn.pid = int(out.strip().splitlines()[-1])
        self.paused.discard(spec.id)
        if self._closed:  # closed while we were starting it (Ctrl-C during start-up)
            self._signal_and_wait(rn, ["KILL"], 2.0)
            raise BackendError("this ssh backend was closed during start-up")

    # ---- node control -------------------------------------------------------------------
    def _alive(self, rn: RemoteNode) -> bool:
        return rn.pid > 0 and rn.conn.run(_alive_test(rn.pid), check=False)[0] == 0

    def _signal_and_wait(self, rn: RemoteNode, sigs: list[str], wait_s: float) -> bool:
        """Signal the node's group; True when it is gone within ``wait_s`` (0: do not wait)."""
        kills = "; ".join(f"kill -s {s} -- -{rn.pid} 2>/dev/null" for s in sigs)
        tries = int(wait_s / 0.01)
        wait = (f"; i=0; while {_alive_test(rn.pid)}; do i=$((i+1)); [ $i -gt {tries} ] && exit 1; "
                "sleep 0.01; done" if tries else "")
        return rn.conn.run(f"{kills}{wait}; true" if not tries else f"{kills}{wait}",
                           check=False)[0] == 0

    async def kill(self, node_id: str) -> None:
        await asyncio.to_thread(self._kill, node_id)

    def _kill(self, node_id: str) -> None:
        rn = self._node(node_id)
        if rn.pid and not self._signal_and_wait(rn, ["KILL"], 10.0):
            raise BackendError(f"{node_id} (pid {rn.pid} on {rn.conn.host.label}) survived kill -9")
        self.paused.discard(node_id)
        self._fetch_log(rn)

    async def stop(self, node_id: str) -> None:
        await asyncio.to_thread(self._stop, node_id)

    def _stop(self, node_id: str) -> None:
        rn = self._node(node_id)
        if rn.pid and not self._signal_and_wait(rn, ["CONT", "TERM"], self.stop_grace_s):
            self._kill(node_id)
        self.paused.discard(node_id)
        self._fetch_log(rn)

    async def pause(self, node_id: str) -> None:
        rn = self._node(node_id)
        await asyncio.to_thread(self._signal_and_wait, rn, ["STOP"], 0)
        self.paused.add(node_id)

    async def resume(self, node_id: str) -> None:
        rn = self._node(node_id)
        await asyncio.to_thread(self._signal_and_wait, rn, ["CONT"], 0)
        self.paused.discard(node_id)

    def is_running(self, node_id: str) -> bool:
        rn = self.nodes.get(node_id)
        if rn is None:
            return False
        alive = self._alive(rn)
        if not alive:
            self._fetch_log(rn)  # so a node that died at start-up shows why, in the run dir
        return alive

    def remote_pid(self, node_id: str) -> int:
        return self._node(node_id).pid

    def host_of(self, node_id: str) -> SshHost:
        return self._node(node_id).conn.host

    # ---- files --------------------------------------------------------------------------
    def _fetch_log(self, rn: RemoteNode) -> None:
        with contextlib.suppress(Exception):
            rn.conn.get_file(rn.log, rn.spec.log_path)

    async def fetch(self, node_id: str, name: str, dest: Path) -> bool:
        rn = self._node(node_id)
        if self._closed:  # the remote copy is gone; close brought the data dir home
            return copy_local(rn.spec.data_dir / name, dest)
        return await asyncio.to_thread(rn.conn.get_file, f"{rn.data}/{name}", dest)

    async def fetch_log(self, node_id: str) -> Path:
        """Bring the node's remote log into its ``log_path`` now."""
        rn = self._node(node_id)
        await asyncio.to_thread(self._fetch_log, rn)
        return rn.spec.log_path

    # ---- tear-down ----------------------------------------------------------------------
    async def close(self) -> None:
        """Stop every node, bring logs and data dirs home, remove the run's remote files."""
        if self._closed:
            return
        await asyncio.gather(*(self.stop(n) for n in list(self.nodes)), return_exceptions=True)
        for rn in list(self.nodes.values()):
            with contextlib.suppress(Exception):
                await asyncio.to_thread(rn.conn.get_tree, rn.data, rn.spec.data_dir)
        await asyncio.to_thread(self.kill_all_now, True)

    def kill_all_now(self, remove_remote: bool = True) -> None:
        """Synchronous, for atexit too: kill -9 every node group, drop remote run files."""
        self._closed = True
        for rn in list(self.nodes.values()):
            if rn.pid:
                with contextlib.suppress(Exception):
                    self._signal_and_wait(rn, ["CONT", "KILL"], 2.0)
        for host, conn in list(self.conns.items()):
            with contextlib.suppress(Exception):
                if remove_remote:
                    conn.run(f"rm -rf {shlex.quote(self._run_dir(host))}", check=False)
            conn.close()
        self.conns.clear()
        if self._sshd is not None:
            self._sshd.close()


# ---- a real sshd on a loopback port -----------------------------------------------------------
class LoopbackSshd:
    """Debian's sshd on 127.0.0.1:<free port>, with its own host key, a client key pair,
    authorized_keys and known_hosts, all in ``dir``. Killed with us (``osutil.procs``:
    PDEATHSIG, close, atexit), so start it from a long-lived thread, not ``to_thread``."""

    def __init__(self, dir: Path | str | None = None, user: str | None = None,
                 python: str = sys.executable, sshd: str = "/usr/sbin/sshd") -> None:
        self._own_dir = dir is None
        self.dir = Path(dir or tempfile.mkdtemp(prefix="chaos-harness-sshd-"))
        self.user = user or getpass.getuser()
        self.python = python
        self.sshd = sshd
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def host(self, workdir: str | None = None) -> SshHost:
        return SshHost("127.0.0.1", self.port, self.user, self.dir / "client_key",
                       self.dir / "known_hosts", self.python,
                       workdir or str(self.dir / "remote"))

    def start(self, timeout_s: float = 10.0) -> LoopbackSshd:
        from osutil import procs
        from osutil.ports import free_port, is_listening

        if not Path(self.sshd).exists():
            raise BackendError(f"{self.sshd} not found: run scripts/setup-sshd "
                               "(apt-get install openssh-server)")
        d = self.dir
        (d / "owner").write_text(f"{socket.gethostname()}:{os.getpid()}")  # for harness clean
        for key in ("host_key", "client_key"):
            if not (d / key).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key,
                                "-f", str(d / key)], check=True)
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        os.chmod(d / "authorized_keys", 0o600)
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
        last = ""
        for _ in range(3):
            self.port = free_port()
            host_pub = (d / "host_key.pub").read_text().split()
            (d / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
            (d / "sshd_config").write_text("\n".join([
                f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {d / 'host_key'}",
                f"PidFile {d / 'sshd.pid'}", f"AuthorizedKeysFile {d / 'authorized_keys'}",
                "PubkeyAuthentication yes", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
                "StrictModes no", "UsePAM no", "Subsystem sftp internal-sftp",
                f"AllowUsers {self.user}", "MaxSessions 100", "MaxStartups 100",
                "LogLevel ERROR", ""]))
            log = open(d / "sshd.log", "ab")  # noqa: SIM115 - the child owns it
            try:
                self.proc = procs.spawn([self.sshd, "-D", "-e", "-f", str(d / "sshd_config")],
                                        stdout=log, stderr=subprocess.STDOUT)
            finally:
                log.close()
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and self.proc.poll() is None:
                if is_listening(self.port):
                    _live_sshd.add(self)
                    return self
                time.sleep(0.02)
            self.close()
            last = (d / "sshd.log").read_text(errors="replace")[-1500:]
        raise BackendError(f"sshd did not come up on 127.0.0.1; its log:\n{last}")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # let closed sessions' sshd children finish first: killed orphans would be left
            # as zombies wherever PID 1 does not reap (sandboxes, containers)
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
            deadline = time.monotonic() + 2.0
            with contextlib.suppress(OSError):
                while kids.read_text().strip() and time.monotonic() < deadline:
                    time.sleep(0.02)
        if self.proc is not None:
            from osutil import procs

            procs.stop(self.proc, grace_s=1.0)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LoopbackSshd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


_live_sshd: weakref.WeakSet[LoopbackSshd] = weakref.WeakSet()


def from_env() -> SshBackend:
    """Hosts from ``HARNESS_SSH_HOSTS`` (a JSON file), else our own loopback sshd."""
    path = os.environ.get("HARNESS_SSH_HOSTS")
    if path:
        return SshBackend(load_hosts(path))
    sshd = LoopbackSshd().start()
    return SshBackend([sshd.host()], sshd=sshd)


@atexit.register
def _kill_leftovers() -> None:
    for b in list(_live):
        if not b._closed:
            with contextlib.suppress(Exception):
                b.kill_all_now()
    for s in list(_live_sshd):
        with contextlib.suppress(Exception):
            s.close()
