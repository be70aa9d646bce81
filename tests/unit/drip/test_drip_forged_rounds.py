"""Locks taken by a `/voting` forged in an initiator's name far ahead of its counter end
(issue 26, session 45): asked about such a round, the initiator moves its own counter past it,
durably, and answers "aborted"; before, it answered "unknown" for good and the lock stayed."""

from __future__ import annotations

from pathlib import Path

from harness.sim.drip import DripSim
from nodes.common.effects import Emit, Persist, Send
from nodes.drip import codec
from nodes.drip.codec import U64_MAX, OutcomeQuery, Update
from nodes.drip.core import (
    OUTCOME_FAST_ASKS,
    Answer,
    ClientUpdate,
    CoreConfig,
    DripCore,
    Inbound,
)
from nodes.drip.records import OWN, Counters, Durable
from nodes.drip.store import Store

MESH3 = [("n1", "n2"), ("n1", "n3"), ("n2", "n3")]
AHEAD = 2**19


def _n1(durable: Durable | None = None) -> tuple[DripCore, list[Persist]]:
    c = DripCore("n1", ["n2", "n3"], durable=durable, cfg=CoreConfig())
    persisted = [e for e in c.start(0) if isinstance(e, Persist)]
    return c, persisted


def _forged(c: DripCore, counter: int, uid: str = "hx", key: str = "k") -> Answer:
    """A /voting in n1's name (its key stolen) reaching n1 through n3's flood."""
    out = c.on_message(Inbound("n3", 1), codec.Voting("n1", counter, False,
                                                      Update(uid, key, "forged")), 1)
    (a,) = [e.msg for e in out if isinstance(e, Send) and isinstance(e.to, Inbound)]
    return a


def _ask(c: DripCore, counter: int | None, uid: str = "hx", now: float = 5
         ) -> tuple[list, Answer]:
    out = c.on_message(Inbound("n2", 2), OutcomeQuery("n2", uid, "n1", counter), now)
    assert isinstance(out[-1], Send) and isinstance(out[-1].to, Inbound)
    return out[:-1], out[-1].msg


def test_a_forged_round_ahead_moves_the_counter_durably_before_the_aborted_answer() -> None:
    c, _ = _n1()
    far = c.counter + AHEAD
    assert _forged(c, far).status == 400  # forged-own-counter, as before
    assert c.refusals.snapshot().get("forged-own-counter") == 1
    effects, answer = _ask(c, far)
    assert answer == Answer(200, {"outcome": "aborted"})
    assert c.counter == far
    # the counter's row is persisted by the same turn, before the answer (the runtime holds
    # an answer until every record before it is fsynced)
    rows = [e.record.rows for e in effects if isinstance(e, Persist)
            and isinstance(e.record, Counters)]
    assert rows == [((OWN, far, None, None),)]
    assert [e.type for e in effects if isinstance(e, Emit)] == ["counter-jump"]
    # asked again: a past round now, answered "aborted" without moving anything
    effects, answer = _ask(c, far)
    assert answer.body == {"outcome": "aborted"} and not effects and c.counter == far


def test_the_jump_survives_a_restart_and_the_next_round_is_above_it(tmp_path: Path) -> None:
    c, persisted = _n1()
    far = c.counter + AHEAD
    _forged(c, far)
    effects, _ = _ask(c, far)
    persisted += [e for e in effects if isinstance(e, Persist)]
    store = Store(tmp_path / "n1.sqlite3")
    store.commit_records([p.record for p in persisted])
    store.close()
    d = Store(tmp_path / "n1.sqlite3").load()
    assert d.counter == far
    again, _ = _n1(d)
    assert again.counter == far
    # the round is past after the restart too: "aborted" (no forged memory needed)
    assert _ask(again, far)[1].body == {"outcome": "aborted"}
    again.state = "active"  # as once its restart's sync is done
    out = again.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 10)
    (v,) = {e.msg for e in out if isinstance(e, Send) and isinstance(e.msg, codec.Voting)}
    assert v.counter == far + 1


