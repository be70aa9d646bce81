"""New connections per source address (nodes/common/conns.py): the bucket's arithmetic, and a
real listener that resets a source over its bucket before any TLS while another source and
the connections it already admitted go on being served (issue 26: every hostile request
opened a new TLS connection, and the handshake was most of what it cost a node)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import pytest

from nodes.common.conns import ConnGuard, Listener, SourceBuckets
from osutil.ports import free_port


def test_refusals_spend_the_bucket_of_their_source_only() -> None:
    b = SourceBuckets(rate=2.0, burst=3)
    assert all(b.admits("10.0.0.1", 0.0) for _ in range(100))  # connecting costs nothing
    for _ in range(3):
        b.charge("10.0.0.1", 0.0)
    assert not b.admits("10.0.0.1", 0.0)
    assert b.admits("10.0.0.2", 0.0)  # another source has its own bucket
    assert not b.admits("10.0.0.1", 0.4)  # 0.8 token: not yet
    assert b.admits("10.0.0.1", 0.5)
    b.charge("10.0.0.1", 0.5)
    assert not b.admits("10.0.0.1", 0.5)  # one refusal per 0.5 s keeps it out
    for _ in range(10):
        b.charge("10.0.0.1", 0.5)  # never below zero: refills as fast after a flood
    assert b.admits("10.0.0.1", 1.0)


def test_bucket_remembers_a_bounded_number_of_sources() -> None:
    b = SourceBuckets(rate=1.0, burst=2, max_sources=8)
    for i in range(100):
        b.charge(f"s{i}", 0.0)
        assert len(b._b) <= 8
    b.charge("hot", 0.0)
    b.charge("hot", 0.0)
    assert not b.admits("hot", 0.0)  # still remembered as empty


@pytest.mark.parametrize("rate,burst", [(0.0, 1), (1.0, 0.5)])
def test_bucket_rejects_a_limit_that_admits_nothing(rate: float, burst: float) -> None:
    with pytest.raises(ValueError, match="rate > 0"):
        SourceBuckets(rate, burst)


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport

    def data_received(self, data: bytes) -> None:
        self.t.write(data)  # type: ignore[attr-defined]


def test_listener_resets_a_source_over_its_bucket_before_tls() -> None:
    refused: list[str] = []

    async def go() -> None:
        port = free_port()
        guard = ConnGuard(_Echo, 16, 5.0, refused.append)
        lst = Listener(guard, "127.0.0.1", port, None, 5.0, SourceBuckets(0.01, 2))
        lst.start()
        try:
            kept = [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.3", 0))
                    for _ in range(3)]  # admitted: nothing was refused yet
            lst.charge("127.0.0.3")
            lst.charge("127.0.0.3")  # two refusals: its bucket is empty
            r, w = await asyncio.open_connection("127.0.0.1", port,
                                                 local_addr=("127.0.0.3", 0))
            with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
                w.write(b"x")
                await asyncio.wait_for(r.readexactly(1), 2.0)
            w.close()
            assert refused == ["connection-rate"]
            for r, w in kept:  # admitted connections are served as before
                w.write(b"ok")
                assert await asyncio.wait_for(r.readexactly(2), 2.0) == b"ok"
                w.close()
            r, w = await asyncio.open_connection("127.0.0.1", port,
                                                 local_addr=("127.0.0.4", 0))
            w.write(b"hi")  # another source: its own bucket
            assert await asyncio.wait_for(r.readexactly(2), 2.0) == b"hi"
            w.close()
            # a TLS client over the bucket fails its handshake at once: nothing was served
            ctx = ssl.create_default_context()
            with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
                await asyncio.wait_for(asyncio.open_connection(
                    "127.0.0.1", port, ssl=ctx, local_addr=("127.0.0.3", 0)), 2.0)
            assert refused == ["connection-rate"] * 2
        finally:
            lst.close()
        with pytest.raises(OSError):  # closed: nothing listens any more
            await asyncio.open_connection("127.0.0.1", port)

    asyncio.run(go())


def test_a_failed_tls_handshake_is_charged_to_its_source(tmp_path) -> None:
    """A client without the certificate the port requires spends its source's bucket."""
    from nodes.drip.material import ensure_ca, issue_node_cert, server_context

    ctx = server_context(issue_node_cert(tmp_path, "n1", ensure_ca(tmp_path)))
    refused: list[str] = []

    async def go() -> None:
        port = free_port()
        lst = Listener(ConnGuard(_Echo, 16, 5.0, refused.append), "127.0.0.1", port, ctx, 5.0,
                       SourceBuckets(0.01, 1))
        lst.start()
        try:
            bare = ssl.create_default_context()
            bare.check_hostname = False
            bare.verify_mode = ssl.CERT_NONE
            for _ in range(2):
                with contextlib.suppress(ConnectionError, ssl.SSLError, OSError,
                                         asyncio.IncompleteReadError):
                    r, w = await asyncio.open_connection("127.0.0.1", port, ssl=bare,
                                                         local_addr=("127.0.0.5", 0))
                    await asyncio.wait_for(r.read(1), 2.0)  # TLS 1.3: refused after it
                    w.close()
                await asyncio.sleep(0.2)
            assert refused == ["connection-rate"]  # the first failed, the second was reset
        finally:
            lst.close()

    asyncio.run(go())
