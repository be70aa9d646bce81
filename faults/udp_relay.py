"""A UDP link relay: Toxiproxy's link vocabulary (cut, drop probability, latency, jitter,
one-way) for datagram protocols, since Toxiproxy has no UDP.

Addressing. Every ordered pair ``(i, j)`` gets a relay socket ``L(i,j)`` on its own loopback
port; node ``i`` is configured to reach ``j`` at ``L(i,j)`` and never learns ``j``'s real
address. A datagram arriving at ``L(i,j)`` is flow ``i -> j``; after the flow's faults it is sent
to ``j``'s real address *from the socket* ``L(j,i)``, the reverse link's relay socket. So:

* ``j`` sees every datagram from ``i`` coming from ``L(j,i)``, which is exactly the address ``j``
  itself uses for ``i``: a stable sender identity, the same in membership lists and in
  ``recvfrom``. A node may simply reply to whatever address a datagram came from.
* a reply sent to ``L(j,i)`` is flow ``j -> i`` and passes that flow's faults, so a one-way cut of
  ``i -> j`` really leaves ``j -> i`` (including replies) working.

When there is no reverse link (``("client", j)``: clients have no relay socket of their own),
the relay forwards from a private per-link socket ``P(i,j)``, remembers the last address that
sent to ``L(i,j)``, and passes datagrams arriving at ``P(i,j)`` (``j``'s replies, flow
``j -> i``) back to that address from ``L(i,j)``: the client sees replies from the address it
sent to, as any UDP client expects. Create all links in one call so that every link finds its
reverse link from the start.

Faults are per flow: ``cut`` (drop everything), ``drop`` (probability, from a per-flow
``random.Random`` seeded with ``f"{seed}:{src}->{dst}"``, so one flow's drops do not depend on
other flows' traffic), ``latency_ms`` +/- ``jitter_ms`` (uniform, like Toxiproxy's; jitter
reorders). Delayed datagrams already in flight are still delivered after a later cut, as a
real network's would be.

Run it as its own process, ``python -m faults.udp_relay --control-port P [--seed S]``, and drive
it with `UdpRelayClient` over HTTP/JSON, or in-process as `UdpRelay` (same async methods):

    GET  /health                      -> {"ok": true}
    POST /links   {"links": [{"src", "dst", "dst_addr": "host:port"}]}
                                      -> {"links": [{"src", "dst", "listen": "host:port"}]}
    GET  /links                       -> the same list for every link
    POST /retarget {"dst", "host"}    -> {"links": [...]}  (links into dst now deliver to
                                         that host, same port: a restarted container's IP)
    POST /faults  {"flows": [[src, dst], ...], "cut"?, "drop"?, "latency_ms"?, "jitter_ms"?}
                                      -> {"flows": [...]}  (given fields replace, others stay)
    POST /heal    {"flows": [...] | null, "kind": "cut"|"loss"|"latency"|null}
                                      -> {"healed": [...]}
    GET  /stats                       -> {"stats": [{"src", "dst", "received", "forwarded",
                                                     "dropped", "delayed"}]}
    POST /shutdown
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import selectors
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from faults.links import Kind, LinkVocabulary, UnsupportedFault
from osutil import procs

Flow = tuple[str, str]
Addr = tuple[str, int]


def parse_addr(s: str) -> Addr:
    host, _, port = s.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected 'host:port', got {s!r}")
    return host, int(port)


def fmt_addr(a: Addr) -> str:
    return f"{a[0]}:{a[1]}"


@dataclass
class FlowFaults:
    cut: bool = False
    drop: float = 0.0
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    duplicate: float = 0.0  # probability that a datagram is delivered twice

    @property
    def healthy(self) -> bool:
        return (not self.cut and self.drop == 0 and self.latency_ms == 0 and self.jitter_ms == 0
                and self.duplicate == 0)


@dataclass
class FlowStats:
    received: int = 0
    forwarded: int = 0
    dropped: int = 0
    delayed: int = 0
    duplicated: int = 0


class _Endpoint(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Any) -> None:
        self.on_datagram = on_datagram
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Addr) -> None:
        self.on_datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        pass  # ICMP port unreachable when a node is down: UDP loses it, and so do we


@dataclass
class _Link:
    src: str
    dst: str
    dst_addr: Addr
    listen: _Endpoint
    listen_addr: Addr
    private: _Endpoint | None = None  # P(src,dst), only when there is no reverse link
    last_sender: Addr | None = None


def _big_buffers(transport: asyncio.BaseTransport, size: int = 4 << 20) -> None:
    """Kernel default socket buffers (~208 KiB) overflow under bursts of large datagrams and
    drop them at the relay, on top of the loss we inject; ask for 4 MiB (capped by rmem_max)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, opt, size)


