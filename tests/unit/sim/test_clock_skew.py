"""Clock skew in the simulator (`Simulation.skew`, the optional ``skew`` kind): each node's
core is handed its own monotonic time (never going back) and its own calendar clock; a skewed
schedule replays byte for byte; the kind is drawn only when asked, so old seeds draw the same."""

from __future__ import annotations

import random
from typing import Any

import pytest

from harness.cli import main
from harness.sim import antacid_search, drip_search, gf_search, sds_search, swim_search
from harness.sim.driver import Simulation
from nodes.common.effects import Effect, Persist, SetTimer

pytestmark = pytest.mark.sim

TARGETS = (gf_search, swim_search, sds_search, drip_search, antacid_search)


class Ticker:
    """A core with one periodic 1 s timer that records the times it is handed."""

    def __init__(self, seen: list[tuple[float, float]]) -> None:
        self.seen = seen

    def start(self, now: float) -> list[Effect]:
        return [SetTimer("tick", now + 1.0)]

    def on_timer(self, name: Any, now: float) -> list[Effect]:
        self.seen.append(now)
        return [SetTimer("tick", now + 1.0)]

    def on_message(self, peer: Any, msg: Any, now: float) -> list[Effect]:
        return []

    def on_command(self, cmd: Any, token: int, now: float) -> list[Effect]:
        self.seen.append(("cmd", now))
        return []


def _sim() -> tuple[Simulation, dict[int, list[Any]]]:
    seen: dict[int, list[Any]] = {1: [], 2: []}

    def make(i: int, _d: list[Persist], _b: int, _r: random.Random) -> Ticker:
        return Ticker(seen[i])

    sim = Simulation([1, 2], make, seed=1)
    sim.boot_all()
    return sim, seen


def test_a_fast_clock_fires_its_timers_sooner_and_its_core_reads_its_own_time() -> None:
    sim, seen = _sim()
    sim.run_until(2.5)  # both ticked at 1, 2 (true time)
    sim.skew(1, 2.0)  # from t=2.5, node 1's clock runs twice as fast, continuing from 2.5
    sim.run_until(4.0)
    assert seen[2] == [1.0, 2.0, 3.0, 4.0]
    # node 1's tick due at its 3.0 fires at true 2.75, then every 0.5 s of true time
    assert seen[1] == [1.0, 2.0, 3.0, 4.0, 5.0]
    sim.command(1, "x")
    assert seen[1][-1] == ("cmd", 5.5)  # true 4.0 is its 2.5 + 2 * 1.5
    sim.skew(1, 0.5)  # slower from here; never back: its clock reads on from 5.5
    sim.run_until(4.99)
    assert seen[1][-1] == ("cmd", 5.5)
    sim.run_until(5.0)  # its 6.0 is true 4.0 + 0.5 / 0.5
    assert seen[1][-1] == 6.0
    ticks = [x for x in seen[1] if not isinstance(x, tuple)]
    assert ticks == sorted(ticks)  # its clock never went back


def test_the_clock_survives_a_restart_and_the_final_heal_makes_it_run_true() -> None:
    sim, seen = _sim()
    sim.skew(1, 2.0, wall_step=-60.0)
    sim.run_until(1.0)
    assert seen[1] == [1.0, 2.0]
    assert sim.wall(1, 5.0) == -55.0 and sim.wall(2, 5.0) == 5.0
    sim.restart(1)
    sim.run_until(1.0)
    sim.heal_everything([1, 2], latency=0.001)
    sim.run_until(3.0)
    # restarted at its 2.0 (true 1.0), its tick due at its 3.0 (true 1.5) until the final
    # heal sets true rate at true 1.0: then its 3.0 is true 2.0, its 4.0 true 3.0
    assert seen[1][2:] == [3.0, 4.0]
    assert sim.wall(1, 0.0) == -60.0  # the calendar step is not undone
    assert b'"skew"' in sim.trace_bytes()


def test_a_timer_is_never_handed_a_time_before_its_due_time() -> None:
    sim, seen = _sim()
    sim.skew(1, 1 / 3)  # a rate whose conversions do not round-trip exactly
    sim.run_until(40.0)
    ticks = seen[1]
    assert all(t >= k for k, t in enumerate(ticks, 1))  # each at or after its due time
    assert 12 <= len(ticks) <= 14  # a third of 40 ticks, not a storm


@pytest.mark.parametrize("target", TARGETS, ids=lambda m: m.TARGET.name)
def test_a_skewed_schedule_replays_byte_for_byte_on_every_target(target: Any) -> None:
    kinds = target.KINDS
    s = [["skew", 50, 1, 0], ["skew", 300, 2, 1], ["skew", 100, 3, 2], ["skew", 100, 4, 3],
         [kinds[-1], 100, 1, 1], ["skew", 100, 0, 0]]
    a, b = target.run(s, 3, ()), target.run(s, 3, ())
    assert a.ok, a.witness
    assert a.trace == b.trace and a.trace.count(b'"skew"') >= 4
    assert "skew" not in kinds and "skew" in target.TARGET.optional
    assert target.run(s[:0], 3, ()).trace != a.trace


def test_the_cli_draws_skew_only_when_asked(tmp_path, capsys) -> None:
    f = tmp_path / "s.json"
    assert main(["sim", "run", "garlicfarm", "--skew", "--seed", "1", "--runs", "20",
                 "--out", str(f)]) == 0
    assert "with clock skew" in capsys.readouterr().err and not f.exists()


def test_a_replay_file_with_skew_steps_reproduces_byte_for_byte(tmp_path, capsys) -> None:
    from harness.sim import replayfile

    s = [["skew", 10, 2, 0], ["skew", 20, 1, 1], ["crash", 100, 0, 2], ["skew", 30, 4, 3]]
    out = drip_search.run(s, 1, ("skip-sync",))
    assert not out.ok and b'"skew"' in out.trace
    f = tmp_path / "skew.json"
    replayfile.write(f, replayfile.record("drip", 1, ("skip-sync",), s, out))
    assert main(["sim", "replay", str(f)]) == 1  # 1: the failure it keeps, reproduced
    assert "reproduced byte for byte" in capsys.readouterr().out


def test_a_real_run_from_a_file_plays_a_calendar_skew_on_the_node() -> None:
    from harness.sim.realrun import nemesis_steps

    r = {"protocol": "garlicfarm", "seed": 1, "bug": [], "schedule": [["skew", 0, 3, 0]],
         "ops": [], "witness": [], "trace_sha256": "0" * 64}
    m = nemesis_steps(r)
    assert [o for _, o in m.steps] == [
        {"f": "clock-skew", "value": {"node": "leader", "offset_s": -60.0}}]
    assert not m.notes and not m.rates  # a calendar step needs no libfaketime
