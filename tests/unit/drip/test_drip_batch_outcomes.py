"""A failed POST /batch must end each of its items as a failed single request would: one
`Outcome` per item reaches the core, whatever ended the request (else a commit stays in
flight and the peer's outbox stalls for good)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from nodes.drip import codec, lane
from nodes.drip.core import Outcome
from nodes.drip.floodauth import FloodTokens
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
        _with_statements=lambda ms, to: list(ms),
        _auth_for=lambda m: "token", _batch_auth=lambda data: "token",
        _note_refusal=lambda *a, **k: None,
        background=SimpleNamespace(spawn=lambda c: c.close()), _queue=queued.append,
        core=SimpleNamespace(acts_on=lambda o: True))  # every outcome, for the plumbing
    n._batch_outcomes = lambda *a: DripNode._batch_outcomes(n, *a)  # type: ignore[arg-type]
    n._batch_body = lambda *a: DripNode._batch_body(n, *a)  # type: ignore[arg-type]
    n._reply_body = lambda *a: DripNode._reply_body(n, *a)  # type: ignore[arg-type]
    return n, queued


MSGS = [codec.VoteResponse("n1", True, None, None, None),
        codec.VoteResponse("n1", False, None, None, None)]


def _assert_each_item_failed(send: Any, queued: list[Any]) -> None:
    """Run ``send`` (a batch to n2 of MSGS) and check that each message's outcome reached the
    core as a failure (status 0), whatever ended the send."""
    try:
        asyncio.run(send)
    except (RuntimeError, asyncio.CancelledError):
        pass  # unexpected ones still propagate to the task guard, after the outcomes
    outs = [o for _, to, o in queued if to == "n2"]
    assert [o.request for o in outs] == MSGS
    assert all(isinstance(o, Outcome) and o.status == 0 and not o.ok for o in outs)


@pytest.mark.parametrize("exc", [ConnectionResetError("reset by peer"), TimeoutError(),
                                 RuntimeError("unexpected"), asyncio.CancelledError()])
def test_every_item_of_a_failed_batch_reaches_the_core_as_a_failure(exc: BaseException
                                                                    ) -> None:
    n, queued = _node(exc)
    _assert_each_item_failed(DripNode._request_batch(n, "n2", list(MSGS), {}), queued)


def test_a_link_sends_one_batch_at_a_time_and_a_lost_one_fails_what_waits() -> None:
    """peer_pipeline 1: what a later turn releases waits for the request on its way (and then
    goes in one batch); when that request gets no answer, what waits fails with it at once."""
    spawned: list[Any] = []
    queued: list[Any] = []
    sent: list[list[Any]] = []

    async def request_batch(to: str, msgs: list[Any], tokens: dict[int, str]) -> int:
        sent.append(msgs)
        return 0  # no answer

    n = SimpleNamespace(opts=SimpleNamespace(peer_pipeline=1, lane=False), _outq={}, _flying={},
                        _batch_bytes=1 << 20, _no_batch=set(), _auth_for=lambda m: "token",
                        background=SimpleNamespace(spawn=spawned.append), _queue=queued.append,
                        _request_batch=request_batch)
    n._pump_peer = lambda to: DripNode._pump_peer(n, to)  # type: ignore[arg-type]
    n._answers_coming = lambda to: False  # (riders: tests/unit/drip/test_drip_riders.py)
    n._spare = lambda to, q: DripNode._spare(n, to, q)  # type: ignore[arg-type]
    n._peer_has = {}
    n._flood_tokens = FloodTokens(lambda ds: "token")
    n._send_chunk = lambda to, c: DripNode._send_chunk(n, to, c)  # type: ignore[arg-type]
    later = codec.VoteResponse("n1", True, "u3", "n3", 3)
    DripNode._send_batches(n, {"n2": list(MSGS)})  # type: ignore[arg-type]
    DripNode._send_batches(n, {"n2": [later]})  # type: ignore[arg-type]
    assert len(spawned) == 1 and [m for m, _ in n._outq["n2"]] == [later]
    asyncio.run(spawned.pop())
    assert sent == [MSGS] and not spawned and n._flying["n2"] == 0
    (outcome,) = [o for _, to, o in queued if to == "n2"]
    assert outcome.request == later and outcome.status == 0


class _Lane:
    """A lane whose exchange ends as given: raises ``exc``, or answers ``answer``."""

    def __init__(self, exc: BaseException | None = None,
                 answer: tuple[int, bytes] | None = None) -> None:
        self.exc, self.answer, self.ended = exc, answer, False
        self.ws = SimpleNamespace(close=self._close)
        self.frames: list[bytes] = []

    async def _close(self) -> None:
        return None

    async def exchange(self, body: bytes, timeout: float, riders: Any = None
                       ) -> tuple[int, bytes]:
        self.frames.append(body)
        if self.exc is not None:
            raise self.exc
        assert self.answer is not None
        return self.answer

    def end(self, why: str) -> None:
        self.ended = True


def _laned(ln: _Lane) -> tuple[SimpleNamespace, list[Any]]:
    n, queued = _node(RuntimeError("no POST expected"))
    n.batch_stats.update(lane_exchanges=0, lane_items=0, lane_failed=0)
    n._lanes = {"n2": ln}
    n._lanes_in = {}
    n.opts.lane_riders = True
    n._no_lane = set()

    async def lane_to(to: str) -> _Lane:
        return ln

    n._lane_to = lane_to
    n._lane_usable = lambda x: not x.ended  # the open lane is taken without its lock
    n._drop_lane = lambda to, x: DripNode._drop_lane(n, to, x)  # type: ignore[arg-type]
    return n, queued


@pytest.mark.parametrize("exc", [ConnectionResetError("reset by peer"), TimeoutError(),
                                 lane.LaneClosed("closed"), RuntimeError("unexpected"),
                                 asyncio.CancelledError()])
def test_every_item_of_a_failed_lane_exchange_reaches_the_core_as_a_failure(
        exc: BaseException) -> None:
    ln = _Lane(exc)
    n, queued = _laned(ln)
    _assert_each_item_failed(DripNode._request_lane(n, "n2", list(MSGS), {}), queued)
    if isinstance(exc, OSError | TimeoutError | lane.LaneClosed):  # dropped: the next opens anew
        assert ln.ended and "n2" not in n._lanes and n.batch_stats["lane_failed"] == 1


def test_a_lane_exchange_carries_the_batch_and_its_answers_reach_the_core_one_by_one() -> None:
    answer = {"answers": [{"status": 200, "body": {"ok": True}},
                          {"status": 409, "body": {"error": "no"}}]}
    ln = _Lane(answer=(200, json.dumps(answer).encode()))
    n, queued = _laned(ln)

    def no_token(data: bytes) -> str:
        raise AssertionError("a lane exchange has no batch token: its frame's MAC stands for it")

    n._batch_auth = no_token
    assert asyncio.run(DripNode._request_lane(n, "n2", list(MSGS), {})) == 200  # type: ignore
    # the lane seals the batch's body itself (lane.Outbound.exchange): no node id, no token
    assert ln.frames == [codec.encode(codec.Batch("n1", tuple(MSGS))).body_bytes()]
    outs = [o for _, to, o in queued if to == "n2"]
    assert [(o.request, o.status) for o in outs] == [(MSGS[0], 200), (MSGS[1], 409)]
    assert n.batch_stats["lane_exchanges"] == 1 and n.batch_stats["lane_items"] == 2
