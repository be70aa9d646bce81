"""SWIM's hostile messages: each decodes (or fails to) the way its kind intends, per seed."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from faults.hostile import Target
from nodes.swim import codec as c
from nodes.swim import hostile as h
from nodes.swim.codec import MAX_U32, UpdateKind

TARGETS = [Target(f"n{i}", i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)]


def burst(seed: int, targets=TARGETS) -> list[tuple[str, str, bytes]]:
    return [m[:3] for m in h.messages(random.Random(seed), targets)]


def vias(seed: int, targets=TARGETS) -> dict[str, set[str | None]]:
    """kind -> the members each was forged from (None: the attacker's own address)."""
    out: dict[str, set[str | None]] = {}
    for _, k, _, via in h.messages(random.Random(seed), targets):
        out.setdefault(k, set()).add(via)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_every_kind_decodes_as_intended(seed: int) -> None:
    msgs = burst(seed)
    assert {k for _, k, _ in msgs} == set(h.INTENT)
    for node, kind, data in msgs:
        assert 0 < len(data) <= h.MAX_UDP
        want = h.INTENT[kind]
        if want is None:  # garbage: anything, but only the codec's own errors
            try:
                c.decode(data)
            except c.CodecError:
                pass
        elif issubclass(want, c.CodecError):
            with pytest.raises(want):
                c.decode(data)
        else:
            assert isinstance(c.decode(data), want), (node, kind)


def test_each_target_gets_the_whole_set() -> None:
    per = Counter(n for n, _, _ in burst(0))
    assert set(per) == {"n1", "n2", "n3"} and len(set(per.values())) == 1


def test_deterministic_per_seed() -> None:
    assert burst(5) == burst(5)
    assert burst(5) != burst(6)


def _decoded(kind: str, node: str = "n1", seed: int = 0) -> list[c.Message]:
    return [c.decode(d) for n, k, d in burst(seed) if k == kind and n == node]


def test_generations_are_the_extremes_issue_25_names() -> None:
    (self_suspect,) = _decoded("suspect-self-max-gen")
    (u,) = self_suspect.payload.updates
    assert (u.kind, u.node.id, u.node.gen) == (UpdateKind.SUSPECT, 1, MAX_U32)
    for kind, uk in (("suspect-max-gen", UpdateKind.SUSPECT), ("dead-max-gen", UpdateKind.DEAD)):
        (m,) = _decoded(kind)
        (u,) = m.payload.updates
        assert u.kind is uk and u.node.gen == MAX_U32 and u.node.id in (2, 3)
    (alive,) = _decoded("alive-huge-gen")
    assert alive.payload.updates[0].node.gen > MAX_U32 - (1 << 16)


def test_forged_messages_name_other_members_and_strangers() -> None:
    (leave,) = _decoded("forged-leave")
    assert leave.src.id in (2, 3)
    (resp,) = _decoded("forged-ping-response")
    assert resp.src == 1 and resp.target in (2, 3) and 1 <= resp.payload.seq < 1000
    (stranger,) = _decoded("join-unknown-id")
    assert stranger.src.id >= 10_000 and stranger.token == b""
    (configured,) = _decoded("join-configured-id")
    assert configured.src.id in (2, 3)
    for m in _decoded("suspect-random-gen"):
        assert m.src != 1  # forged from another member, sent to the target
        assert m.target == 1


def test_unknown_gossip_kind_is_skipped_not_dropped() -> None:
    (m,) = _decoded("unknown-gossip-kind")
    assert m.payload.updates == () and m.payload.skipped == (h.UNKNOWN_KIND,)


def test_replays_and_oversize() -> None:
    a, b = [d for n, k, d in burst(0) if k == "replay" and n == "n1"]
    assert a == b
    (nak,) = _decoded("nak-oversize-etag")
    assert len(nak.etag) > 60_000
    assert [len(d) for n, k, d in burst(0) if k == "oversize-datagram" and n == "n1"] == [h.MAX_UDP]


def test_a_lone_target_still_gets_forged_peers() -> None:
    msgs = burst(0, TARGETS[:1])
    assert {k for _, k, _ in msgs} == set(h.INTENT) - h.VIA_MEMBER  # no member to forge from
    (leave,) = [c.decode(d) for _, k, d in msgs if k == "forged-leave"]
    assert leave.src.id != 1


def test_refusals_reads_the_known_counters_and_new_refused_ones() -> None:
    state = {"stats": {"unknown": 1, "malformed": 2, "unknown_sender": 3, "sent": 99,
                       "refused_generations": 4, "unknown_gossip": 5, "refused_strangers": 6,
                       "refused_leaves": 7, "cpu_s": 0.5}}
    assert h.refusals(state) == {"malformed": 2, "refused_generations": 4, "refused_leaves": 7,
                                 "refused_strangers": 6, "unknown": 1, "unknown_gossip": 5,
                                 "unknown_sender": 3}
    assert h.refusals({}) == {}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_member_kinds_come_from_a_member_that_they_name_as_sender(seed: int) -> None:
    by_kind = vias(seed)
    assert {k for k, v in by_kind.items() if v != {None}} == h.VIA_MEMBER
    ids = {t.node: t.num_id for t in TARGETS}
    for node, kind, data, via in h.messages(random.Random(seed), TARGETS):
        if via is None:
            continue
        assert via != node and via in ids
        m = c.decode(data)
        sender = m.src if isinstance(m, c.PingRequest) else (
            m.target if isinstance(m, c.PingResponse) else None)
        if sender is not None:
            assert sender == ids[via], (kind, m)  # origin checks pass: it names its address
        if isinstance(m, c.Leave):
            assert m.src.id not in (ids[via], ids[node])  # a Leave for a third member


def test_a_stale_death_follows_an_alive_above_it_about_the_same_member() -> None:
    for node in ("n1", "n2", "n3"):
        got = {k: c.decode(d) for n, k, d in burst(4) if n == node and k.startswith("member-")}
        alive, dead, suspect = (got[k].payload.updates[0] for k in (
            "member-alive-next-gen", "member-dead-stale", "member-suspect-stale"))
        assert (alive.kind, alive.node.gen) == (UpdateKind.ALIVE, 1)
        assert dead.kind is UpdateKind.DEAD and suspect.kind is UpdateKind.SUSPECT
        assert alive.node.id == dead.node.id == suspect.node.id
        assert dead.node.gen == suspect.node.gen == 0
        kinds = [k for n, k, _ in burst(4) if n == node]
        assert kinds.index("member-alive-next-gen") < kinds.index("member-dead-stale")


def test_refusals_flatten_the_trust_boundary_reasons_without_counting_twice() -> None:
    state = {"stats": {"unknown_sender": 3, "refused": {"unknown-address": 3,
                                                        "origin-mismatch": 2}}}
    assert h.refusals(state) == {"refused:origin-mismatch": 2, "unknown_sender": 3}
