"""The one way a search target plays a schedule: cap the run, set the scene, play the steps,
undo every fault, settle, and turn a runaway run into a witness. The five targets differ only
in what a step does and what "settled" means; each hands those in, so a change to how a run
is bounded or healed is made once for all of them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from harness.sim.driver import RunCap, Simulation
from harness.sim.search import MAX_EVENTS, WALL_CAP_S, Step, cap_witness

#: a liveness witness (``kind``, ``message``, ``witness``), or None: the run made progress
Stuck = dict[str, Any] | None


def play(sim: Simulation, schedule: list[Step], step: Callable[[Step], None], *,
         ids: Iterable[Any], latency: float, settle: Callable[[], Stuck] = lambda: None,
         before: Callable[[], object] = lambda: None,
         finish: Callable[[], object] = lambda: None,
         node_errors: tuple[type[Exception], ...] = ()) -> dict[str, Any] | None:
    """Run ``schedule`` on ``sim`` under the search's caps: ``before`` (a group forms, a leader
    is elected), each step, the last heal of ``ids`` (links at ``latency``), then ``settle``,
    which waits for recovery and says whether the cluster is stuck. Returns the liveness
    witness (``checker: liveness``), or None. A run past its cap is stopped and its cap is the
    witness; an exception of ``node_errors`` (a core asked for what its codec cannot encode)
    is a ``node-exception``. ``finish`` runs after the last step, before the heal (a step
    whose fault lasts past the schedule's end plays out: a stall is not cut short). The safety checkers are the target's to run on what was played."""
    sim.cap(MAX_EVENTS, WALL_CAP_S)
    try:
        before()
        for s in schedule:
            step(s)
        finish()
        sim.heal_everything(ids, latency=latency)
        stuck = settle()
    except RunCap as e:
        return cap_witness(e)
    except node_errors as e:
        stuck = {"kind": "node-exception", "message": f"{type(e).__name__}: {e}",
                 "witness": {"t": sim.now}}
    return None if stuck is None else {"checker": "liveness", **stuck}


def capped(witness: dict[str, Any] | None) -> bool:
    """The run was stopped by its cap (what it left is no history to judge)."""
    return witness is not None and witness["kind"].endswith("-cap")
