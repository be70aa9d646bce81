"""Interop with @waku/sds 0.0.8 (issue 24): a mixed group of our SDS nodes and @waku/sds
MessageChannels (interop/waku_sds/bridge.mjs), all on loopback UDP with the same wire bytes.

Both kinds deliver the same logs in the same order, acknowledge each other (causal history and
bloom filter, each read by the other kind's own code) and repair each other over SDS-R: a
message one kind never got from its sender is rebroadcast by the other kind, with the original
sender dead so nothing but SDS-R can heal it. The short run is in the default suite; the long
one (more messages a member) is nightly (``chaos``)."""

from __future__ import annotations

import pytest

from nodes.sds.bloom import contains
from tests.integration.sds.waku_bridge import bridge_ready, start_group, stop_group, wait_for


@pytest.fixture(scope="module")
def bridge() -> None:
    why = bridge_ready()
    if why:
        pytest.skip(why)


def _same_logs(members, names, expect: int) -> bool:
    logs = [members[n].log_ids() for n in names]
    return len(logs[0]) == expect and all(lg == logs[0] for lg in logs)


def _run(tmp_path, per_member: int) -> None:
    ours, waku = ["n1", "n2"], ["w1", "w2"]
    g = start_group(ours, waku, tmp_path)
    try:
        # ---- 1. everyone sends; same logs, same order; acks both ways ----
        sent: dict[str, list[str]] = {n: [] for n in g}
        for i in range(per_member):
            for n in g:
                sent[n].append(g[n].send(f"{n}:{i}:same-payload-shape"))
        total = per_member * len(g)
        wait_for(lambda: _same_logs(g, list(g), total), 30, "identical logs on all four")
        for n in ours:  # the order is the spec's (Lamport, id) on our side ...
            entries = g[n].state()["log"]
            assert [(e["lamport"], e["id"]) for e in entries] == sorted(
                (e["lamport"], e["id"]) for e in entries)
        wlog = g["w1"].state()["log"]  # ... and @waku/sds keeps the same order
        assert [(int(e["lamport"]), e["id"]) for e in wlog] == sorted(
            (int(e["lamport"]), e["id"]) for e in wlog)
        assert {e["id"] for e in wlog} == {i for ids in sent.values() for i in ids}

        # our nodes acknowledge @waku/sds: js reads our causal histories and bloom filters
        def js_acked_by_ours() -> bool:
            for w in waku:
                seen = g[w].state()["peers_acked_own"]
                for n in ours:
                    got = set(seen.get(n, {}).get("history", [])) | set(seen.get(n, {}).get("bloom", []))
                    if not set(sent[w]) <= got:
                        return False
            return True
        wait_for(js_acked_by_ours, 15, "every @waku/sds message in our nodes' history/bloom")
        # @waku/sds's own buffer empties (acknowledged by its rules)
        wait_for(lambda: all(not g[w].state()["outgoing"]["unacknowledged"]
                             and set(sent[w]) <= set(g[w].state()["acked"]) for w in waku),
                 15, "@waku/sds outgoing buffers acknowledged")

        # @waku/sds acknowledges our nodes: our bloom code reads every js member's filter as
        # holding all our messages, and our nodes take acknowledgements from js members
        for w in waku:
            bloom = bytes.fromhex(g[w].state()["bloom"])
            assert len(bloom) == 18_752
            assert all(contains(bloom, mid) for n in ours for mid in sent[n])
            assert not contains(bloom, "not-a-message-anyone-sent")

        def ours_acked() -> bool:
            acks = [(e["id"], e["by"]) for n in ours for e in g[n].events() if e["type"] == "ack"]
            return ({i for i, _ in acks} >= {mid for n in ours for mid in sent[n]}
                    and any(by in waku for _, by in acks))
        wait_for(ours_acked, 15, "every message of ours acknowledged, some by @waku/sds members")
        wait_for(lambda: all(not g[n].state()["outgoing_buffer"] for n in ours), 15,
                 "our outgoing buffers drained")

        # ---- 2. ours repairs @waku/sds: both js members miss M from its sender n1 ----
        m = "n1:only-n2-can-repair"
        for w in waku:  # M only through from n2: n1's sends, resends and rebroadcasts are lost
            g[w].call(op="drop", payload=m, except_from=["n2"])
        m_id = g["n1"].send(m)
        wait_for(lambda: m_id in g["n2"].log_ids(), 10, "n2 has M")
        g["n1"].stop()  # the sender is gone for good: only SDS-R can heal
        p_id = g["n2"].send("n2:depends-on-M")  # its causal history names M
        live = ["n2", *waku]
        wait_for(lambda: _same_logs(g, live, total + 2), 30, "M repaired to both @waku/sds members")
        for w in waku:
            st = g[w].state()
            assert st["stats"]["dropped"] >= 1, st["stats"]
            assert m_id in st["repair"]["missing"], st["repair"]
            assert g[w].log_ids().index(m_id) < g[w].log_ids().index(p_id)
        # one js member asks; the other sees that request and drops its own (SDS-R suppression)
        assert any(m_id in g[w].state()["repair"]["requests_sent"] for w in waku)
        assert any(e["type"] == "repair-response" and e["id"] == m_id for e in g["n2"].events())

        # ---- 3. @waku/sds repairs ours: n2 never gets Q from its sender w1 ----
        q_id = g["w1"].send("w1:only-w2-can-repair", exclude=["n2"])
        wait_for(lambda: q_id in g["w2"].log_ids(), 10, "w2 has Q")
        g["w1"].stop()
        r_id = g["w2"].send("w2:depends-on-Q")
        wait_for(lambda: _same_logs(g, ["n2", "w2"], total + 4), 30, "Q repaired to n2")
        ev = g["n2"].events()
        assert any(e["type"] == "repair-request" and q_id in e["ids"] for e in ev)
        assert q_id in g["w2"].state()["repair"]["responses_sent"]
        log = g["n2"].log_ids()
        assert log.index(q_id) < log.index(r_id)
    finally:
        stop_group(g)


def test_mixed_group_short(tmp_path, bridge) -> None:
    _run(tmp_path, per_member=3)


@pytest.mark.chaos
def test_mixed_group_nightly(tmp_path, bridge) -> None:
    _run(tmp_path, per_member=25)
