"""A real SDS node compacts its durable incoming record (``incoming.rec``) at runtime: messages
held for a dependency and then delivered leave the file, messages still held stay in it, and
a kill -9 + restart right after a compaction still holds them (and delivers their logged
predecessors only once)."""

from __future__ import annotations

import asyncio
import socket
import time

from harness.cluster import open_cluster
from harness.spec import TestSpec
from harness.store import new_run
from harness.suites.sds import PROTOCOL
from nodes.common.records import scan_records
from nodes.sds.core import message_id
from nodes.sds.server import HELD_FILE
from nodes.sds.wire import HistoryEntry, Message, encode
from tests.waiting import eventually

ROUNDS = 40
COMPACT_MIN = 8


def _msg(sender: str, text: str, lamport: int, deps: tuple[str, ...] = ()) -> Message:
    content = text.encode()
    return Message(sender, message_id(sender, lamport, content), "0", lamport,
                   tuple(HistoryEntry(d) for d in deps), None, (), content)


def test_incoming_record_is_compacted_and_keeps_what_still_waits(tmp_path) -> None:
    # lost_after_ms: the never-satisfied messages must stay held for the whole test
    spec = TestSpec(name="sds-compact", protocol=PROTOCOL, nodes=2, seed=5, store=str(tmp_path),
                    options={"incoming_compact_min": COMPACT_MIN, "lost_after_ms": 600_000})
    run = new_run("sds-compact", tmp_path)

    async def body() -> None:
        async with open_cluster(spec, run) as c:
            held_file = run.node_dir("n1") / "data" / HELD_FILE
            peer = ("127.0.0.1", c.ports["n1"]["peer"])
            base = int(time.time() * 1000)
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

            def put(m: Message) -> None:
                sock.sendto(encode(m), peer)

            async def state() -> dict:
                return await c.admin("n1", "GET", "/admin/state")

            async def held_ids() -> set[str]:
                return {b["id"] for b in (await state())["incoming_buffer"]}

            try:
                # three messages whose dependency never comes: held for good
                waiting = [_msg("n2", f"w{i}", base + i, (f"{i:064x}",)) for i in range(3)]
                for m in waiting:
                    put(m)
                want = {m.message_id for m in waiting}
                assert await eventually(lambda: _eq(held_ids(), want))

                # rounds of held-then-delivered: each adds a record to incoming.rec
                for k in range(ROUNDS):
                    lam = base + 10 + 2 * k
                    parent = _msg("n2", f"p{k}", lam)
                    child = _msg("n2", f"c{k}", lam + 1, (parent.message_id,))
                    put(child)
                    kid = child.message_id
                    assert await eventually(lambda kid=kid: _has(held_ids(), kid))
                    put(parent)
                    assert await eventually(lambda kid=kid: _gone(held_ids(), kid))

                st = await state()
                assert len(st["log"]) == 2 * ROUNDS
                assert st["io"]["incoming_compactions"] >= ROUNDS // (2 * COMPACT_MIN)
                # the file itself: bounded by the threshold, not by the rounds
                records, _, _ = scan_records(held_file.read_bytes())
                assert len(records) <= max(COMPACT_MIN, 2 * len(want)) + 1 < ROUNDS
                assert st["io"]["incoming_records"] == len(records)

                # kill -9 and restart: what still waits is still held, nothing delivered twice
                await c.nemesis_invoke({"f": "kill", "value": {"node": "n1"}})
                await c.nemesis_invoke({"f": "restart", "value": {"node": "n1"}})
                assert await eventually(lambda: _eq(held_ids(), want), 15.0)
                st = await state()
                ids = [e["id"] for e in st["log"]]
                assert len(ids) == 2 * ROUNDS == len(set(ids))
                records, _, _ = scan_records(held_file.read_bytes())
                assert len(records) == len(want)  # rewritten at start: only what waits
            finally:
                sock.close()

    asyncio.run(body())


async def _eq(got, want: set[str]) -> bool:
    return await got == want


async def _has(got, mid: str) -> bool:
    return mid in await got


async def _gone(got, mid: str) -> bool:
    return mid not in await got