@dataclass
class UdpRelay:
    """The relay, in-process (asyncio). `close()` it; all sockets are loopback by default."""

    seed: int = 0
    host: str = "127.0.0.1"
    _links: dict[Flow, _Link] = field(default_factory=dict)
    _faults: dict[Flow, FlowFaults] = field(default_factory=dict)
    _stats: dict[Flow, FlowStats] = field(default_factory=dict)
    _rngs: dict[Flow, random.Random] = field(default_factory=dict)
    _timers: set[asyncio.TimerHandle] = field(default_factory=set)

    async def add_links(self, links: Mapping[Flow, str]) -> dict[Flow, str]:
        """``{(src, dst): dst's real "host:port"}`` -> ``{(src, dst): relay "host:port"}``."""
        loop = asyncio.get_running_loop()
        out: dict[Flow, str] = {}
        for (src, dst), dst_addr in links.items():
            if (src, dst) in self._links:
                raise ValueError(f"link {src}->{dst} already exists")
            flow = (src, dst)
            ep = _Endpoint(lambda data, addr, flow=flow: self._from_src(flow, data, addr))
            transport, _ = await loop.create_datagram_endpoint(lambda ep=ep: ep,
                                                               local_addr=(self.host, 0))
            _big_buffers(transport)
            addr = transport.get_extra_info("sockname")[:2]
            self._links[flow] = _Link(src, dst, parse_addr(dst_addr), ep, addr)
            out[flow] = fmt_addr(addr)
        for (src, dst), link in self._links.items():
            if (dst, src) not in self._links and link.private is None:
                await self._open_private(link)
        return out

    def links(self) -> dict[Flow, str]:
        return {f: fmt_addr(link.listen_addr) for f, link in self._links.items()}

    async def retarget(self, dst: str, host: str) -> list[Flow]:
        """Deliver every link into ``dst`` to ``host`` (port unchanged): a node on a docker
        bridge is reached at its container's address, which it gets only once started (and may
        change on a restart); from there it sees each datagram coming from the relay socket
        it was configured with, as on loopback."""
        flows = sorted(f for f in self._links if f[1] == dst)
        if not flows:
            raise ValueError(f"no link into {dst!r}")
        for f in flows:
            link = self._links[f]
            link.dst_addr = (host, link.dst_addr[1])
        return flows

    def _rng(self, flow: Flow) -> random.Random:
        if flow not in self._rngs:
            self._rngs[flow] = random.Random(f"{self.seed}:{flow[0]}->{flow[1]}")
        return self._rngs[flow]

    async def _open_private(self, link: _Link) -> None:
        flow = (link.src, link.dst)
        ep = _Endpoint(lambda data, addr: self._from_dst(flow, data))
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: ep, local_addr=(self.host, 0))
        _big_buffers(transport)
        link.private = ep

    def _from_src(self, flow: Flow, data: bytes, addr: Addr) -> None:
        """A datagram at L(src,dst): flow src -> dst, to dst's real address."""
        link = self._links[flow]
        link.last_sender = addr
        reverse = self._links.get((flow[1], flow[0]))
        if reverse is not None:
            self._deliver(flow, data, reverse.listen, link.dst_addr)
        elif link.private is not None:
            self._deliver(flow, data, link.private, link.dst_addr)

    def _from_dst(self, flow: Flow, data: bytes) -> None:
        """A datagram at P(src,dst): dst's reply, flow dst -> src, to src's last address."""
        link = self._links[flow]
        back = (flow[1], flow[0])
        if link.last_sender is not None:
            self._deliver(back, data, link.listen, link.last_sender)

    def _deliver(self, flow: Flow, data: bytes, via: _Endpoint, dest: Addr) -> None:
        stats = self._stats.setdefault(flow, FlowStats())
        stats.received += 1
        f = self._faults.get(flow)
        if f is not None:
            if f.cut or (f.drop > 0 and self._rng(flow).random() < f.drop):
                stats.dropped += 1
                return
            if f.duplicate > 0 and self._rng(flow).random() < f.duplicate:
                stats.duplicated += 1
                self._send(flow, data, via, dest)  # the copy goes now; the original as usual
            delay_ms = f.latency_ms
            if f.jitter_ms > 0:
                delay_ms += self._rng(flow).uniform(-f.jitter_ms, f.jitter_ms)
            if delay_ms > 0:
                stats.delayed += 1
                loop = asyncio.get_running_loop()
                handle: asyncio.TimerHandle | None = None

                def later() -> None:
                    self._timers.discard(handle)  # type: ignore[arg-type]
                    self._send(flow, data, via, dest)
                handle = loop.call_later(delay_ms / 1000.0, later)
                self._timers.add(handle)
                return
        self._send(flow, data, via, dest)

    def _send(self, flow: Flow, data: bytes, via: _Endpoint, dest: Addr) -> None:
        if via.transport is not None and not via.transport.is_closing():
            via.transport.sendto(data, dest)
            self._stats[flow].forwarded += 1

    async def set_faults(self, flows: Iterable[Flow], cut: bool | None = None,
                         drop: float | None = None, latency_ms: float | None = None,
                         jitter_ms: float | None = None,
                         duplicate: float | None = None) -> list[Flow]:
        """Set the given fault fields on each flow (others unchanged); returns the flows."""
        for name, prob in (("drop", drop), ("duplicate", duplicate)):
            if prob is not None and not 0 <= prob <= 1:
                raise ValueError(f"{name} must be a probability in [0, 1], got {prob}")
        if (latency_ms or 0) < 0 or (jitter_ms or 0) < 0:
            raise ValueError("latency_ms and jitter_ms must be >= 0")
        done = []
        for flow in flows:
            flow = (str(flow[0]), str(flow[1]))
            f = self._faults.setdefault(flow, FlowFaults())
            if cut is not None:
                f.cut = bool(cut)
            if drop is not None:
                f.drop = float(drop)
            if latency_ms is not None:
                f.latency_ms = float(latency_ms)
            if jitter_ms is not None:
                f.jitter_ms = float(jitter_ms)
            if duplicate is not None:
                f.duplicate = float(duplicate)
            done.append(flow)
        return sorted(done)

    async def heal(self, flows: Iterable[Flow] | None = None,
                   kind: str | None = None) -> list[Flow]:
        """Clear faults (all, or one kind: "cut" | "loss" | "latency" | "duplicate") on flows."""
        chosen = list(self._faults) if flows is None else [(a, b) for a, b in flows]
        healed = []
        for flow in chosen:
            f = self._faults.get(flow)
            if f is None or f.healthy:
                continue
            if kind in (None, "cut"):
                f.cut = False
            if kind in (None, "loss"):
                f.drop = 0.0
            if kind in (None, "latency"):
                f.latency_ms = f.jitter_ms = 0.0
            if kind in (None, "duplicate"):
                f.duplicate = 0.0
            if kind not in (None, "cut", "loss", "latency", "duplicate"):
                raise ValueError(f"unknown fault kind {kind!r}")
            healed.append(flow)
            if f.healthy:
                del self._faults[flow]
        return sorted(healed)

    def faults(self) -> dict[Flow, FlowFaults]:
        return dict(self._faults)

    async def stats(self) -> dict[Flow, FlowStats]:
        return {f: FlowStats(**asdict(s)) for f, s in self._stats.items()}

    async def close(self) -> None:
        for h in self._timers:
            h.cancel()
        self._timers.clear()
        for link in self._links.values():
            for ep in (link.listen, link.private):
                if ep is not None and ep.transport is not None:
                    ep.transport.close()
        self._links.clear()


