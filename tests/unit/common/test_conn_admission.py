"""New connections per source address (nodes/common/conns.py): the bucket's arithmetic, and a
real listener that resets a source over its bucket before any TLS while another source and
the connections it already admitted go on being served (issue 26: every hostile request
opened a new TLS connection, and the handshake was most of what it cost a node)."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from nodes.common.conns import ConnGuard, Listener, SourceBuckets
from osutil.ports import free_port


def test_bucket_admits_burst_then_rate_per_source() -> None:
    b = SourceBuckets(rate=2.0, burst=3)
    assert [b.take("10.0.0.1", 0.0) for _ in range(4)] == [True, True, True, False]
    assert b.take("10.0.0.2", 0.0)  # another source has its own bucket
    assert not b.take("10.0.0.1", 0.2)  # 0.4 token: not yet
    assert b.take("10.0.0.1", 0.5) and not b.take("10.0.0.1", 0.5)  # one per 0.5 s
    assert [b.take("10.0.0.1", 100.0) for _ in range(4)] == [True, True, True, False]


def test_bucket_remembers_a_bounded_number_of_sources() -> None:
    b = SourceBuckets(rate=1.0, burst=2, max_sources=8)
    for i in range(100):
        b.take(f"s{i}", 0.0)
        assert len(b._b) <= 8
    b.take("hot", 0.0)
    b.take("hot", 0.0)
    assert not b.take("hot", 0.0)  # still remembered as empty: a new one does not refill it


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
                    for _ in range(2)]
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
