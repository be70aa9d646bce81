"""No leaks: after close, an exception, a normal exit or a SIGKILL of the harness, no
toxiproxy-server process and no listening proxy port is left."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from faults_helpers import pid_alive, port_listening, port_of

from faults.links import TcpLinks, node_pairs
from faults.toxiproxy import ToxiproxyServer

ROOT = Path(__file__).resolve().parents[3]


def wait_gone(pid: int, ports: list[int], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid) and not any(port_listening(p) for p in ports):
            return
        time.sleep(0.05)
    pytest.fail(f"leak: pid {pid} alive={pid_alive(pid)}, "
                f"listening={[p for p in ports if port_listening(p)]}")


async def make_proxies(server: ToxiproxyServer) -> list[int]:
    links = await TcpLinks.create(server.client("leak-"),
                                  {pair: "127.0.0.1:9" for pair in node_pairs(["a", "b", "c"])})
    await links.cut([("a", "b")])
    await links.client.close()  # deliberately do not delete the proxies
    return [port_of(a) for a in links.listen.values()]


def test_close_leaves_nothing() -> None:
    server = ToxiproxyServer.start()
    pid, api = server.pid, port_of(server.url)
    assert pid is not None and pid_alive(pid)
    ports = asyncio.run(make_proxies(server))
    assert all(port_listening(p) for p in ports + [api])
    server.close()
    server.close()  # idempotent
    wait_gone(pid, ports + [api])


def test_exception_inside_the_manager_leaves_nothing() -> None:
    seen: dict[str, object] = {}
    with pytest.raises(RuntimeError, match="mid-test"):
        with ToxiproxyServer.start() as server:
            seen["pid"], seen["api"] = server.pid, port_of(server.url)
            seen["ports"] = asyncio.run(make_proxies(server))
            raise RuntimeError("mid-test")
    wait_gone(seen["pid"], [*seen["ports"], seen["api"]])  # type: ignore[arg-type, list-item]


CHILD = textwrap.dedent("""
    import asyncio, sys, time
    sys.path.insert(0, {helpers!r})
    from faults.toxiproxy import ToxiproxyServer
    from test_faults_toxiproxy_lifecycle import make_proxies
    server = ToxiproxyServer.start()
    ports = asyncio.run(make_proxies(server))
    print(server.pid, server.url.rsplit(":", 1)[1], *ports, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(60)
""")


def run_child(mode: str) -> tuple[subprocess.Popen[str], int, list[int]]:
    code = CHILD.format(helpers=str(Path(__file__).parent))
    child = subprocess.Popen([sys.executable, "-c", code, mode], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    pid, *ports = (int(x) for x in child.stdout.readline().split())
    return child, pid, ports


def test_harness_exit_without_close_stops_the_server() -> None:
    child, pid, ports = run_child("exit")
    assert child.wait(10) == 0
    wait_gone(pid, ports)


def test_harness_killed_by_sigkill_takes_the_server_with_it() -> None:
    child, pid, ports = run_child("hang")
    assert pid_alive(pid)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    wait_gone(pid, ports)


def test_attach_via_toxiproxy_url_does_not_own_the_server(monkeypatch, toxiproxy) -> None:
    monkeypatch.setenv("TOXIPROXY_URL", toxiproxy.url.removeprefix("http://"))
    attached = ToxiproxyServer.from_env()
    assert not attached.owned and attached.url == toxiproxy.url
    ports = asyncio.run(make_proxies(attached))
    attached.close()
    assert all(port_listening(p) for p in ports)  # still the other owner's server

    async def cleanup() -> None:
        client = attached.client("leak-")
        assert len(await client.delete_proxies()) == 6
        await client.close()
    asyncio.run(cleanup())
    assert not any(port_listening(p) for p in ports)