# ---------------------------------------------------------------------------------------------
# HTTP control API (the process form)


def _flows(body: Any) -> list[Flow] | None:
    raw = body.get("flows") if isinstance(body, dict) else None
    return None if raw is None else [(str(a), str(b)) for a, b in raw]


def control_app(relay: UdpRelay, stop: asyncio.Event | None = None) -> web.Application:
    """The HTTP/JSON control API over ``relay`` (see the module docstring)."""
    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    def link_list(m: Mapping[Flow, str]) -> list[dict[str, str]]:
        return [{"src": s, "dst": d, "listen": a} for (s, d), a in sorted(m.items())]

    async def post_links(req: web.Request) -> web.Response:
        body = await req.json()
        try:
            made = await relay.add_links({(x["src"], x["dst"]): x["dst_addr"]
                                          for x in body["links"]})
        except (KeyError, TypeError, ValueError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"links": link_list(made)})

    async def post_retarget(req: web.Request) -> web.Response:
        body = await req.json()
        try:
            flows = await relay.retarget(str(body["dst"]), str(body["host"]))
        except (KeyError, TypeError, ValueError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"links": [list(f) for f in flows]})

    async def get_links(_: web.Request) -> web.Response:
        return web.json_response({"links": link_list(relay.links())})

    async def post_faults(req: web.Request) -> web.Response:
        body = await req.json()
        try:
            done = await relay.set_faults(_flows(body) or [], cut=body.get("cut"),
                                          drop=body.get("drop"),
                                          latency_ms=body.get("latency_ms"),
                                          jitter_ms=body.get("jitter_ms"),
                                          duplicate=body.get("duplicate"))
        except (TypeError, ValueError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"flows": [list(f) for f in done]})

    async def post_heal(req: web.Request) -> web.Response:
        body = await req.json() if req.can_read_body else {}
        try:
            healed = await relay.heal(_flows(body), body.get("kind"))
        except ValueError as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"healed": [list(f) for f in healed]})

    async def get_stats(_: web.Request) -> web.Response:
        stats = await relay.stats()
        return web.json_response({"stats": [{"src": s, "dst": d, **asdict(v)}
                                            for (s, d), v in sorted(stats.items())]})

    async def shutdown(_: web.Request) -> web.Response:
        if stop is not None:
            stop.set()
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes([web.get("/health", health), web.post("/links", post_links),
                    web.get("/links", get_links), web.post("/retarget", post_retarget),
                    web.post("/faults", post_faults),
                    web.post("/heal", post_heal), web.get("/stats", get_stats),
                    web.post("/shutdown", shutdown)])
    return app