def test_a_round_not_seen_forged_or_beyond_the_window_moves_nothing() -> None:
    """A question alone moves nothing: any member may ask (one holding only its own key
    too), and jumps with no message between them would put our next counter past the window
    of the nodes that had all our messages. Nor beyond the window, nor across the wrap."""
    c, _ = _n1()
    start = c.counter
    effects, answer = _ask(c, start + AHEAD)  # never seen forged
    assert answer.body == {"outcome": "unknown"} and not effects and c.counter == start
    beyond = start + c.cfg.counter_window
    _forged(c, beyond, uid="hy")
    effects, answer = _ask(c, beyond, uid="hy")
    assert answer.body == {"outcome": "unknown"} and not effects and c.counter == start
    just = start + c.cfg.counter_window - 1
    _forged(c, just, uid="hz")
    assert _ask(c, just, uid="hz")[1].body == {"outcome": "aborted"} and c.counter == just


def test_near_the_wrap_a_round_after_a_reset_not_made_is_unknown() -> None:
    top = U64_MAX - 5
    c, _ = _n1(Durable(fresh=False, counter=top))
    assert c.counter == top
    effects, answer = _ask(c, 3)  # a round after the wrap-around: not made yet
    assert answer.body == {"outcome": "unknown"} and not effects and c.counter == top
    assert _ask(c, 3 + c.cfg.counter_window)[1].body == {"outcome": "aborted"}  # a past one
    _forged(c, U64_MAX)
    assert _ask(c, U64_MAX)[1].body == {"outcome": "aborted"} and c.counter == U64_MAX
    c.state = "active"  # as once its restart's sync is done
    out = c.on_command(ClientUpdate(Update("u1", "k", 1)), "tok", 10)
    (v,) = {e.msg for e in out if isinstance(e, Send) and isinstance(e.msg, codec.Voting)}
    assert (v.counter, v.reset) == (0, True)  # the wrap stays next_counter's, with its reset


def _locks_of(sim: DripSim, initiator: str) -> dict[str, list[str]]:
    return {n: sorted(k for k, (_, i) in sim.core(n).d.locks.items() if i == initiator)
            for n in sim.ids}


def test_a_forged_far_ahead_votings_locks_end_within_the_fast_asks() -> None:
    """A hostile burst at n2 from a member holding n1's key: its far-ahead votings in n1's
    name lock keys at n2 and n3 for n1. They end within the TTL and the fast outcome asks
    (they stayed for good), and n1's next real update commits with a higher counter."""
    sim = DripSim(MESH3, seed=3)
    sim.update("n1", "k0", 0, "u0")
    sim.run_for(0.5)
    assert sim.committed("u0")
    before = sim.core("n1").counter
    sim.hostile_burst("n2", 2)
    sim.run_for(0.5)
    held = _locks_of(sim, "n1")
    assert held["n2"] and held["n3"], held  # the forged votings took locks for n1
    sim.run_for(sim.cfg.lock_ttl_s + OUTCOME_FAST_ASKS * sim.cfg.outcome_retry_s)
    assert _locks_of(sim, "n1") == {n: [] for n in sim.ids}
    jumps = sim.events_of("n1", "counter-jump")
    assert jumps and all(j["to"] - j["from"] < sim.cfg.counter_window for j in jumps)
    assert sim.core("n1").counter >= before + 2**19
    released = [e for n in ("n2", "n3") for e in sim.events_of(n, "release")
                if str(e.get("why", "")).startswith("aborted")]
    assert released
    sim.update("n1", "k0", 1, "u1")
    sim.run_for(1.0)
    assert sim.committed("u1")
    (v,) = [e for e in sim.events_of("n2", "vote") if e["uid"] == "u1"]
    assert v["counter"] > max(j["to"] for j in jumps)
