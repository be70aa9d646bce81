"""The DRiP hostile provider: each attack kind builds the request it claims (decoded back with
the node's own codec and verified with the node's own token checks)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from multidict import CIMultiDict

from harness.spec import TestSpec
from harness.suites.drip import PROTOCOL, node_extra
from nodes.drip import codec
from nodes.drip.auth import AuthError, load_auth
from nodes.drip.codec import CodecError
from nodes.drip.hostile import (
    ARABIC_100,
    DEEP,
    FRESH_AHEAD,
    FRESH_SPREAD,
    INTENT,
    MANY_MEMBERS,
    MAX_I63,
    MAX_U64,
    ONE_MIB,
    Attack,
    Burst,
    Creds,
    DripTarget,
    HostileDrip,
    Known,
    refusals,
)

IDS = ["n1", "n2", "n3"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Attack], dict]:
    root = tmp_path_factory.mktemp("pki")
    spec = TestSpec("h", protocol=PROTOCOL, nodes=3, options={"jwt_mode": "public"})
    extras = {n: node_extra(spec, i, root) for i, n in enumerate(IDS)}
    creds = Creds.load("n1", extras["n1"]["tls"], extras["n1"]["jwt"])
    second = Creds.load("n3", extras["n3"]["tls"], extras["n3"]["jwt"])
    known = Known({"n1": 500, "n3": 700}, ("u-applied",), ("u-open",))
    attacks = Burst(creds, IDS, random.Random(7), flood=5, second=second).build(
        DripTarget("n2", "127.0.0.1", 1, 2), known)
    return attacks, extras


def _parse(raw: bytes) -> tuple[str, str, CIMultiDict[str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    line, *rest = head.decode().split("\r\n")
    method, path, _ = line.split(" ")
    headers: CIMultiDict[str] = CIMultiDict(h.split(": ", 1) for h in rest)
    return method, path, headers, body


def _of(attacks: list[Attack], kind: str, port: str = "peer") -> list[Attack]:
    return [a for a in attacks if a.kind == kind and a.port == port]


def _decoded(a: Attack) -> codec.Message:
    method, path, headers, body = _parse(a.raw)
    assert int(headers["Content-Length"]) == len(body)
    return codec.decode(method, path, headers, body, headers.get(codec.H_AUTH))


def test_every_kind_is_built_for_the_target(built: tuple[list[Attack], dict]) -> None:
    attacks, _ = built
    assert {a.kind for a in attacks} == set(INTENT)
    assert {a.node for a in attacks} == {"n2"}
    assert len(_of(attacks, "voting-flood-hot-key")) == 5 == len(_of(attacks, "sync-request-flood"))


def test_signed_kinds_carry_a_token_n2_accepts_for_that_very_request(
        built: tuple[list[Attack], dict]) -> None:
    attacks, extras = built
    _, verifier = load_auth("n2", extras["n2"]["jwt"])
    for kind in ("heartbeat-ghost", "commit-without-vote", "sync-unsolicited",
                 "vote-response-forged-voters", "voting-flood-hot-key"):
        msg = _decoded(_of(attacks, kind)[0])
        _, _, headers, _ = _parse(_of(attacks, kind)[0].raw)
        claims = verifier.verify(headers[codec.H_AUTH], "n1", time.time())
        verifier.bind(claims, codec.signed_digest(msg), once=False, now=time.time())


def test_forged_members_and_unknown_senders(built: tuple[list[Attack], dict]) -> None:
    attacks, extras = built
    ghost = _decoded(_of(attacks, "heartbeat-ghost")[0])
    assert isinstance(ghost, codec.Heartbeat) and "ghost" in ghost.members
    many = _of(attacks, "heartbeat-5000-members")[0]
    assert len(json.loads(_parse(many.raw)[3])["members"]) == MANY_MEMBERS
    with pytest.raises(CodecError, match="more than the maximum"):  # the node's codec bounds it
        _decoded(many)
    unknown = _decoded(_of(attacks, "voting-unknown-node")[0])
    assert isinstance(unknown, codec.Voting) and unknown.initiator not in IDS
    creds = Creds.load("n1", extras["n1"]["tls"], extras["n1"]["jwt"])
    alone = Burst(creds, IDS, random.Random(7)).build(DripTarget("n2", "127.0.0.1", 1, 2))
    other = _decoded(_of(alone, "commit-other-initiator")[0])
    assert isinstance(other, codec.Commit) and other.initiator == "n3"
    assert _of(alone, "commit-other-initiator")[0].setup is None
    # public-key mode: n1 cannot sign as n3, so n2 refuses that token (shared mode would not)
    _, verifier = load_auth("n2", extras["n2"]["jwt"])
    with pytest.raises(AuthError):
        verifier.verify(_parse(_of(alone, "commit-other-initiator")[0].raw)[2][codec.H_AUTH],
                        "n3", time.time())
    assert not _of(alone, "revote-applied")  # no applied update known: not sent
    forged = _decoded(_of(attacks, "vote-response-forged-voters")[0])
    assert isinstance(forged, codec.VoteResponse) and forged.yes
    assert forged.voters == tuple(IDS) and forged.initiator == "n2" and not forged.statements
    relayed = _decoded(_of(attacks, "vote-response-relayed-voters")[0])
    assert isinstance(relayed, codec.VoteResponse) and relayed.uid == "u-open"
    assert relayed.voters == tuple(IDS) and relayed.responder == "n1" and not relayed.statements
    assert attacks[0].kind == "vote-response-relayed-voters"  # first: the lock is fresh
    assert not _of(alone, "vote-response-relayed-voters")  # no lock known: not sent


def test_extreme_numbers(built: tuple[list[Attack], dict]) -> None:
    attacks, _ = built
    top = _of(attacks, "commit-version-2^63-1")[0]
    assert json.loads(_parse(top.raw)[3])["version"] == MAX_I63
    with pytest.raises(CodecError, match="exceeds the maximum"):  # the node's codec bounds it
        _decoded(top)
    _, _, _, body = _parse(_of(attacks, "commit-version-2^64")[0].raw)
    assert json.loads(body)["version"] == MAX_U64 + 1
    near = _decoded(_of(attacks, "voting-counter-near-max")[0])
    assert isinstance(near, codec.Voting) and near.counter == MAX_U64 - 1 and not near.reset
    reset = _of(attacks, "voting-reset")[0]
    assert _parse(reset.raw)[2][codec.H_RESET].lower() == "true"
    with pytest.raises(CodecError, match="only at the wrap-around"):  # reset mid-sequence refused
        _decoded(reset)


def test_no_vote_commits_syncs_and_floods(built: tuple[list[Attack], dict]) -> None:
    attacks, extras = built
    c = _decoded(_of(attacks, "commit-without-vote")[0])
    assert isinstance(c, codec.Commit) and c.initiator == "n1"
    assert 500 + FRESH_AHEAD <= c.counter < 500 + FRESH_AHEAD + FRESH_SPREAD
    s = _decoded(_of(attacks, "sync-unsolicited")[0])
    assert isinstance(s, codec.SyncBatch) and s.source == "n1" and len(s.items) == 50
    assert 500 + FRESH_AHEAD <= s.counter < 500 + FRESH_AHEAD + FRESH_SPREAD


def test_vote_round_attacks_use_counters_inside_the_window(
        built: tuple[list[Attack], dict]) -> None:
    """n1's counter is 500 and n3's 700 (`Known`): their messages are fresh, ahead of that
    and inside the window; the other-initiator commit is n3's, with n3's own valid token."""
    attacks, extras = built
    a = _of(attacks, "commit-other-initiator")[0]
    assert a.setup is not None
    method, path, headers, body = _parse(a.setup)
    vote = codec.decode(method, path, headers, body, headers.get(codec.H_AUTH))
    assert isinstance(vote, codec.Voting) and vote.initiator == "n1"
    assert 500 + FRESH_AHEAD <= vote.counter < 500 + FRESH_AHEAD + FRESH_SPREAD < 500 + 2**20
    commit = _decoded(a)
    assert isinstance(commit, codec.Commit) and commit.initiator == "n3"
    assert commit.update.uid == vote.update.uid
    assert 700 + FRESH_AHEAD <= commit.counter < 700 + FRESH_AHEAD + FRESH_SPREAD
    _, verifier = load_auth("n2", extras["n2"]["jwt"])
    claims = verifier.verify(_parse(a.raw)[2][codec.H_AUTH], "n3", time.time())
    verifier.bind(claims, codec.signed_digest(commit), once=False, now=time.time())
    again = _decoded(_of(attacks, "revote-applied")[0])
    assert isinstance(again, codec.Voting) and again.update.uid == "u-applied"
    assert 500 + FRESH_AHEAD <= again.counter < 500 + FRESH_AHEAD + FRESH_SPREAD
    hot = [_decoded(a) for a in _of(attacks, "voting-flood-hot-key")]
    assert {v.update.key for v in hot} == {"hk0"}  # type: ignore[union-attr]
    assert len({v.update.uid for v in hot}) == len(hot)  # type: ignore[union-attr]
    assert all(isinstance(_decoded(a), codec.SyncRequest)
               for a in _of(attacks, "sync-request-flood"))


def test_malformed_input(built: tuple[list[Attack], dict]) -> None:
    attacks, _ = built
    _, _, _, deep = _parse(_of(attacks, "deep-json")[0].raw)
    assert deep == b"[" * DEEP + b"]" * DEEP
    for a in _of(attacks, "lone-surrogate-key") + _of(attacks, "lone-surrogate-key", "client"):
        assert json.loads(_parse(a.raw)[3])["key"] == "k\ud800"
    assert _of(attacks, "lone-surrogate-key", "client")[0].tls is None
    _, _, headers, _ = _parse(_of(attacks, "budget-non-ascii-digits")[0].raw)
    assert headers[codec.H_BUDGET] == ARABIC_100 and ARABIC_100.isdigit()
    big = _of(attacks, "oversize-value", "client")[0]
    assert len(json.loads(_parse(big.raw)[3])["value"]) > ONE_MIB


def test_connection_attacks(built: tuple[list[Attack], dict]) -> None:
    attacks, _ = built
    assert {a.how for a in attacks if a.kind == "slow-connection"} == {"slow"}
    idle = _of(attacks, "idle-partial-head", "client")[0]
    assert idle.how == "hold" and not idle.raw.endswith(b"\r\n\r\n")
    bare = _of(attacks, "tls-no-client-cert")[0]
    assert bare.tls == "bare" and bare.how == "hold"
    assert all(a.tls == "cert" for a in attacks
               if a.port == "peer" and a.kind != "tls-no-client-cert")


def test_bad_rate_is_refused(built: tuple[list[Attack], dict], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        HostileDrip(None, [], random.Random(1), rate=0)  # type: ignore[arg-type]


def test_refusals_reads_the_per_reason_map() -> None:
    assert refusals({"refused": {"no-client-cert": 3, "malformed": 2}}) == {
        "refused:malformed": 2, "refused:no-client-cert": 3}
    assert refusals({}) == {}


def test_the_driver_attacks_each_node_as_one_of_its_configured_peers(tmp_path: Path) -> None:
    from faults.hostile import Target
    from nodes.drip.hostile import driver

    spec = TestSpec("h", protocol=PROTOCOL, nodes=3, options={"jwt_mode": "public"})
    configs = {n: {**node_extra(spec, i, tmp_path), "ports": {"client": 9000 + i},
                   "peers": {p: {} for p in IDS if p != n}, "options": {"hostile_rate": 7}}
               for i, n in enumerate(IDS)}
    h = driver([Target(n, i + 1, "127.0.0.1", 8000 + i) for i, n in enumerate(IDS)],
               random.Random(1), configs)
    assert {n: c.node for n, c in h.creds.items()} == {"n1": "n2", "n2": "n1", "n3": "n1"}
    assert [(t.peer_port, t.client_port) for t in h.targets] == [(8000, 9000), (8001, 9001),
                                                                  (8002, 9002)]
    assert h.rate == 7 and not h.running



def test_a_correct_node_run_leaves_out_the_key_holders_own_forged_yes(built) -> None:
    """A yes signed with a compromised member's own key, on a vote the target really waits on,
    is that member's word: no node can refuse it, so `key_holder_lies=False` (the correct-node
    chaos test's option) sends no such answer; the default still does (the bug modes need it)."""
    attacks, extras = built
    assert _of(attacks, "vote-response-relayed-voters")
    creds = Creds.load("n1", extras["n1"]["tls"], extras["n1"]["jwt"])
    honest = Burst(creds, IDS, random.Random(7), key_holder_lies=False).build(
        DripTarget("n2", "127.0.0.1", 1, 2), Known({"n1": 500}, (), ("u-open",)))
    assert not [a for a in honest if a.kind == "vote-response-relayed-voters"]
    assert [a for a in honest if a.kind == "vote-response-forged-voters"]  # still refusable
