"""ANTACID's hostile provider builds what INTENT claims: each attack is fed to our own
listening BEEP session and its ARS payload to our own parser, and breaks exactly the layer
its kind names (framing, XML, schema/range, or none: a well-formed request the core refuses)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from nodes.antacid import beep
from nodes.antacid import hostile as h
from nodes.antacid import messages as m

FRAMING = {"bad-header", "wrong-size", "seqno-gap", "window-overrun", "oversize-frame",
           "oversize-message", "garbage"}
BAD_XML = {"malformed-xml", "billion-laughs", "external-dtd", "schema-invalid", "ssn-2^64",
           "csn-negative"}
WELL_FORMED = {"forged-propagate": m.PropagateSubmittedUpdate,
               "forged-push": m.PushCommittedUpdates, "replay": m.PropagateSubmittedUpdate,
               "pull-far-ahead": m.PullCommittedUpdates}


@dataclass(frozen=True)
class T:
    node: str


TARGETS = [T("n1"), T("n2"), T("n3")]


def burst(seed: int = 1) -> list[tuple[str, str, bytes]]:
    return list(h.messages(random.Random(seed), TARGETS))


def listen(data: bytes) -> list[beep.Event]:
    s = beep.Session(beep.LISTENER, (h.PROFILE,))
    s.data_to_send()
    return s.receive_data(data)


def test_every_kind_for_every_target_and_replays_by_seed() -> None:
    out = burst()
    for t in TARGETS:
        assert {k for n, k, _ in out if n == t.node} == set(h.INTENT)
    assert set(h.INTENT) == FRAMING | BAD_XML | set(WELL_FORMED) | {"channel-flood"}
    assert out == burst()
    assert [d for *_, d in out] != [d for *_, d in burst(2)]


@pytest.mark.parametrize("kind", sorted(FRAMING))
def test_framing_attacks_close_the_session(kind: str) -> None:
    for _, k, data in burst():
        if k == kind:
            evs = listen(data)
            assert not any(isinstance(e, beep.Message) for e in evs)
            closed = [e for e in evs if isinstance(e, beep.SessionClosed)]
            if kind == "garbage" and not closed:  # a short random prefix may be an unfinished header
                assert b"\r\n" not in data[:82]
                continue
            assert closed and closed[0].error, (kind, evs)


def _messages(data: bytes) -> tuple[list[beep.ChannelStarted], list[beep.Message]]:
    evs = listen(data)
    assert not any(isinstance(e, beep.SessionClosed) for e in evs), evs
    return ([e for e in evs if isinstance(e, beep.ChannelStarted)],
            [e for e in evs if isinstance(e, beep.Message)])


@pytest.mark.parametrize("kind", sorted(BAD_XML))
def test_xml_attacks_reach_ars_and_are_refused_by_our_parser(kind: str) -> None:
    for _, k, data in burst():
        if k == kind:
            _, msgs = _messages(data)
            assert len(msgs) == 1
            with pytest.raises(m.ArsProtocolError):
                m.parse(msgs[0].body)


def test_entity_bodies_are_what_they_claim() -> None:
    assert h.billion_laughs().count(b"<!ENTITY") == h.LAUGHS
    assert b"SYSTEM \"http://" in h.external_dtd() and b"file:///etc/passwd" in h.external_dtd()


@pytest.mark.parametrize("kind", sorted(WELL_FORMED))
def test_forged_requests_are_valid_ars_posing_as_a_server(kind: str) -> None:
    for node, k, data in burst():
        if k != kind:
            continue
        started, msgs = _messages(data)
        assert [s.channel for s in started] == [1] and started[0].content
        assert len(msgs) == (2 if kind == "replay" else 1)
        reqs = [m.parse(x.body) for x in msgs]
        assert all(isinstance(r, m.ArsRequest) and isinstance(r.body, WELL_FORMED[kind])
                   for r in reqs)
        if kind == "replay":
            assert reqs[0] == reqs[1] and started[0].content == node
        if kind == "pull-far-ahead":
            assert reqs[0].body.states[0].last_seen_csn == 2**63
            assert started[0].content != node


def test_posers_cover_the_other_servers() -> None:
    posers: dict[tuple[str, str], set[str]] = {}
    for node, k, data in burst():
        if k in ("forged-push", "pull-far-ahead", "forged-propagate"):
            started, _ = _messages(data)
            posers.setdefault((node, k), set()).add(started[0].content)
    assert posers[("n2", "forged-push")] == {"n1", "n2", "n3"}
    assert posers[("n2", "pull-far-ahead")] == {"n1", "n3"}
    assert "n2" in posers[("n2", "forged-propagate")]


def test_channel_flood_is_refused_past_the_channel_limit() -> None:
    data = next(d for _, k, d in burst() if k == "channel-flood")
    s = beep.Session(beep.LISTENER, (h.PROFILE,))
    s.data_to_send()
    evs = s.receive_data(data)
    started = [e for e in evs if isinstance(e, beep.ChannelStarted)]
    assert not any(isinstance(e, beep.SessionClosed) for e in evs)
    assert len(started) == s.limits.max_channels - 1 < h.FLOOD_STARTS
    # its answers (RPY, then ERR for the excess) wait on the window we never slide: the
    # starts past the limit opened nothing, and the session lives on
    assert sorted(s.open_channels()) == [e.channel for e in started]


def test_refusals_reads_the_refused_map_and_malformed_count() -> None:
    state = {"refused": {"ars-error:223003": 2, "beep-session-failed": 5},
             "io": {"malformed_in": 3, "requests_in": 9}}
    assert h.refusals(state) == {"malformed_in": 3, "refused:ars-error:223003": 2,
                                 "refused:beep-session-failed": 5}
    assert h.refusals({}) == {}
