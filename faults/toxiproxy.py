"""Toxiproxy: run (or attach to) a real toxiproxy-server v2 and drive it fast and safely.

Two pieces:

* `ToxiproxyServer` owns the server process: it starts ``toxiproxy-server`` on a free loopback
  port (binary at ``<project>/.tools/bin/toxiproxy-server`` or on ``PATH``), or attaches to the
  one named by ``TOXIPROXY_URL``. A process we started is always stopped: by the context manager,
  by ``atexit``, and, should the Python process die from a signal (even SIGKILL), by the kernel
  (see `osutil.procs`).
* `ToxiproxyClient` is the control client. Every proxy it creates is named ``<prefix><link>``,
  and it only ever lists, changes or deletes proxies under its own prefix, so concurrent runs
  sharing one server never touch each other's proxies.

What toxiproxy-python 0.1.1 gets wrong against a v2.5 server (checked by running it against
v2.5.0), and how this wrapper works around it:

1. Its server address is *class* state (``APIConsumer.host/port``), so one process can talk to
   one server only and ``update_api_consumer`` retargets every client at once. -> our client is
   an instance with its own URL.
2. Every call is a fresh ``requests`` connection with no timeout: a hung server hangs the
   harness, and ~1.2 ms/call sequentially. -> one keep-alive aiohttp session with a timeout,
   calls issued concurrently (a 5-node halves partition applies in a few ms).
3. ``Toxiproxy.populate`` ignores v2's bulk ``POST /populate``, issues a GET per proxy, raises
   ``KeyError('listen')`` when a proxy already exists and no ``listen`` is given, and returns
   only the proxies it newly created. -> ``create_proxies`` uses ``/populate`` once and returns
   every listen address (we pass free ports from below the ephemeral range, see osutil.ports).
4. ``Proxy.add_toxic`` returns ``None`` (the created toxic is lost); there is no toxic update.
   -> ``add_toxic``/``update_toxic`` return the server's JSON.
5. Error mapping: a duplicate *toxic* (409) raises ``ProxyExists``; exceptions carry the raw
   bytes body instead of the server's ``{"error", "status"}`` message; 5xx answers are not
   errors at all (``destroy``/``reset`` just return ``False``). -> `ToxiproxyError` subclasses
   (still subclasses of the old exception classes, so old ``except`` clauses keep working) with
   ``status`` and the parsed message; every non-2xx is raised.
6. ``destroy_all`` and ``reset`` act on *every* proxy on the server, which is wrong on a shared
   server. -> deletion by prefix only; there is no reset.
7. ``Proxy`` keeps no ``toxics`` and ``enable``/``disable`` return ``None`` while the server
   answers with the updated proxy; ``version()`` returns bytes (``b'git'`` for a ``go install``
   build: v2.5.0 only knows its version when built with ldflags). -> our calls return JSON;
   readiness is "``GET /version`` answers 200", never a version string.
8. ``running()`` does a blocking connect with no timeout. -> startup polling with a deadline
   that also notices the server process exiting (e.g. when its port was taken) and retries.

So the wrapper keeps toxiproxy-python's vocabulary (its exception classes and field defaults:
stream ``downstream``, toxicity ``1.0``, name ``<type>_<stream>``) and replaces its transport.
For code that wants toxiproxy-python's own objects, `legacy_client` points it at our server for
the duration of a ``with`` block (and restores the global address afterwards).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import aiohttp
import toxiproxy as toxiproxy_python
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from osutil import procs
from osutil.ports import free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BINARY_NAME = "toxiproxy-server"


class ToxiproxyError(Exception):
    """A non-2xx answer from the Toxiproxy API (``status`` and the server's message)."""

    def __init__(self, status: int, message: str, method: str = "", path: str = "") -> None:
        super().__init__(f"toxiproxy {method} {path} -> {status}: {message}")
        self.status = status
        self.message = message


class ProxyExistsError(ToxiproxyError, ProxyExists):
    pass


class ToxicExistsError(ToxiproxyError, ProxyExists):
    pass


class NotFoundError(ToxiproxyError, NotFound):
    pass


class InvalidToxicError(ToxiproxyError, InvalidToxic):
    pass


class ToxiproxyNotInstalled(RuntimeError):
    pass


class ToxiproxyStartError(RuntimeError):
    pass


def _error_for(status: int, message: str, method: str, path: str) -> ToxiproxyError:
    if status == 409:
        cls: type[ToxiproxyError] = ToxicExistsError if "toxic" in message else ProxyExistsError
    elif status == 404:
        cls = NotFoundError
    elif status == 400:
        cls = InvalidToxicError
    else:
        cls = ToxiproxyError
    return cls(status, message, method, path)


@dataclass(frozen=True)
class Toxic:
    """A toxic as the v2 API shapes it (defaults as the server's and toxiproxy-python's)."""

    type: str
    stream: str = "downstream"
    attributes: Mapping[str, Any] = field(default_factory=dict)
    toxicity: float = 1.0
    name: str = ""

    def __post_init__(self) -> None:
        if self.stream not in ("upstream", "downstream"):
            raise ValueError(f"stream must be 'upstream' or 'downstream', not {self.stream!r}")
        if not self.name:
            object.__setattr__(self, "name", f"{self.type}_{self.stream}")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "stream": self.stream,
                "toxicity": self.toxicity, "attributes": dict(self.attributes)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Toxic:
        return cls(type=d["type"], stream=d.get("stream", "downstream"),
                   attributes=d.get("attributes") or {}, toxicity=d.get("toxicity", 1.0),
                   name=d.get("name", ""))


# ---------------------------------------------------------------------------------------------
# The server process


def find_binary(root: Path | None = None) -> Path:
    """``<root>/.tools/bin/toxiproxy-server``, else ``toxiproxy-server`` on PATH."""
    local = (root or PROJECT_ROOT) / ".tools" / "bin" / BINARY_NAME
    if local.is_file() and os.access(local, os.X_OK):
        return local
    on_path = shutil.which(BINARY_NAME)
    if on_path:
        return Path(on_path)
    raise ToxiproxyNotInstalled(
        f"{BINARY_NAME} not found at {local} nor on PATH. Run ./scripts/bootstrap (it installs "
        f"github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0 into .tools/bin), or set "
        f"TOXIPROXY_URL=http://host:port to use a server that is already running."
    )


def normalize_url(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if "://" in url else f"http://{url}"


def _read_all(f: IO[bytes]) -> str:
    # pread: the child shares the file offset, so never move it
    fd = f.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def _http_ok(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url + "/version", timeout=timeout) as r:
            return 200 <= r.status < 300
    except (OSError, urllib.error.URLError):
        return False


class ToxiproxyServer:
    """A Toxiproxy server: one we own (started here) or one we attach to (``TOXIPROXY_URL``).

    Use as a context manager; ``close()`` is idempotent and stops only a server we started.
    """

    def __init__(self, url: str, process: subprocess.Popen[bytes] | None = None,
                 log: IO[bytes] | None = None) -> None:
        self.url = normalize_url(url)
        self.process = process
        self._log = log  # an unlinked temp file: nothing is left on disk, whatever happens

    @property
    def owned(self) -> bool:
        return self.process is not None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @classmethod
    def attach(cls, url: str, timeout_s: float = 2.0) -> ToxiproxyServer:
        server = cls(url)
        if not _http_ok(server.url, timeout_s):
            raise ToxiproxyStartError(f"no Toxiproxy answering at {server.url} (TOXIPROXY_URL)")
        return server

    @classmethod
    def start(cls, binary: Path | None = None, host: str = "127.0.0.1",
              startup_timeout_s: float = 5.0, attempts: int = 3) -> ToxiproxyServer:
        """Start our own server on a free port; retries if another process wins the port."""
        exe = binary or find_binary()
        last_err = ""
        for _ in range(attempts):
            port = free_port(host)
            log = tempfile.TemporaryFile()
            env = {**os.environ, "LOG_LEVEL": os.environ.get("TOXIPROXY_LOG_LEVEL", "warn")}
            proc = procs.spawn([str(exe), "-host", host, "-port", str(port)],
                               stdout=log, stderr=subprocess.STDOUT, env=env)
            url = f"http://{host}:{port}"
            deadline = time.monotonic() + startup_timeout_s
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                if _http_ok(url, 0.5):
                    return cls(url, proc, log)
                time.sleep(0.02)
            procs.stop(proc)
            last_err = _read_all(log)[-2000:]
            log.close()
        raise ToxiproxyStartError(
            f"{exe} did not come up after {attempts} attempts; its last output:\n{last_err}")

    def output(self) -> str:
        """What our server has printed so far (warnings and errors only, by default)."""
        return "" if self._log is None else _read_all(self._log)

    @classmethod
    def from_env(cls, **start_kwargs: Any) -> ToxiproxyServer:
        """Attach to ``TOXIPROXY_URL`` if set, else start our own."""
        url = os.environ.get("TOXIPROXY_URL")
        return cls.attach(url) if url else cls.start(**start_kwargs)

    def close(self) -> None:
        if self.process is not None:
            procs.stop(self.process)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ToxiproxyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def client(self, prefix: str, timeout_s: float = 5.0) -> ToxiproxyClient:
        return ToxiproxyClient(self.url, prefix, timeout_s=timeout_s)


@contextlib.contextmanager
def legacy_client(url: str) -> Iterator[toxiproxy_python.Toxiproxy]:
    """toxiproxy-python's ``Toxiproxy`` aimed at ``url`` inside the block.

    Its address is global class state, so this is not safe with two servers used from
    different threads at once; prefer `ToxiproxyClient`. Avoid its ``destroy_all``/``reset``
    on a shared server: they touch every run's proxies.
    """
    host, _, port = normalize_url(url).split("://", 1)[1].rpartition(":")
    saved = (APIConsumer.host, APIConsumer.port)
    APIConsumer.host, APIConsumer.port = host, int(port)
    try:
        yield toxiproxy_python.Toxiproxy()
    finally:
        APIConsumer.host, APIConsumer.port = saved


# ---------------------------------------------------------------------------------------------
# The control client


class ToxiproxyClient:
    """Async Toxiproxy v2 client scoped to proxies named ``<prefix>...``.

    One keep-alive HTTP session (created on first use, inside the running loop, and bound to
    that loop: use a client from one event loop only); many calls can be in flight at once.
    ``close()`` the client (or ``async with``) when done.
    """

    def __init__(self, url: str, prefix: str, timeout_s: float = 5.0,
                 max_connections: int = 32) -> None:
        if not prefix:
            raise ValueError("a non-empty run-specific prefix is required")
        self.url = normalize_url(url)
        self.prefix = prefix
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def proxy_name(self, link: str) -> str:
        return self.prefix + link

    async def _request(self, method: str, path: str, body: Any = None,
                       ok_statuses: tuple[int, ...] = ()) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout,
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                # v2 answers 403 to any User-Agent starting "Mozilla/"; be explicit.
                headers={"User-Agent": "chaos-harness-faults"},
            )
        async with self._session.request(method, self.url + path, json=body) as resp:
            text = await resp.text()
            if resp.status >= 300 and resp.status not in ok_statuses:
                try:
                    message = json.loads(text).get("error", text)
                except (ValueError, AttributeError):
                    message = text
                raise _error_for(resp.status, str(message).strip(), method, path)
            if not text:
                return None
            return json.loads(text) if "json" in resp.headers.get("Content-Type", "") else text

    async def version(self) -> str:
        return str(await self._request("GET", "/version"))

    async def create_proxies(self, links: Mapping[str, str],
                             listen_host: str = "127.0.0.1") -> dict[str, str]:
        """``{link: upstream "host:port"}`` -> ``{link: listen "host:port"}`` in one call.

        Listen ports come from the OS (``:0``), so they cannot collide with each other or with
        anything else. Raises `ProxyExistsError` rather than silently re-pointing a proxy.
        """
        if not links:
            return {}
        names = {self.proxy_name(link): link for link in links}
        existing = set(await self._names())
        clash = sorted(n for n in names if n in existing)
        if clash:
            raise ProxyExistsError(409, f"proxies already exist: {clash}", "POST", "/populate")
        # ports from below the ephemeral range (osutil.ports): a proxy re-enabled after a
        # heal must get its port back, which an outgoing connection's source port could steal
        body = [{"name": self.proxy_name(link), "upstream": up,
                 "listen": f"{listen_host}:{free_port(listen_host)}",
                 "enabled": True} for link, up in links.items()]
        try:
            result = await self._request("POST", "/populate", body)
        except ToxiproxyError:
            # /populate stops at the first failure and keeps what it made: remove those.
            await self._delete_names([n for n in names if n not in existing])
            raise
        return {names[p["name"]]: p["listen"] for p in result["proxies"]}

    async def _names(self) -> list[str]:
        proxies = await self._request("GET", "/proxies")
        return [n for n in proxies if n.startswith(self.prefix)]

    async def proxies(self) -> dict[str, dict[str, Any]]:
        """Our proxies as the server reports them, keyed by link name."""
        proxies = await self._request("GET", "/proxies")
        return {n[len(self.prefix):]: p for n, p in proxies.items() if n.startswith(self.prefix)}

    async def _delete_names(self, names: list[str]) -> None:
        await asyncio.gather(*(self._request("DELETE", f"/proxies/{quote(n, safe='')}",
                                             ok_statuses=(404,)) for n in names))

    async def delete_proxies(self) -> list[str]:
        """Delete every proxy under our prefix (and only those); returns the link names."""
        names = await self._names()
        await self._delete_names(names)
        return [n[len(self.prefix):] for n in names]

    def _toxics_path(self, link: str) -> str:
        return f"/proxies/{quote(self.proxy_name(link), safe='')}/toxics"

    async def add_toxic(self, link: str, toxic: Toxic) -> dict[str, Any]:
        return dict(await self._request("POST", self._toxics_path(link), toxic.to_json()))

    async def update_toxic(self, link: str, toxic: Toxic) -> dict[str, Any]:
        path = f"{self._toxics_path(link)}/{quote(toxic.name, safe='')}"
        return dict(await self._request("POST", path, toxic.to_json()))

    async def remove_toxic(self, link: str, name: str, missing_ok: bool = True) -> None:
        path = f"{self._toxics_path(link)}/{quote(name, safe='')}"
        await self._request("DELETE", path, ok_statuses=(404,) if missing_ok else ())

    async def toxics(self, link: str) -> list[Toxic]:
        return [Toxic.from_json(t) for t in await self._request("GET", self._toxics_path(link))]

    async def set_enabled(self, link: str, enabled: bool) -> dict[str, Any]:
        """Disabling closes the listener and every open connection; enabling listens again
        on the same address."""
        path = f"/proxies/{quote(self.proxy_name(link), safe='')}"
        return dict(await self._request("POST", path, {"enabled": enabled}))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> ToxiproxyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
