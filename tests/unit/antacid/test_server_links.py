"""The ANTACID server's outgoing links run under nodes/common/tasks.Background: a link task
that dies is journaled as node_error, fails what it held (so the core retries) and is
replaced by a fresh link on the next send, instead of leaving requests queued for ever."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from nodes.antacid import messages as m
from nodes.antacid.core import BUGS
from nodes.antacid.server import AntacidNode, _Link
from nodes.common.config import parse_config
from osutil.ports import free_port


def node(tmp_path: Path) -> AntacidNode:
    cfg = parse_config({"id": "n1", "num_id": 1, "host": "127.0.0.1",
                        "data_dir": str(tmp_path / "n1"),
                        "ports": {"peer": free_port(), "client": free_port(),
                                  "admin": free_port()},
                        "peers": {"n2": {"num_id": 2, "peer": f"127.0.0.1:{free_port()}"}},
                        "options": {"primary": "n1", "upstream": {"n2": ["n1"]}}}, BUGS)
    return AntacidNode(cfg)


def test_a_dead_link_is_journaled_fails_its_requests_and_is_replaced(tmp_path, monkeypatch
                                                                       ) -> None:
    failed: list[int] = []

    async def boom(self: _Link) -> None:  # not one of the failures _run expects
        raise RuntimeError("planted: the link's loop died")

    async def body() -> None:
        n = node(tmp_path)
        await n.start()
        try:
            monkeypatch.setattr(n.loop, "message", lambda to, msg: failed.append(msg.req_num))
            monkeypatch.setattr(_Link, "_open", boom)
            req = m.ArsRequest(70007, m.PullCommittedUpdates("127.0.0.1", 1,
                                                         (m.ReplState("zone.test", 0),)))
            n.send("n2", req)
            first = n.links["n2"]
            n.send("n2", m.ArsRequest(70008, req.body))
            for _ in range(100):
                if first.task.done():
                    break
                await asyncio.sleep(0.01)
            assert first.task.done() and "n2" not in n.links
            # the one it was opening for and the one queued behind it both fail
            assert {70007, 70008} <= set(failed), failed
            n.send("n2", m.ArsRequest(70009, req.body))
            assert n.links["n2"] is not first  # the next send opens a fresh link
            await asyncio.sleep(0.05)  # let it start before the stop cancels it
        finally:
            await n.stop()
        events = [json.loads(x) for x in (tmp_path / "n1" / "events.jsonl").read_text()
                  .splitlines()]
        errors = [e for e in events if e["type"] == "node-error"]
        assert errors and "planted" in errors[0]["error"], errors

    asyncio.run(body())
