"""The counter window (issue 26 item 5): one far-ahead counter must not silence an initiator."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.common.effects import Emit, Persist, Send
from nodes.drip import codec
from nodes.drip.codec import Update
from nodes.drip.core import Answer, CoreConfig, DripCore, Inbound
from nodes.drip.seen import MAX_COUNTER, SEEN_WINDOW, CounterOutOfWindow, Seen


def test_a_counter_beyond_the_window_is_refused_and_recorded_nowhere() -> None:
    s = Seen({"n1": (10, None, None)}, window=100)
    with pytest.raises(CounterOutOfWindow, match="more than 100 ahead of the last accepted"):
        s.before("n1", MAX_COUNTER - 1, False)
    assert s.row("n1")[:3] == ("n1", 10, None)
    assert s.before("n1", 11, False) is False  # the real next one is still new
    assert s.before("n1", 111, False) is False  # exactly the window ahead of 11: taken
    with pytest.raises(CounterOutOfWindow):
        s.before("n1", 212, False)


def test_a_reset_is_taken_only_near_the_wrap_around() -> None:
    s = Seen({"n1": (5, None, None)}, window=100)
    with pytest.raises(CounterOutOfWindow, match="a reset"):
        s.before("n1", 0, True)  # would wipe the history: not a wrap-around
    assert s.before("n1", 5, False) is True
    near = Seen({"n1": (MAX_COUNTER - 10, None, None)}, window=100)
    assert near.before("n1", 0, True) is False  # the wrap-around
    assert near.before("n1", 0, True) is True  # the same reset on another path
    for c in range(1, 150):
        assert near.before("n1", c, False) is False
    assert near.before("n1", 0, True) is True  # a late copy of that reset: still a duplicate
    _, saved, reset_at, window = near.row("n1")
    restored = Seen({"n1": (saved, reset_at, window)}, window=100)  # what a restart loads
    assert restored.before("n1", 149, False) is True
    assert restored.before("n1", 150, False) is False


def test_a_bad_window_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Seen({}, window=0)


def test_a_poisoned_voting_is_answered_400_and_the_initiator_survives_a_restart() -> None:
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig(counter_window=1000))
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 10, False, Update("u1", "k", 1)), 0)
    eff = c.on_message(Inbound("n3", 2), codec.Voting(
        "n1", MAX_COUNTER - 1, False, Update("u2", "k2", 1)), 1)
    assert eff[-1].msg.status == 400 and "counter window" in eff[-1].msg.body["error"]
    assert not [e for e in eff if isinstance(e, Persist)]
    assert not [e for e in eff if isinstance(e, Send) and not isinstance(e.msg, Answer)]
    (ev,) = [e for e in eff if isinstance(e, Emit)]
    assert ev.type == "refused" and ev.fields["reason"] == "counter-window"
    assert c.refusals.snapshot() == {"counter-window": 1}
    assert c.d.counters["n1"][0] == 10
    again = DripCore("n2", ["n1", "n3"], c.d, CoreConfig(counter_window=1000))  # a restart
    again.start(5)
    eff = again.on_message(Inbound("n1", 3), codec.Voting(
        "n1", 11, False, Update("u3", "k", 2)), 5)
    (vote,) = [e for e in eff if isinstance(e, Emit) and e.type == "vote"]
    assert vote.fields["vote"] == "yes"  # handled, not taken for a duplicate
    assert eff[-1].msg == Answer(200, {"ok": True})


def test_a_poisoned_commit_changes_nothing() -> None:
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig(counter_window=1000))
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 10, False, Update("u1", "k", 1)), 0)
    before = (dict(c.d.kv), set(c.members))
    eff = c.on_message(Inbound("n3", 2), codec.Commit(
        "n1", 5000, False, Update("u1", "k", 1), 1), 1)
    assert eff[-1].msg.status == 400 and "counter window" in eff[-1].msg.body["error"]
    assert (dict(c.d.kv), set(c.members)) == before
    # refused for want of a vote before its counter counts: the window has not moved (a
    # refused commit moved it unjournaled, and a far-ahead vote then passed: sim seed 21)
    eff = c.on_message(Inbound("n3", 2), codec.Commit(
        "n1", 900, False, Update("u9", "k9", 1), 1), 1)
    assert eff[-1].msg.status == 409 and c.seen.row("n1")[1] == 10
    assert (dict(c.d.kv), set(c.members)) == before


def test_a_receiver_far_behind_catches_up_from_the_peers_signed_heartbeat_counter() -> None:
    """A receiver that missed more than the window of n1's counters refused n1 for good; n1's
    own heartbeat (its TLS identity, counter signed with the body) moves the window, once,
    and saves it. Another peer's heartbeat never moves n1's window."""
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig(counter_window=10))
    c.start(0)
    c.state = "active"

    def vote(counter: int, uid: str) -> Answer:
        msg = codec.Voting("n1", counter, False, Update(uid, uid, 1))
        return c.on_message(Inbound("n1", uid), msg, 0)[-1].msg

    assert vote(1, "a").status == 200
    assert vote(500, "b").status == 400  # n1 went on without us for 499 counters
    c.on_message(Inbound("n3", 1), codec.Heartbeat("n3", "active", (), False, 10**6), 0)
    assert vote(501, "c").status == 400  # n3 cannot speak for n1
    out = c.on_message(Inbound("n1", 2), codec.Heartbeat("n1", "active", (), False, 499), 0)
    assert any(isinstance(e, Persist) for e in out)
    assert any(isinstance(e, Emit) and e.type == "counter-rebase" for e in out)
    assert vote(500, "b").status == 200 and vote(502, "d").status == 200
    again = c.on_message(Inbound("n1", 3), codec.Heartbeat("n1", "active", (), False, 502), 0)
    assert not any(isinstance(e, Persist) for e in again)  # within the window: no write
    wire = codec.encode(codec.Heartbeat("n1", "active", ("n1",), False, 2**64 - 1))
    back = codec.decode(wire.method, wire.path, wire.headers, wire.body_bytes(), None)
    assert back == codec.Heartbeat("n1", "active", ("n1",), False, 2**64 - 1)
    with pytest.raises(codec.CodecError, match="body.counter"):
        codec.decode(wire.method, wire.path, wire.headers, b'{"counter": -1}', None)


def test_one_far_ahead_counter_does_not_turn_later_real_ones_into_duplicates() -> None:
    """A long hostile run: a compromised member's counter far ahead (inside the window) was
    taken once; pruning the remembered counters must not raise the floor over the real ones
    that keep coming (it did: the floor went to the highest minus SEEN_WINDOW)."""
    s = Seen({"n1": (0, None, None)})
    far = 2**19 + 100
    assert s.before("n1", 1, False) is False
    assert s.before("n1", far, False) is False
    for c in range(2, 3 * SEEN_WINDOW):
        assert s.before("n1", c, False) is False, f"real counter {c} taken as a duplicate"
    assert s.before("n1", far, False) is True  # the far one is still remembered
    assert s.before("n1", 2, False) is True  # forgotten below the floor: still a duplicate
    assert s.before("n1", 3 * SEEN_WINDOW - 1, False) is True


def test_the_planted_ignore_counter_window_takes_the_poisoned_counter() -> None:
    """The bug mode the chaos suite catches by ``counter-out-of-window``: the counter is
    journaled as taken and saved as the window's mark. The initiator's next real message is
    still new after a restart: what is saved is the set of counters seen, not the highest."""
    bugs = frozenset({"ignore-counter-window"})
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig(counter_window=1000, bugs=bugs))
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 10, False, Update("u1", "k", 1)), 0)
    eff = c.on_message(Inbound("n3", 2), codec.Voting(
        "n1", MAX_COUNTER - 1, False, Update("u2", "k2", 1)), 1)
    (vote,) = [e for e in eff if isinstance(e, Emit) and e.type == "vote"]
    assert vote.fields["counter"] == MAX_COUNTER - 1
    assert c.d.counters["n1"][0] == MAX_COUNTER - 1  # saved as the mark
    again = DripCore("n2", ["n1", "n3"], c.d, CoreConfig(counter_window=1000, bugs=bugs))
    again.start(5)
    eff = again.on_message(Inbound("n1", 3), codec.Voting(
        "n1", 11, False, Update("u3", "k", 2)), 5)
    (vote,) = [e for e in eff if isinstance(e, Emit) and e.type == "vote"]
    assert vote.fields["counter"] == 11


def _restart(s: Seen, node: str = "n1") -> Seen:
    """What a restart loads: the saved row (``Seen.row``) of ``node``."""
    n, counter, reset_at, window = s.row(node)
    return Seen({n: (counter, reset_at, window)}, s.window)


def test_after_a_restart_a_far_ahead_counter_never_seen_hides_no_real_one() -> None:
    """A message is a repeat iff its (initiator, counter) was seen: a far-ahead counter (a
    compromised member's, inside the window) saved as the highest must not make the real ones
    below it repeats after a restart (the sim: ``hostile n2, cut n1-n2, crash n3``)."""
    s = Seen({})
    for c in range(1, 11):
        assert s.before("n1", c, False) is False
    far = 2**19
    assert s.before("n1", far, False) is False
    s = _restart(s)
    assert s.row("n1")[1] == far  # the window's mark stays the highest
    for c in range(11, 20):
        assert s.before("n1", c, False) is False, f"real counter {c} taken as a repeat"
    assert s.before("n1", far, False) is True  # the far one itself is still a repeat
    assert _restart(s).before("n1", far - 1, False) is False


def test_after_a_restart_a_real_replayed_message_is_still_a_repeat() -> None:
    """Every counter seen stays seen across a restart: the in-order run, one overtaken on
    another path, and those beyond a gap (messages this node never got)."""
    s = Seen({})
    for c in [5, 6, 4, 7, 20, 21, 30, 3]:
        assert s.before("n1", c, False) is False
    r = _restart(s)
    for c in [3, 4, 5, 6, 7, 20, 21, 30]:
        assert r.before("n1", c, False) is True, f"replayed counter {c} taken as new"
    for c in [2, 8, 19, 22, 29, 31]:
        assert r.before("n1", c, False) is False, f"unseen counter {c} taken as a repeat"
    assert _restart(r).before("n1", 8, False) is True


def test_in_order_counters_are_saved_as_a_run_not_a_list() -> None:
    s = Seen({})
    for c in range(1, 10_000):
        s.before("n1", c, False)
    assert s.windows["n1"].recent == set() and s.row("n1")[3] == "[null,1,9999,[]]"


def test_a_flood_of_far_ahead_counters_keeps_memory_and_the_saved_row_bounded() -> None:
    """A compromised member sending distinct far-ahead counters in an initiator's name (each
    inside the window of the last) cannot grow what is remembered, or saved, without bound;
    forgotten ones count as seen (under the floor), so none is handled twice."""
    s = Seen({})
    for c in range(1, 6):
        s.before("n1", c, False)
    flood = [2**19 + 2 * i for i in range(5 * SEEN_WINDOW)]  # gaps: no run absorbs them
    for c in flood:
        assert s.before("n1", c, False) is False
        assert len(s.windows["n1"].recent) <= 2 * SEEN_WINDOW
    row = s.row("n1")
    assert len(row[3]) < 2 * SEEN_WINDOW * 20
    r = _restart(s)
    assert len(r.windows["n1"].recent) <= 2 * SEEN_WINDOW
    assert all(r.before("n1", c, False) for c in flood)


def test_a_damaged_saved_window_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="data dir"):
        Seen({"n1": (5, None, "[1,")})
    with pytest.raises(ValueError, match="more than"):
        Seen({"n1": (5, None, f"[null,3,3,[[10,{10 + 2**40}]]]")})


def test_an_abort_and_a_commit_of_an_applied_update_journal_the_counter_they_take() -> None:
    """Each takes its initiator's counter (the window moves) with no vote or apply of its
    own: the journal says so (``counter-taken``), or the 2PC checker's window rule misjudges
    a later real counter (chaos seed 6, session 47). A repeat takes nothing and says nothing."""
    c = DripCore("n2", ["n1", "n3"], cfg=CoreConfig(counter_window=1000))
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 10, False, Update("u1", "k", 1)), 0)

    def taken(eff: list[Any]) -> list[dict[str, Any]]:
        return [e.fields for e in eff if isinstance(e, Emit) and e.type == "counter-taken"]

    abort = codec.Abort("n1", 900, False, "u0", "k0")
    assert taken(c.on_message(Inbound("n3", 2), abort, 1)) == [
        {"uid": "u0", "initiator": "n1", "from": "n3", "counter": 900, "reset": False,
         "via": "abort"}]
    assert taken(c.on_message(Inbound("n1", 3), abort, 1)) == []  # a repeat
    assert c.seen.row("n1")[1] == 900  # the window moved (in memory: an abort saves no row)
    c.on_message(Inbound("n1", 4), codec.Commit("n1", 11, False, Update("u1", "k", 1), 1), 2)
    assert "u1" in c.d.applied
    again = codec.Commit("n1", 1800, False, Update("u1", "k", 1), 1)
    assert taken(c.on_message(Inbound("n3", 5), again, 3)) == [
        {"uid": "u1", "initiator": "n1", "from": "n3", "counter": 1800, "reset": False,
         "via": "commit-of-applied"}]
    assert c.seen.row("n1")[1] == 1800
