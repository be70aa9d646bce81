"""The docker backend: one container per node, through the Docker SDK.

What a node sees is what the local backend gives it, so nodes need no change:

- the project root is bind-mounted read-only at the same path (cwd of every node), the
  run dir (configs, logs, run-wide files such as TLS material) read-write at the same
  path, and the node's data dir is a named Docker *volume* mounted at the config's
  ``data_dir`` path: restarting the container keeps the state, and ``close`` copies each
  volume back into the run dir before removing it (so the run dir ends up as complete as
  with the local backend);
- ``{python}`` in the argv is the image's ``python3`` (the node image, see ``images/``);
- stdout/stderr are appended to the node's ``log.txt`` by the container's shell, so the
  log is live in the run dir, and start-up failures show in the cluster's error message.

Networking, chosen by the backend name:

- ``docker`` (host network): containers share the host's network namespace, so nodes
  listen on 127.0.0.1 and reach peers through Toxiproxy on loopback exactly as local nodes
  do. Works with the cluster unchanged.
- ``docker-bridge``: a bridge network per run. The node listens on 0.0.0.0 inside its
  container; each of its ports is published on the host's 127.0.0.1 at the same number (so
  the harness's admin/client addresses are unchanged); peer addresses on 127.0.0.1 are
  rewritten to the bridge's gateway, where the proxies must listen (``proxy_host``).
  See docs/backends.md.

Everything carries the label ``chaos-harness.run=<run id>`` (plus the owner's host:pid),
and is removed by ``close``, by an atexit hook (failures, Ctrl-C), and, after a harness
killed with -9, by ``harness clean`` (``harness.backends.clean``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import io
import json
import os
import re
import secrets
import socket
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from harness.backends.base import BackendError, NodeSpec, copy_local
from harness.optional import require

LABEL_RUN = "chaos-harness.run"
LABEL_OWNER = "chaos-harness.owner"  # "<hostname>:<pid>" of the harness that made it
LABEL_NODE = "chaos-harness.node"
LABEL_RUN_DIR = "chaos-harness.run-dir"
LABEL_SPEC = "chaos-harness.spec"  # hash of the NodeSpec: a restart reuses the container
NETWORK_MODES = ("host", "bridge")
#: where the harness's own code lives (mounted read-only into every node container)
CODE_ROOT = Path(__file__).resolve().parents[2]

_live: weakref.WeakSet[DockerBackend] = weakref.WeakSet()


def connect(timeout_s: float = 30.0) -> Any:
    """A Docker client that has answered a ping, or a BackendError saying what to do."""
    require("docker", "the docker backend", "or use --backend local")
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
        return client
    except docker.errors.DockerException as e:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise BackendError(
            f"no Docker engine answers at {where} ({e}). Run scripts/setup-docker (as root it "
            "installs Debian's docker.io and starts dockerd), or set DOCKER_HOST, or use "
            "--backend local") from None


def run_dir_of(node: NodeSpec) -> Path:
    """The run dir (``<run>/nodes/<id>/log.txt``), else the node's own directory."""
    nd = node.log_path.parent
    return nd.parent.parent if nd.parent.name == "nodes" else nd


def owner_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _safe(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "_", name)


