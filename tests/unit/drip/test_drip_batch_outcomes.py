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
        batch_stats={"sent": 0, "sent_items": 0}, _with_statement=lambda m: m,
        _auth_for=lambda m: "token", _note_refusal=lambda *a, **k: None,
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
