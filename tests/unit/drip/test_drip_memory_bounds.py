"""Issue 26, session 44: what a long attack fills stays bounded, and its cost per request
does not grow with it. Each test fails on the code before session 44."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jwt
import pytest

from nodes.common.clock import Clock
from nodes.common.effects import Send, SetTimer
from nodes.common.journal import Journal
from nodes.drip import auth, codec
from nodes.drip.auth import MAX_JTI, AuthError, Verifier, load_auth
from nodes.drip.codec import OutcomeQuery, Update
from nodes.drip.core import (
    OUTCOME_FAST_ASKS,
    OUTCOME_RETRY_MAX_S,
    DripCore,
    Inbound,
    Outcome,
)
from nodes.drip.material import ensure_shared_secret
from nodes.drip.records import OWN, Counters, Init
from nodes.drip.runs import Runs
from nodes.drip.seen import SEEN_WINDOW, Seen
from nodes.drip.store import Store

NOW = 1_800_000_000.0


def _reference(recent: set[int]) -> str:
    """The runs text as saved before session 44 (sorted set, maximal runs, json.dumps)."""
    runs: list[list[int]] = []
    for c in sorted(recent):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return json.dumps(runs, separators=(",", ":"))


def test_runs_hold_the_same_set_and_text_as_a_plain_set() -> None:
    rng = random.Random(44)
    for _ in range(200):
        r, ref = Runs(), set()
        for _ in range(rng.randrange(1, 80)):
            op, c = rng.random(), rng.randrange(0, 60)
            if op < 0.6:
                r.add(c)
                ref.add(c)
            elif op < 0.75 and c in ref:
                last = r.take_up(c)
                gone = set(range(c, last + 1))
                assert gone <= ref and last + 1 not in ref
                ref -= gone
            elif op < 0.9 and c in ref:
                first = r.take_down(c)
                gone = set(range(first, c + 1))
                assert gone <= ref and first - 1 not in ref
                ref -= gone
            else:
                r.drop_upto(c)
                ref = {x for x in ref if x > c}
            assert r == ref and len(r) == len(ref) and list(r) == sorted(ref)
            assert r.text() == _reference(ref)
            assert Runs.of(json.loads(r.text())) == ref
        if len(ref) > 3:
            top = r.keep_top(3)
            kept = sorted(ref)[-3:]
            assert top == sorted(ref)[-4] and r == set(kept)


def test_saving_a_window_does_not_rebuild_the_far_ahead_counters_a_flood_listed() -> None:
    """Before: every message's saved row sorted and re-encoded every listed counter (a flood
    of far-ahead counters in a member's name listed up to 8,192: ~1-6 ms per later message
    at every node, the attack's cost per request doubling as it went on). Now a real message
    that extends the run reuses the listed counters' text as it stands."""
    s = Seen({})
    s.before("n1", 100, False)
    rng = random.Random(26)
    while len(s.windows["n1"].recent) < SEEN_WINDOW:
        s.before("n1", 100 + 2**19 + rng.randrange(2**18), False)
    w = s.windows["n1"]
    first = s.row("n1")[3]
    listed = w.recent.text()
    for c in range(101, 200):  # the initiator's real messages, in order
        assert not s.before("n1", c, False)
        row = s.row("n1")[3]
        assert w.recent.text() is listed  # not rebuilt
        assert row.endswith(listed + "]")
    assert row != first and json.loads(row)[2] == 199
    # and what is saved reads back as the same window
    r = Seen({"n1": s.row("n1")[1:]})
    assert r.windows["n1"].recent == w.recent and r.row("n1") == s.row("n1")


def _verifier(tmp_path: Path) -> tuple[auth.Signer, Verifier]:
    return load_auth("n1", {"mode": "shared",
                            "shared_key_file": str(ensure_shared_secret(tmp_path))})


def test_the_replay_table_forgets_expired_ids_as_it_goes(tmp_path: Path) -> None:
    """Before: ids were forgotten only once 200,000 were held (~30 MB a node, growing with
    every vote answer, batch and heartbeat, then one scan of them all)."""
    s, v = _verifier(tmp_path)
    d = codec.signed_digest(codec.Heartbeat("n1", "active", ("n1", "n2")))
    most = 0
    for i in range(600):  # ten minutes at one a second: each id lives ttl + leeway
        now = NOW + i
        v.bind(v.verify(s.header(now, d, once=True), "n1", now), d, once=True, now=now)
        most = max(most, len(v.seen))
    live = s.once_ttl_s + v.leeway_s + 1
    assert most <= live + 1 and len(v.seen) <= live + 1


def test_a_long_jti_is_refused(tmp_path: Path) -> None:
    """The replay table holds each id ~90 s: its bytes must not be the signer's choice."""
    key = ensure_shared_secret(tmp_path).read_bytes()
    _, v = _verifier(tmp_path)
    d = codec.signed_digest(codec.Heartbeat("n1", "active", ("n1",)))
    token = jwt.encode({"iss": "n1", "iat": int(NOW), "exp": int(NOW) + 20,
                        "jti": "j" * (MAX_JTI + 1), "req": d}, key, algorithm="HS256")
    with pytest.raises(AuthError, match="jti is 65 characters"):
        v.verify("Bearer " + token, "n1", NOW)
    ok = jwt.encode({"iss": "n1", "iat": int(NOW), "exp": int(NOW) + 20,
                     "jti": "j" * MAX_JTI, "req": d}, key, algorithm="HS256")
    v.bind(v.verify("Bearer " + ok, "n1", NOW), d, once=True, now=NOW)


