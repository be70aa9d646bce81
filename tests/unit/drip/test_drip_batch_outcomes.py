"""A failed POST /batch must end each of its items as a failed single request would: one
`Outcome` per item reaches the core, whatever ended the request (else a commit stays in
flight and the peer's outbox stalls for good)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from nodes.drip import codec
from nodes.drip.core import Outcome
from nodes.drip.server import DripNode


class _Post:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __call__(self, *a: Any, **kw: Any) -> _Post:
        return self

    async def __aenter__(self) -> Any:
        raise self.exc

    async def __aexit__(self, *a: Any) -> None:
        return None


def _node(exc: BaseException) -> tuple[SimpleNamespace, list[Any]]:
    queued: list[Any] = []
    n = SimpleNamespace(
        me="n1", session=SimpleNamespace(post=_Post(exc)), peer_urls={"n2": "https://x"},
        opts=SimpleNamespace(peer_timeout_s=0.5), _no_batch=set(),
        batch_stats={"sent": 0, "sent_items": 0}, conn_stats={"requests": 0},
        _with_statements=lambda ms: list(ms),
        _auth_for=lambda m: "token", _batch_auth=lambda data: "token",
        _note_refusal=lambda *a, **k: None,
        background=SimpleNamespace(spawn=lambda c: c.close()), _queue=queued.append)
    n._batch_outcomes = lambda *a: DripNode._batch_outcomes(n, *a)  # type: ignore[arg-type]
    return n, queued


MSGS = [codec.VoteResponse("n1", True, None, None, None),
        codec.VoteResponse("n1", False, None, None, None)]


@pytest.mark.parametrize("exc", [ConnectionResetError("reset by peer"), TimeoutError(),
                                 RuntimeError("unexpected"), asyncio.CancelledError()])
def test_every_item_of_a_failed_batch_reaches_the_core_as_a_failure(exc: BaseException
                                                                    ) -> None:
    n, queued = _node(exc)
    try:
        asyncio.run(DripNode._request_batch(n, "n2", list(MSGS), {}))  # type: ignore[arg-type]
    except (RuntimeError, asyncio.CancelledError):
        pass  # unexpected ones still propagate to the task guard, after the outcomes
    outs = [o for _, to, o in queued if to == "n2"]
    assert [o.request for o in outs] == MSGS
    assert all(isinstance(o, Outcome) and o.status == 0 and not o.ok for o in outs)


def test_a_link_sends_one_batch_at_a_time_and_a_lost_one_fails_what_waits() -> None:
    """peer_pipeline 1: what a later turn releases waits for the request on its way (and then
    goes in one batch); when that request gets no answer, what waits fails with it at once."""
    spawned: list[Any] = []
    queued: list[Any] = []
    sent: list[list[Any]] = []

    async def request_batch(to: str, msgs: list[Any], tokens: dict[int, str]) -> int:
        sent.append(msgs)
        return 0  # no answer

    n = SimpleNamespace(opts=SimpleNamespace(peer_pipeline=1), _outq={}, _flying={},
                        _batch_bytes=1 << 20, _no_batch=set(), _auth_for=lambda m: "token",
                        background=SimpleNamespace(spawn=spawned.append), _queue=queued.append,
                        _request_batch=request_batch)
    n._pump_peer = lambda to: DripNode._pump_peer(n, to)  # type: ignore[arg-type]
    n._spare = lambda to, q: DripNode._spare(n, to, q)  # type: ignore[arg-type]
    n._peer_has = {}
    n._group_tokens = lambda ms: {}
    n._send_chunk = lambda to, c: DripNode._send_chunk(n, to, c)  # type: ignore[arg-type]
    later = codec.VoteResponse("n1", True, "u3", "n3", 3)
    DripNode._send_batches(n, {"n2": list(MSGS)})  # type: ignore[arg-type]
    DripNode._send_batches(n, {"n2": [later]})  # type: ignore[arg-type]
    assert len(spawned) == 1 and [m for m, _ in n._outq["n2"]] == [later]
    asyncio.run(spawned.pop())
    assert sent == [MSGS] and not spawned and n._flying["n2"] == 0
    (outcome,) = [o for _, to, o in queued if to == "n2"]
    assert outcome.request == later and outcome.status == 0
