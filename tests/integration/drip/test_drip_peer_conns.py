"""Issue 26, session 44: a burst of outcome questions to one peer (a peer coming back to a node
that holds ~100 locks a flood left: `DripCore._reask` asks about each at once) opens a few TLS
connections, not one per question. Before, each question was its own concurrent request, so
aiohttp opened one connection per question and kept them pooled (each with ~128-256 KiB of TLS
buffers): the hostile bench's nodes ended with 128-192 idle connections each, +90-130 MiB RSS.

n1 runs in this process (so the test can count its connections); n2 and n3 are node
processes; all talk over real TLS sockets."""

from __future__ import annotations

import asyncio
from pathlib import Path

from drip_mesh import Mesh

from nodes.drip import codec
from nodes.drip.peerslots import OUTCOME_PER_PEER, PEER_CONNS

QUESTIONS = 60


def test_a_burst_of_outcome_questions_opens_a_few_connections(tmp_path: Path) -> None:
    m = Mesh(tmp_path, 3)

    async def go() -> None:
        async with m.in_process("n1") as node:
            before, sent = node.conn_stats["opened"], node.conn_stats["requests"]
            answered = node.refusals.counts.get("unproven-outcome", 0)
            for i in range(QUESTIONS):  # the path the core's Sends take
                node.send("n2", codec.OutcomeQuery("n1", f"gone-{i}", "n3", 5))
            for _ in range(300):  # until every question has been answered
                await asyncio.sleep(0.1)
                conns = node.session.connector
                if not conns._acquired and node.conn_stats["requests"] - sent >= QUESTIONS:
                    break
            opened = node.conn_stats["opened"] - before
            idle = sum(len(v) for v in node.session.connector._conns.values())
            assert opened <= OUTCOME_PER_PEER + 4, f"{opened} connections for {QUESTIONS}"
            assert idle <= 2 * PEER_CONNS
            assert node.refusals.counts.get("unproven-outcome", 0) == answered

    try:
        asyncio.run(go())
    finally:
        m.close()