def test_the_verified_token_cache_forgets_its_oldest_by_count_and_by_size(tmp_path) -> None:
    """Before: a full cache was cleared whole (every token of the next moments checked its
    signature again) and bounded by count only (tokens up to ~8 KB each)."""
    s, v = _verifier(tmp_path)
    v.max_verified = 50
    tokens = [s.header(NOW, codec.statement_digest("n1", i)) for i in range(120)]
    for t in tokens:
        v.verify(t, "n1", NOW)
    assert len(v.verified) == 50
    checked = v.checked
    for t in tokens[-49:]:  # the newest are still cached: no signature checked again
        v.verify(t, "n1", NOW)
    assert v.checked == checked
    v.max_verified, v.max_verified_chars = 10_000, 20 * len(tokens[0])
    for i in range(200):
        v.verify(s.header(NOW, codec.statement_digest("n2", i)), "n1", NOW)
    assert sum(len(t) for t in v.verified) <= v.max_verified_chars
    assert len(v.verified) >= 15


def test_the_group_memory_forgets_its_oldest() -> None:
    auth._GROUPS.clear()
    for i in range(auth._MAX_GROUPS + 10):
        reqs = [codec.statement_digest("g", i, j) for j in range(2)]
        assert auth.covers({"req": auth.group_digest(reqs), "reqs": reqs}, reqs[0])
    assert len(auth._GROUPS) == auth._MAX_GROUPS
    assert auth.group_digest(reqs) in auth._GROUPS  # the newest kept, not all dropped


def test_the_journal_tail_is_bounded_by_bytes_too(tmp_path: Path) -> None:
    j = Journal(tmp_path / "events.jsonl", Clock(), tail_size=1_000, tail_bytes=20_000)
    for i in range(300):
        j.emit("refused", reason="malformed", error="x" * 1_000, n=i)
    held = sum(len(json.dumps(e, separators=(",", ":"))) for e in j._tail)
    assert held <= 20_000 and len(j._tail) >= 15
    events, _ = j.since(0)  # older events still come from the file
    assert [e["n"] for e in events] == list(range(300))
    j.close()


def test_a_group_commit_writes_each_initiators_counters_row_once(tmp_path: Path) -> None:
    """Each message taken saves its initiator's window (up to ~120 KB with a flood's far-ahead
    counters listed): a group of them wrote every row, where its last alone survives."""
    st = Store(tmp_path / "d.sqlite3")
    writes: list[str] = []
    st.db.set_trace_callback(lambda sql: writes.append(sql) if "INTO counters" in sql else None)
    big = "[null,1,9,[" + ",".join(f"[{c},{c}]" for c in range(100, 4000, 2)) + "]]"
    st.commit_records([Init(), *(Counters((("n1", 9 + i, None, big), (OWN, i, None, None)))
                                 for i in range(20)), Counters((("n2", 3, None, None),))])
    assert len(writes) == 3  # n1's last row, our own, n2's (was 41)
    d = Store(tmp_path / "d.sqlite3").load()
    assert d.counters["n1"] == (28, None, big) and d.counter == 19
    assert d.counters["n2"] == (3, None, None)


def test_a_lock_no_one_can_end_is_asked_about_ever_less_often() -> None:
    """A /voting in n1's name with a counter far ahead of n1's own (a compromised member
    holding n1's key) that n1 did not see itself takes a lock n1 answers "unknown" about for
    good (one it saw forged it ends since session 45: test_drip_forged_rounds). It was asked about
    every second, of every peer, forever: the questions of the locks a long attack left
    outgrew the attack (issue 26, session 44). The first OUTCOME_FAST_ASKS questions still
    come every ``outcome_retry_s`` (an abort crosses a line one hop per retry)."""
    c = DripCore("n2", ["n1", "n3"])
    c.start(0)
    c.on_message(Inbound("n1", 1), codec.Voting("n1", 2**19, False, Update("hx", "k", 1)), 0)
    assert c.d.locks == {"k": ("hx", "n1")}
    now, gaps, asked = 0.0, [], 0
    timer = ("lock", "k", "hx")
    due = c.cfg.lock_ttl_s
    while now < 120:
        now = due
        out = c.on_timer(timer, now)
        asked += sum(1 for e in out if isinstance(e, Send) and isinstance(e.msg, OutcomeQuery))
        for e in out:  # every peer answers "unknown", as n1 does to a round it never reached
            if isinstance(e, Send) and isinstance(e.msg, OutcomeQuery):
                c.on_message(e.to, Outcome(e.msg, 200, {"outcome": "unknown"}), now)
        (t,) = [e for e in out if isinstance(e, SetTimer) and e.name == timer]
        gaps.append(t.at - now)
        due = t.at
    assert c.d.locks == {"k": ("hx", "n1")}  # still held: nothing proves it ended
    assert gaps[:OUTCOME_FAST_ASKS - 1] == [c.cfg.outcome_retry_s] * (OUTCOME_FAST_ASKS - 1)
    assert max(gaps) == OUTCOME_RETRY_MAX_S and gaps[-1] == OUTCOME_RETRY_MAX_S
    assert asked < 2 * 40  # two peers: ~19 questions each in two minutes, was 2 x 117
    assert len(c.expired) == 1
