"""A node's own signed yes goes only where it is relayed from (`DripNode._with_statements`):
to the initiator itself it would be signed and checked for nothing (the initiator counts the
yes of the peer that answers it by the channel: tests/unit/drip/test_drip_admit.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nodes.drip import codec
from nodes.drip.auth import Signer
from nodes.drip.server import DripNode


def _node() -> Any:
    n = SimpleNamespace(me="n2", signer=Signer("n2", "shared", b"k" * 32),
                        clock=SimpleNamespace(wall=lambda: 1000.0))
    n._needs_statement = lambda m, to: DripNode._needs_statement(n, m, to)  # type: ignore[arg-type]
    return n


def _yes(initiator: str, uid: str = "u1") -> codec.VoteResponse:
    return codec.VoteResponse("n2", True, initiator, 5, uid, ("n2", "n4"), version=0,
                              statements=(("n4", "t4"),))


def test_an_answer_to_the_initiator_carries_no_statement_of_ours() -> None:
    n = _node()
    out = DripNode._with_statements(n, [_yes("n1")], "n1")  # type: ignore[arg-type]
    assert out[0].statements == (("n4", "t4"),) and n.signer.signed == 0


def test_an_answer_to_a_relay_carries_our_statement_one_token_for_those_leaving_together(
        ) -> None:
    n = _node()
    out = DripNode._with_statements(n, [_yes("n1"), _yes("n1", "u2"),  # type: ignore[arg-type]
                                        codec.VoteResponse("n2", False, "n1", 6, "u3")], "n3")
    assert [dict(m.statements).keys() for m in out[:2]] == [{"n2", "n4"}, {"n2", "n4"}]
    assert dict(out[0].statements)["n2"] == dict(out[1].statements)["n2"]
    assert out[2].statements == () and n.signer.signed == 1