class DockerBackend:
    """Nodes as containers. ``network``: ``host`` (default) or ``bridge``; see the module doc."""

    name = "docker"

    def __init__(self, network: str = "host", image: str | None = None, client: Any = None,
                 stop_grace_s: float = 3.0) -> None:
        if network not in NETWORK_MODES:
            raise BackendError(f"unknown docker network mode {network!r}; use one of {NETWORK_MODES}")
        self.client = client or connect()
        if image is None:
            from harness.backends.images.build import ensure_image

            image = ensure_image(self.client)
        self.image = image
        self.network = network
        self.stop_grace_s = stop_grace_s
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        self.labels = {LABEL_RUN: self.run_id, LABEL_OWNER: owner_tag()}
        self.containers: dict[str, Any] = {}
        self.specs: dict[str, NodeSpec] = {}
        self.volumes: dict[str, Any] = {}
        self.synced: set[str] = set()  # nodes whose volume is copied back into the run dir
        self._net: Any = None
        self._net_lock = threading.Lock()
        self._gateway: str | None = None
        self._closed = False
        _live.add(self)

    # ---- names and the bridge network ---------------------------------------------------
    def _name(self, node_id: str, what: str = "") -> str:
        return _safe(f"chaos-harness-{self.run_id}-{node_id}{what}")

    @property
    def proxy_host(self) -> str:
        """Where nodes reach the host's proxies: 127.0.0.1, or the run's bridge gateway."""
        if self.network == "host":
            return "127.0.0.1"
        self._ensure_network()
        assert self._gateway is not None
        return self._gateway

    def direct_host(self, node_id: str) -> str | None:
        """Where the host reaches a started node's ports directly: its container's address on
        the run's bridge (a published port's proxy would rewrite the sender, and UDP nodes
        know their peers by sender address: faults.udp_relay's ``retarget``); None on the
        host network, where 127.0.0.1 is direct."""
        if self.network == "host":
            return None
        c = self._container(node_id)
        c.reload()
        net = (c.attrs.get("NetworkSettings") or {}).get("Networks") or {}
        ip = (net.get(self._net.name) or {}).get("IPAddress") if self._net is not None else None
        if not ip:
            raise BackendError(f"{node_id} has no address on the run's bridge "
                               f"({self._net.name if self._net else 'no network'}); is it running?")
        return str(ip)

    def _ensure_network(self, run_dir: str | None = None) -> None:
        with self._net_lock:  # nodes start concurrently: one network per run
            if self._net is not None:
                return
            labels = {**self.labels, **({LABEL_RUN_DIR: run_dir} if run_dir else {})}
            net = self.client.networks.create(_safe(f"chaos-harness-{self.run_id}"),
                                              driver="bridge", labels=labels, check_duplicate=True)
            net.reload()
            self._gateway = net.attrs["IPAM"]["Config"][0]["Gateway"]
            self._net = net

    # ---- start ------------------------------------------------------------------------
    async def start(self, node: NodeSpec) -> None:
        await asyncio.to_thread(self._start, node)

    def _start(self, node: NodeSpec) -> None:
        if self._closed:
            raise BackendError("this docker backend is closed; make a new one")
        old = self.containers.get(node.id)
        if old is not None:
            old.reload()
            if old.status in ("running", "paused", "restarting"):
                raise BackendError(f"{node.id} is already running (container {old.name}); "
                                   "kill or stop it first")
        node.data_dir.mkdir(parents=True, exist_ok=True)
        node.log_path.parent.mkdir(parents=True, exist_ok=True)
        sig = self._spec_hash(node)
        if old is not None and old.labels.get(LABEL_SPEC) != sig:
            old.remove(force=True)
            old = None
        c = old or self._create(node, sig)
        self.containers[node.id] = c
        self.specs[node.id] = node
        self.synced.discard(node.id)
        if self._closed:  # closed while we were creating it (Ctrl-C during start-up)
            c.remove(force=True)
            raise BackendError("this docker backend was closed during start-up")
        c.start()

    @staticmethod
    def _spec_hash(node: NodeSpec) -> str:
        blob = json.dumps([node.argv, str(node.config_path), str(node.data_dir), str(node.log_path),
                           str(node.cwd), sorted(node.env.items())])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @staticmethod
    def _run_dir(node: NodeSpec) -> str:
        return str(run_dir_of(node))

    def _volume(self, node: NodeSpec) -> Any:
        if node.id not in self.volumes:
            self.volumes[node.id] = self.client.volumes.create(
                self._name(node.id, "-data"),
                labels={**self.labels, LABEL_NODE: node.id, LABEL_RUN_DIR: self._run_dir(node)})
        return self.volumes[node.id]

    def _create(self, node: NodeSpec, sig: str) -> Any:
        from docker.types import Mount

        argv = ["python3" if a == "{python}" else a for a in node.argv]
        # the whole run dir: configs may name run-wide files (DRiP's TLS material in <run>/tls)
        binds = {Path(self._run_dir(node)).resolve(), node.config_path.parent.resolve(),
                 node.log_path.parent.resolve()}
        binds = {d for d in binds if not any(o != d and o in d.parents for o in binds)}
        # the node's cwd (the project root, or where --node-command was typed) and, for
        # {python} -m nodes.<p> from elsewhere, the project's code on PYTHONPATH
        code = {node.cwd.resolve(), CODE_ROOT}
        mounts = [Mount(str(d), str(d), type="bind", read_only=True) for d in sorted(code)
                  if not any(o != d and o in d.parents for o in code)]
        mounts += [Mount(str(d), str(d), type="bind") for d in sorted(binds)]
        mounts.append(Mount(str(node.data_dir), self._volume(node).name, type="volume"))
        kwargs: dict[str, Any] = {"network_mode": "host"}
        if self.network == "bridge":
            self._ensure_network(self._run_dir(node))
            argv, ports = self._bridge_config(node, argv)
            kwargs = {"network": self._net.name,
                      "ports": {f"{p}/{proto}": ("127.0.0.1", p) for p in ports
                                for proto in ("tcp", "udp")}}
        env = {**node.env, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "HARNESS_LOG": str(node.log_path), "HARNESS_DATA": str(node.data_dir)}
        if node.cwd.resolve() != CODE_ROOT:
            env["PYTHONPATH"] = str(CODE_ROOT)
        # the shell appends the node's output to its log in the run dir, then becomes the node;
        # a non-root harness gets files it owns (the volume is root's until chowned)
        script = 'exec "$@" >>"$HARNESS_LOG" 2>&1'
        if os.geteuid() != 0:
            env.update(HARNESS_UID=str(os.geteuid()), HARNESS_GID=str(os.getegid()))
            script = ('chown "$HARNESS_UID:$HARNESS_GID" "$HARNESS_DATA" && exec setpriv '
                      '--reuid="$HARNESS_UID" --regid="$HARNESS_GID" --clear-groups "$@" '
                      '>>"$HARNESS_LOG" 2>&1')
        return self.client.containers.create(
            self.image, ["sh", "-c", script, "node", *argv], name=self._name(node.id),
            working_dir=str(node.cwd), environment=env, mounts=mounts, init=True,
            labels={**self.labels, LABEL_NODE: node.id, LABEL_SPEC: sig,
                    LABEL_RUN_DIR: self._run_dir(node)},
            stop_signal="SIGTERM", **kwargs)

    def _bridge_config(self, node: NodeSpec, argv: list[str]) -> tuple[list[str], list[int]]:
        """Write the in-container config (listen on all interfaces, peers via the gateway)."""
        cfg = json.loads(node.config_path.read_text())
        gw = self.proxy_host
        cfg["host"] = "0.0.0.0"
        for peer in cfg.get("peers", {}).values():
            for k, v in peer.items():
                if isinstance(v, str) and v.startswith("127.0.0.1:"):
                    peer[k] = gw + v[len("127.0.0.1"):]
        path = node.config_path.with_name("config.docker-bridge.json")
        path.write_text(json.dumps(cfg, indent=1))
        argv = [a.replace(str(node.config_path), str(path)) for a in argv]
        return argv, [int(p) for p in cfg.get("ports", {}).values()]

    # ---- node control -------------------------------------------------------------------
    def _container(self, node_id: str) -> Any:
        try:
            return self.containers[node_id]
        except KeyError:
            raise BackendError(f"unknown node {node_id!r}; known: {sorted(self.containers)}") from None

    def _status(self, node_id: str) -> str:
        import docker.errors

        c = self._container(node_id)
        try:
            c.reload()
        except docker.errors.NotFound:
            return "removed"
        return str(c.status)

    async def kill(self, node_id: str) -> None:
        await asyncio.to_thread(self._kill, node_id)

    def _kill(self, node_id: str) -> None:
        import docker.errors

        c = self._container(node_id)
        status = self._status(node_id)
        if status not in ("running", "paused", "restarting"):
            return
        # SIGKILL while frozen, then thaw: the node never runs another instruction
        with contextlib.suppress(docker.errors.APIError):
            c.kill(signal="SIGKILL")
        if self._status(node_id) == "paused":
            with contextlib.suppress(docker.errors.APIError):
                c.unpause()
        c.wait(timeout=30)

    async def stop(self, node_id: str) -> None:
        await asyncio.to_thread(self._stop, node_id)

    def _stop(self, node_id: str) -> None:
        c = self._container(node_id)
        status = self._status(node_id)
        if status == "paused":
            c.unpause()
        elif status not in ("running", "restarting"):
            return
        c.stop(timeout=max(1, round(self.stop_grace_s)))

    async def pause(self, node_id: str) -> None:
        await asyncio.to_thread(self._pause, node_id)

    def _pause(self, node_id: str) -> None:
        if self._status(node_id) == "running":
            self._container(node_id).pause()

    async def resume(self, node_id: str) -> None:
        await asyncio.to_thread(self._resume, node_id)

    def _resume(self, node_id: str) -> None:
        if self._status(node_id) == "paused":
            self._container(node_id).unpause()

    def is_running(self, node_id: str) -> bool:
        """Running or paused (a paused process still exists, as with the local backend)."""
        if node_id not in self.containers:
            return False
        return self._status(node_id) in ("running", "paused", "restarting")

    def container_pid(self, node_id: str) -> int:
        """The node's init process as the host sees it (0 when it is not running)."""
        c = self._container(node_id)
        c.reload()
        return int(c.attrs["State"]["Pid"])

    # ---- files --------------------------------------------------------------------------
    async def fetch(self, node_id: str, name: str, dest: Path) -> bool:
        return await asyncio.to_thread(self._fetch, node_id, name, dest)

    def _fetch(self, node_id: str, name: str, dest: Path) -> bool:
        import docker.errors
        from backports import tarfile  # the docker extra's (pyproject.toml)

        spec = self.specs[node_id]
        src = spec.data_dir / name
        if node_id in self.synced:  # the volume is gone; its copy is in the run dir
            return copy_local(src, dest)
        try:
            stream, _ = self._container(node_id).get_archive(str(src))
        except docker.errors.NotFound:
            return False
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tf:
            member = tf.next()
            f = tf.extractfile(member) if member is not None else None
            if f is None:
                return False
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            tmp.write_bytes(f.read())
            tmp.replace(dest)
        return True

    def _sync_data(self, node_id: str) -> None:
        """Copy the node's volume into its data dir in the run dir (before the volume goes)."""
        from backports import tarfile  # the data filter on every 3.11 (pyproject.toml)

        spec = self.specs[node_id]
        stream, _ = self._container(node_id).get_archive(str(spec.data_dir) + "/.")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tf:
            spec.data_dir.mkdir(parents=True, exist_ok=True)
            tf.extractall(spec.data_dir, filter="data")
        self.synced.add(node_id)

    # ---- tear-down ----------------------------------------------------------------------
    async def close(self) -> None:
        """Stop every node, copy its data back into the run dir, remove all we made."""
        if self._closed:
            return
        await asyncio.gather(*(self.stop(n) for n in list(self.containers)),
                             return_exceptions=True)
        for n in list(self.containers):
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._sync_data, n)
        await asyncio.to_thread(self.remove_all_now)

    def remove_all_now(self) -> None:
        """Synchronous, for atexit too: force-remove this run's containers, volumes, network."""
        self._closed = True
        remove_labelled(self.client, {LABEL_RUN: self.run_id})