async def serve(control_port: int, seed: int, host: str = "127.0.0.1",
                link_host: str | None = None) -> None:
    """Run the relay with its control API until /shutdown or SIGTERM; link sockets on
    ``link_host`` (default ``host``: a docker bridge's gateway, where containers reach it)."""
    relay = UdpRelay(seed=seed, host=link_host or host)
    stop = asyncio.Event()
    runner = web.AppRunner(control_app(relay, stop), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, control_port)
    await site.start()
    port = runner.addresses[0][1]
    # The parent reads this one line to learn the control URL (works with --control-port 0).
    print(f"udp-relay control http://{host}:{port}", flush=True)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await relay.close()
        await runner.cleanup()


# ---------------------------------------------------------------------------------------------
# Client side


class UdpRelayClient:
    """Async client for a relay process; the same methods as `UdpRelay`."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        async with self._session.request(method, self.url + path, json=body) as resp:
            data = await resp.json()
            if resp.status >= 300:
                raise RuntimeError(f"udp relay {method} {path} -> {resp.status}: "
                                   f"{data.get('error', data)}")
            return data

    async def add_links(self, links: Mapping[Flow, str]) -> dict[Flow, str]:
        body = {"links": [{"src": s, "dst": d, "dst_addr": a} for (s, d), a in links.items()]}
        data = await self._call("POST", "/links", body)
        return {(x["src"], x["dst"]): x["listen"] for x in data["links"]}

    async def retarget(self, dst: str, host: str) -> list[Flow]:
        data = await self._call("POST", "/retarget", {"dst": dst, "host": host})
        return [(a, b) for a, b in data["links"]]

    async def set_faults(self, flows: Iterable[Flow], cut: bool | None = None,
                         drop: float | None = None, latency_ms: float | None = None,
                         jitter_ms: float | None = None,
                         duplicate: float | None = None) -> list[Flow]:
        body: dict[str, Any] = {"flows": [list(f) for f in flows]}
        for k, v in (("cut", cut), ("drop", drop), ("latency_ms", latency_ms),
                     ("jitter_ms", jitter_ms), ("duplicate", duplicate)):
            if v is not None:
                body[k] = v
        data = await self._call("POST", "/faults", body)
        return [(a, b) for a, b in data["flows"]]

    async def heal(self, flows: Iterable[Flow] | None = None,
                   kind: str | None = None) -> list[Flow]:
        body = {"flows": None if flows is None else [list(f) for f in flows], "kind": kind}
        data = await self._call("POST", "/heal", body)
        return [(a, b) for a, b in data["healed"]]

    async def stats(self) -> dict[Flow, FlowStats]:
        data = await self._call("GET", "/stats")
        return {(x.pop("src"), x.pop("dst")): FlowStats(**x) for x in data["stats"]}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class UdpRelayProcess:
    """A relay subprocess that dies with us (see `osutil.procs`); a context manager."""

    def __init__(self, seed: int = 0, host: str = "127.0.0.1", control_port: int = 0,
                 startup_timeout_s: float = 10.0, link_host: str | None = None) -> None:
        self.proc = procs.spawn(
            [sys.executable, "-m", "faults.udp_relay", "--control-port", str(control_port),
             "--seed", str(seed), "--host", host, "--link-host", link_host or host],
            stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parent.parent)
        try:
            self.url = self._read_url(startup_timeout_s)
        except BaseException:
            procs.stop(self.proc)
            raise

    def _read_url(self, timeout_s: float) -> str:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise RuntimeError(f"udp relay printed no control URL within {timeout_s} s")
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("udp-relay control "):
            raise RuntimeError(f"udp relay failed to start (exit {self.proc.poll()}): {line!r}")
        return line.split()[-1]

    def client(self) -> UdpRelayClient:
        return UdpRelayClient(self.url)

    def close(self) -> None:
        procs.stop(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> UdpRelayProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class UdpLinks(LinkVocabulary):
    """`faults.links.LinkFaults` over a relay (in-process `UdpRelay` or `UdpRelayClient`).

    Build with `UdpLinks.create`; node ``i`` must use ``listen[(i, j)]`` as ``j``'s address.
    """

    kinds = frozenset({Kind.CUT, Kind.LOSS, Kind.LATENCY, Kind.DUPLICATE})

    def __init__(self, relay: UdpRelay | UdpRelayClient, listen: Mapping[Flow, str]) -> None:
        self.relay = relay
        self.listen = dict(listen)
        self._active: dict[Flow, set[Kind]] = {}

    @classmethod
    async def create(cls, relay: UdpRelay | UdpRelayClient,
                     real: Mapping[Flow, str]) -> UdpLinks:
        """``{(src, dst): dst's real "host:port"}`` -> links through the relay."""
        return cls(relay, await relay.add_links(real))

    @property
    def links(self) -> frozenset[Flow]:
        return frozenset(self.listen)

    def _existing(self, flows: Iterable[Flow]) -> list[Flow]:
        return sorted({f for f in flows if f in self.listen or (f[1], f[0]) in self.listen})

    async def apply(self, kind: Kind, flows: Iterable[Flow], **params: Any) -> list[Flow]:
        kind = Kind(kind)
        fl = self._existing(flows)
        if kind is Kind.CUT:
            await self.relay.set_faults(fl, cut=True)
        elif kind is Kind.LOSS:
            await self.relay.set_faults(fl, drop=float(params["p"]))
        elif kind is Kind.LATENCY:
            await self.relay.set_faults(fl, latency_ms=float(params.get("ms", 0)),
                                        jitter_ms=float(params.get("jitter_ms", 0)))
        elif kind is Kind.DUPLICATE:
            await self.relay.set_faults(fl, duplicate=float(params["p"]))
        else:
            raise UnsupportedFault(f"the UDP relay cannot do {kind.value!r}")
        for f in fl:
            self._active.setdefault(f, set()).add(kind)
        return fl

    async def heal(self, kind: Kind | None = None,
                   flows: Iterable[Flow] | None = None) -> list[Flow]:
        wanted = None if flows is None else set(flows)
        chosen = sorted(f for f, ks in self._active.items()
                        if (wanted is None or f in wanted) and (kind is None or Kind(kind) in ks))
        if not chosen:
            return []
        await self.relay.heal(chosen, None if kind is None else Kind(kind).value)
        for f in chosen:
            if kind is None:
                self._active.pop(f, None)
            else:
                self._active[f].discard(Kind(kind))
                if not self._active[f]:
                    del self._active[f]
        return chosen

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.relay.heal()
        await self.relay.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m faults.udp_relay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--control-port", type=int, required=True,
                   help="HTTP control port (0: pick one; the URL is printed on stdout)")
    p.add_argument("--seed", type=int, default=0, help="seed for drops and jitter")
    p.add_argument("--host", default="127.0.0.1", help="address for the control API")
    p.add_argument("--link-host", default=None,
                   help="address for the link sockets (default: --host)")
    args = p.parse_args(argv)
    asyncio.run(serve(args.control_port, args.seed, args.host, args.link_host))


if __name__ == "__main__":
    main()
