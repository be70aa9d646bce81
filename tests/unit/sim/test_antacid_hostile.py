"""The ``hostile`` kind of ANTACID's schedules: nodes.antacid.hostile's BEEP exchanges (the
real fault's) read by the listener's own BEEP session; framing attacks end there, whole MSGs
on a channel naming a server reach the real core as from that server, which refuses them."""

from __future__ import annotations

import pytest

from harness.sim.antacid_search import KINDS, TARGET, _Run, run
from nodes.antacid import messages as m
from nodes.common.effects import Send

pytestmark = pytest.mark.sim


def test_a_burst_reaches_the_core_which_answers_arserrors() -> None:
    r = _Run(1, ())
    sim = r.sim
    sim.run_for(2)
    answers: list[m.ArsResponse] = []
    send = sim._effect_handlers[Send]

    def spy(n, e) -> None:  # noqa: ANN001 - the driver's handler signature
        if n.id == "r1" and isinstance(e.msg, m.ArsResponse) and e.msg.req_num in (1, 471, 921):
            answers.append(e.msg)
        send(n, e)

    sim._effect_handlers[Send] = spy
    sent = sim.hostile_burst("r1", 0)
    sim.run_for(0.01)
    trace = sim.trace_bytes()
    assert sent == 10  # forged propagate, pushes, the replay twice, far-ahead pulls
    assert trace.count(b'"hostile-closed"') == 7  # the six framing attacks and garbage
    assert b'"undecodable"' in trace  # SSN 2^64 fails the XML codec, as at a node
    codes = {a.result.code for a in answers if isinstance(a.result, m.ArsError)}
    assert {223002, 223003, 223004} <= codes  # not my downstream / upstream
    assert sim.hostile_burst("r2", 1) == 10  # a odd: only the exchanges that reach the core


def test_a_hostile_schedule_runs_the_same_byte_for_byte_and_stays_valid() -> None:
    s = [["hostile", 10, 0, 1], ["write", 10, 0, 0], ["hostile", 100, 1, 0], ["write", 10, 1, 2]]
    a, b = run(s, 1, ()), run(s, 1, ())
    assert a.ok, a.witness
    assert a.trace == b.trace and a.trace.count(b'"hostile"') >= 30
    assert "hostile" not in KINDS and TARGET.optional == ("hostile", "skew")