def remove_labelled(client: Any, labels: dict[str, str]) -> dict[str, list[str]]:
    """Force-remove containers, then volumes and networks, carrying all of ``labels``."""
    import docker.errors

    filt = {"label": [f"{k}={v}" for k, v in labels.items()]}
    gone: dict[str, list[str]] = {"containers": [], "volumes": [], "networks": []}
    for c in client.containers.list(all=True, filters=filt):
        with contextlib.suppress(docker.errors.NotFound):
            c.remove(force=True, v=True)
            gone["containers"].append(c.name)
    for v in client.volumes.list(filters=filt):
        with contextlib.suppress(docker.errors.NotFound):
            v.remove(force=True)
            gone["volumes"].append(v.name)
    for net in client.networks.list(filters=filt):
        with contextlib.suppress(docker.errors.NotFound):
            net.remove()
            gone["networks"].append(net.name)
    return gone


def from_name(name: str) -> DockerBackend:
    """``docker`` -> host network; ``docker-bridge`` -> a bridge network per run."""
    return DockerBackend(network="bridge" if name == "docker-bridge" else "host")


@atexit.register
def _remove_leftovers() -> None:
    """A last sweep by label, also after ``close``: a start that was in flight in a worker
    thread when Ctrl-C arrived may have created a container after close's sweep (worker
    threads are joined before atexit hooks run, so this sweep sees it)."""
    for b in list(_live):
        with contextlib.suppress(Exception):
            if b.containers or b.volumes or b._net is not None:
                b.remove_all_now()
