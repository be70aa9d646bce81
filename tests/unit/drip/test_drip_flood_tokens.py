"""Initiator tokens are made when a flooded message of ours first leaves (floodauth.py), so
the messages of several core passes that waited together for a busy link share one group
token, and every peer's copy of a message carries the same token (session 51)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from nodes.drip import codec
from nodes.drip.auth import MAX_GROUP
from nodes.drip.codec import Update
from nodes.drip.floodauth import FloodTokens
from nodes.drip.server import DripNode


def _signer() -> tuple[FloodTokens, list[list[str]]]:
    signed: list[list[str]] = []

    def sign(digests: list[str]) -> str:
        signed.append(list(digests))
        return f"Bearer t{len(signed)}"

    return FloodTokens(sign), signed


def _voting(i: int) -> codec.Voting:
    return codec.Voting("n1", i, False, Update(f"u{i}", f"k{i}", i))


def test_settle_signs_what_waits_in_groups_and_only_once() -> None:
    ft, signed = _signer()
    cells = [ft.cell(f"d{i}") for i in range(MAX_GROUP + 2)]
    assert ft.waiting() == MAX_GROUP + 2 and all(c.auth is None for c in cells)
    ft.settle()
    assert [len(g) for g in signed] == [MAX_GROUP, 2] and ft.waiting() == 0
    assert {c.auth for c in cells[:MAX_GROUP]} == {"Bearer t1"}
    assert {c.auth for c in cells[MAX_GROUP:]} == {"Bearer t2"}
    ft.settle()  # nothing waits: no signature
    late = ft.cell("d99")
    ft.settle()
    assert len(signed) == 3 and late.auth == "Bearer t3" and cells[0].auth == "Bearer t1"


def _node() -> tuple[SimpleNamespace, list[Any], list[tuple[str, list[Any], dict[int, str]]],
                     list[list[str]]]:
    spawned: list[Any] = []
    sent: list[tuple[str, list[Any], dict[int, str]]] = []

    async def request_batch(to: str, msgs: list[Any], tokens: dict[int, str]) -> int:
        sent.append((to, list(msgs), dict(tokens)))
        return 200

    async def request(to: str, m: Any, auth: str | None = None) -> int:
        sent.append((to, [m], {id(m): auth} if auth else {}))
        return 200

    ft, signed = _signer()
    n = SimpleNamespace(opts=SimpleNamespace(peer_pipeline=1, lane=False), _outq={},
                        _flying={}, _batch_bytes=1 << 20, _no_batch=set(), _peer_has={},
                        background=SimpleNamespace(spawn=spawned.append),
                        _queue=lambda item: None, _request_batch=request_batch,
                        _request=request,
                        _flood_tokens=ft)
    n._pump_peer = lambda to: DripNode._pump_peer(n, to)  # type: ignore[arg-type]
    n._answers_coming = lambda to: False
    n._spare = lambda to, q: DripNode._spare(n, to, q)  # type: ignore[arg-type]
    n._send_chunk = lambda to, c: DripNode._send_chunk(n, to, c)  # type: ignore[arg-type]
    return n, spawned, sent, signed


def test_messages_of_several_passes_waiting_for_a_busy_link_share_one_token() -> None:
    n, spawned, sent, signed = _node()
    first, second = _voting(1), _voting(2)
    third = codec.Commit("n1", 3, False, first.update, 1)
    DripNode._send_batches(n, {"n2": [first], "n3": [first]})  # type: ignore[arg-type]
    assert len(spawned) == 2 and not signed  # queued, not signed yet
    asyncio.run(spawned.pop(0))  # n2's request leaves: ``first`` is signed, alone
    assert signed == [[codec.signed_digest(first)]]
    n._flying["n2"] = 1  # n2's link is busy again: what follows waits for it
    DripNode._send_batches(n, {"n2": [second]})  # type: ignore[arg-type]
    DripNode._send_batches(n, {"n2": [third]})  # type: ignore[arg-type]
    asyncio.run(spawned.pop(0))  # n3's copy of ``first`` leaves with the token made for n2
    n._flying["n2"] = 0
    DripNode._pump_peer(n, "n2")  # type: ignore[arg-type]
    asyncio.run(spawned.pop(0))
    assert signed[1:] == [[codec.signed_digest(second), codec.signed_digest(third)]]
    (_, m2, t2), (_, m3, t3), (_, m4, t4) = sent
    assert m2 == [first] and m3 == [first] and t2[id(first)] == t3[id(first)] == "Bearer t1"
    assert m4 == [second, third] and t4[id(second)] == t4[id(third)] == "Bearer t2"
