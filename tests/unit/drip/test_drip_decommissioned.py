"""A member learns it was decommissioned only when no peer takes its heartbeat and more than
half refuse it as not-a-peer at a later epoch (docs/drip.md "A decommissioned member that
restarts"); one refusal, an old epoch or a single accepting peer is not enough."""

from __future__ import annotations

import pytest

from nodes.common.effects import Emit, Send
from nodes.drip.codec import Heartbeat, Update
from nodes.drip.core import ClientUpdate, DripCore, Outcome


def _round(c: DripCore, now: float, answers: dict[str, tuple[int, object]]) -> list:
    """One heartbeat round in which each peer answers (status, body)."""
    sent = {e.to: e.msg for e in c.on_timer("heartbeat", now) if isinstance(e, Send)
            and isinstance(e.msg, Heartbeat)}
    out: list = []
    for p, (status, body) in answers.items():
        out += c.on_message(p, Outcome(sent[p], status, body), now)
    return out


def _no(epoch: int) -> tuple[int, dict]:
    return 403, {"error": "not a peer", "refusal": "not-a-peer", "epoch": epoch}


def _core() -> DripCore:
    c = DripCore("n4", ["n1", "n2", "n3"])
    c.start(0)
    return c


def test_a_majority_refusing_at_a_later_epoch_decommissions_and_updates_get_503() -> None:
    c = _core()
    out = _round(c, 1, {"n1": _no(2), "n2": _no(2), "n3": (0, "timeout")})
    assert c.state == "decommissioned" and c.snapshot()["decommissioned_at"] == 2
    (ev,) = [e for e in out if isinstance(e, Emit) and e.type == "decommissioned"]
    assert ev.fields["by"] == ["n1", "n2"] and ev.fields["epoch"] == 2
    (reply,) = c.on_command(ClientUpdate(Update("u1", "k", 1)), 7, 2)
    assert reply.value.status == 503
    assert "decommissioned from the mesh at epoch 2" in reply.value.body["error"]
    _round(c, 3, {"n1": _no(2), "n2": _no(2), "n3": _no(2)})
    assert c.state == "decommissioned"  # stays, journaled once
    _round(c, 4, {"n1": (200, {"state": "active"}), "n2": _no(2), "n3": _no(2)})
    assert c.state == "sync"  # added again: it syncs back


@pytest.mark.parametrize("answers", [
    {"n1": _no(2), "n2": (0, None), "n3": (0, None)},  # a minority (a hostile peer) says so
    {"n1": _no(2), "n2": _no(2), "n3": (200, {"state": "active"})},  # one peer still takes it
    {"n1": _no(0), "n2": _no(0), "n3": _no(0)},  # not a later epoch: a config error, not news
    {"n1": (403, {"error": "x"}), "n2": (403, {"error": "x"}), "n3": (0, None)},  # other 403s
])
def test_less_than_that_does_not_decommission(answers: dict) -> None:
    c = _core()
    _round(c, 1, answers)
    assert c.state != "decommissioned" and c.snapshot()["decommissioned_at"] is None
