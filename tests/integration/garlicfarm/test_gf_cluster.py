"""Three (and four) real Garlic Farm node processes on loopback, peers wired directly."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest

from checkers.observations import evidence_gaps, reported_gaps
from nodes.common.pki import ensure_ca, issue_node_cert
from nodes.garlicfarm.client import KVClient, KVFail, WireClient, WireConnection, WireFail
from nodes.garlicfarm.codec import LogEntry, MsgType, Request, ValueType, encode
from nodes.garlicfarm.tls import client_context
from tests.integration.garlicfarm.cluster import LocalCluster


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path)
    try:
        yield c
    finally:
        c.stop_all()


def _wire(c: LocalCluster, nodes: list[str]) -> WireClient:
    return WireClient({c.num(n): f"127.0.0.1:{c.ports[n]['peer']}" for n in nodes}, timeout=3,
                      tls=c.client_tls(), names={c.num(n): n for n in nodes})


def test_kv_and_appends_survive_leader_kill(cluster):
    c = cluster
    c.start_all()
    leader = c.leader()
    acked: dict[str, int] = {}
    appended: dict[str, int] = {}

    hints: list[int | None] = []

    async def phase1():
        kvs = {n: KVClient(f"http://127.0.0.1:{c.ports[n]['client']}") for n in c.ids}
        try:
            for k in range(12):
                n = c.ids[k % 3]  # followers forward to the leader
                await kvs[n].write(f"k{k % 4}", k)
                acked[f"k{k % 4}"] = k
            assert await kvs["n1"].read("k0") == acked["k0"]
            await kvs["n2"].cas("k1", acked["k1"], 100)
            acked["k1"] = 100
            with pytest.raises(KVFail) as ei:
                await kvs["n3"].cas("k1", 5, 6)
            assert ei.value.error == "cas-mismatch"
        finally:
            for kv in kvs.values():
                await kv.close()
        async with _wire(c, c.ids) as w:
            for k in range(5):
                v = f"n1:{k}:ab{k}"
                appended[v] = await w.append({"append": v}, prefer=1)
            hints.append(w.leader_hint)

    asyncio.run(phase1())
    # on a loaded machine leadership may have moved since the start: use the current leader
    leader = c.leader(c.ids)
    assert hints[0] in [c.num(n) for n in c.ids]  # the client found a leader by its hints
    c.kill(leader)
    survivors = [n for n in c.ids if n != leader]
    new_leader = c.leader(survivors)
    assert new_leader != leader

    async def phase2():
        async with KVClient(f"http://127.0.0.1:{c.ports[survivors[0]]['client']}") as kv:
            for key, v in acked.items():
                assert await kv.read(key) == v, key
            await kv.write("after", 1)
        async with _wire(c, survivors) as w:
            appended["after-kill"] = await w.append({"append": "after-kill"})

    asyncio.run(phase2())
    st = c.admin(new_leader, "/admin/state")
    by_index = {e["index"]: e for e in st["log"]}
    for v, idx in appended.items():
        assert by_index[idx]["data"] == {"append": v}, (v, idx)

    # the killed node restarts from its data dir and converges on the same log
    c.start(leader)
    c.wait_health(leader)
    end = time.monotonic() + 15
    while time.monotonic() < end:
        st2 = c.admin(leader, "/admin/state")
        if st2["commit_index"] >= st["commit_index"]:
            break
        time.sleep(0.2)
    d2 = {e["index"]: e["digest"] for e in st2["log"]}
    assert all(d2[i] == e["digest"] for i, e in by_index.items() if i <= st["commit_index"])
    ev = c.admin(leader, "/admin/events?since=0")["events"]
    starts = [e for e in ev if e["type"] == "start"]
    assert len(starts) == 2 and starts[1]["last_index"] > 0


def test_new_server_joins(tmp_path):
    c = LocalCluster(tmp_path, n=3, extra=1, options={"snapshot_threshold": 20})
    try:
        c.start_all()
        c.leader()

        async def load():
            async with KVClient(f"http://127.0.0.1:{c.ports['n1']['client']}") as kv:
                for k in range(30):
                    await kv.write("x", k)

        asyncio.run(load())
        c.start("n4", join=True)
        c.wait_health("n4")
        end = time.monotonic() + 20
        st = {}
        while time.monotonic() < end:
            st = c.admin("n4", "/admin/state")
            if 4 in st["servers"] and st["kv"].get("x") == 29:
                break
            time.sleep(0.2)
        assert 4 in st["servers"] and st["kv"].get("x") == 29, st
        assert 4 in c.admin(c.leader(), "/admin/state")["servers"]
        types = [e["type"] for e in c.admin("n4", "/admin/events?since=0")["events"]]
        assert "join-invited" in types and "snapshot" in types  # JoinCluster then InstallSnapshot

        # disconnect sequence: RemoveServerRequest -> LeaveClusterRequest
        req = urllib.request.Request(f"http://127.0.0.1:{c.ports['n4']['admin']}/admin/leave", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            assert json.loads(r.read())["ok"]
        # The leader ends the leave with a configuration without n4 either when n4 accepts
        # LeaveCluster (then n4 knows it was removed) or once leave_timeout passes without an
        # answer (as JRaft does; then n4 may never learn it). Check exactly that promise.
        end = time.monotonic() + 20
        done: list[dict] = []
        while time.monotonic() < end and not done:
            for n in ("n1", "n2", "n3"):
                evs = c.admin(n, "/admin/events?since=0")["events"]
                done += [e for e in evs if e["type"] == "leave-complete"
                         and e.get("server") == 4]
            time.sleep(0.2)
        assert done, "no leader finished n4's leave within 20 s"
        assert c.admin(c.leader(["n1", "n2", "n3"]), "/admin/state")["servers"] == [1, 2, 3]
        if any(e.get("answered") for e in done):
            assert c.admin("n4", "/admin/state")["removed"]
    finally:
        c.stop_all()


def test_ack_before_fsync_bug_loses_acknowledged_writes(tmp_path):
    """The bug mode must be observable: kill -9 everyone right after acks, writes vanish."""
    c = LocalCluster(tmp_path, bugs=["ack-before-fsync"], options={"deferred_flush_ms": 600_000})
    try:
        c.start_all()
        c.leader()

        async def write():
            async with KVClient(f"http://127.0.0.1:{c.ports['n1']['client']}") as kv:
                await kv.write("x", 42)

        asyncio.run(write())
        for n in c.ids:
            c.kill(n)
        for n in c.ids:
            c.start(n)
        for n in c.ids:
            c.wait_health(n)
        c.leader()

        async def read():
            async with KVClient(f"http://127.0.0.1:{c.ports['n2']['client']}") as kv:
                return await kv.read("x")

        assert asyncio.run(read()) is None  # the acknowledged write is gone
    finally:
        c.stop_all()


def test_plain_tcp_only_when_asked(tmp_path):
    """``tls: false`` serves plain TCP; a TLS client cannot talk to it, a plain one can."""
    c = LocalCluster(tmp_path, options={"tls": False})
    try:
        c.start_all()
        c.leader()

        async def go():
            async with KVClient(f"http://127.0.0.1:{c.ports['n3']['client']}") as kv:
                await kv.write("t", 1)
                assert await kv.read("t") == 1
            async with WireClient({c.num(n): f"127.0.0.1:{c.ports[n]['peer']}" for n in c.ids}) as w:
                assert await w.append({"append": "plain"}) > 0
            ca = c.base / "other-ca"
            ctx = client_context(issue_node_cert(ca, "n1", ensure_ca(ca)).ca)
            tls_conn = WireConnection("127.0.0.1", c.ports["n1"]["peer"], tls=ctx, server_name="n1")
            with pytest.raises(WireFail):
                await tls_conn.request(Request(MsgType.CLIENT_REQUEST, 0, 1, 0), 3)

        asyncio.run(go())
    finally:
        c.stop_all()


def test_malformed_frame_closes_only_that_connection(tmp_path):
    c = LocalCluster(tmp_path, n=1)
    try:
        c.start_all()
        c.leader()

        async def go():
            good = WireConnection("127.0.0.1", c.ports["n1"]["peer"], tls=c.client_tls(), server_name="n1")
            bad = WireConnection("127.0.0.1", c.ports["n1"]["peer"], tls=c.client_tls(), server_name="n1")
            await good.open()
            await bad.open()
            bad.writer.write(b"\x63" + b"\x00" * 60)  # unknown message type
            assert await bad.reader.read() == b""  # closed by the node
            r, w = await asyncio.open_connection("127.0.0.1", c.ports["n1"]["peer"], ssl=c.client_tls(),
                                                 server_hostname="n1")
            w.write(b"GET /nope HTTP/1.1\r\n\r\n")
            assert (await r.read()).startswith(b"HTTP/1.1 404")
            resp = await good.request(Request(MsgType.CLIENT_REQUEST, 0, 1, 0), 3)
            assert resp.accepted  # the other connection is unaffected
            good.close()

        asyncio.run(go())
        assert c.admin("n1", "/admin/health")["ok"]
        events = c.admin("n1", "/admin/events?since=0")["events"]
        refused = {e["reason"]: e for e in events if e["type"] == "wire-refused"}
        # journaled and counted, not silently dropped
        assert sorted(refused) == ["bad-frame", "bad-handshake"], refused
        assert "CodecError" in refused["bad-frame"]["detail"], refused
        assert c.admin("n1", "/admin/state")["wire_refused"] == {"bad-frame": 1, "bad-handshake": 1}
    finally:
        c.stop_all()


def test_a_forged_meta_ls_status_is_journaled_as_lost_evidence_and_the_node_goes_on(tmp_path):
    """A peer proposes a Meta LS status whose id is not a number: every node commits it, none
    can apply it. Each says so in its journal (a node error that cost evidence), the checkers
    read that as a gap, and the cluster keeps serving."""
    c = LocalCluster(tmp_path, n=1)
    forged = json.dumps({"cluster": "farm", "date": 1, "id": "not-a-number"}).encode()
    try:
        c.start_all()
        c.leader()

        async def go() -> None:
            conn = WireConnection("127.0.0.1", c.ports["n1"]["peer"], tls=c.client_tls(), server_name="n1")
            await conn.open()
            resp = await conn.request(Request(MsgType.CLIENT_REQUEST, 0, 1, 0, entries=(
                LogEntry(0, ValueType.APPLICATION, forged),)), 3)
            assert resp.accepted
            conn.close()
            async with KVClient(f"http://127.0.0.1:{c.ports['n1']['client']}") as kv:
                await kv.write("k", 1)  # still serving: raises KVFail otherwise
                assert await kv.read("k") == 1

        asyncio.run(go())
        events = c.admin("n1", "/admin/events?since=0")["events"]
        errors = [e for e in events if e["type"] == "node-error"]
        assert errors and errors[0]["evidence"] is True, events
        assert "Meta LS status at index" in errors[0]["where"] and "not-a-number" in errors[0]["error"]
        gaps = evidence_gaps({"nodes": {"n1": {"events": events, "state": {},
                                                "missing": reported_gaps(events)}}},
                             event_types=("metals",))
        assert len(gaps) == 1 and "Meta LS status at index" in gaps[0], gaps
    finally:
        c.stop_all()


def test_a_max_term_on_a_peer_link_is_refused_and_the_node_goes_on(tmp_path):
    """A vote request at term 2^64-1 (the hostile search's one-step wedge): the node refuses
    it before taking the term (counted under ``refused``, journaled), closes only that link,
    and still elects itself and serves at an encodable term."""
    c = LocalCluster(tmp_path, n=1)
    try:
        c.start_all()
        c.leader()
        term = c.admin("n1", "/admin/state")["term"]

        async def go() -> None:
            bad = WireConnection("127.0.0.1", c.ports["n1"]["peer"], tls=c.client_tls(), server_name="n1")
            await bad.open()
            bad.writer.write(encode(Request(MsgType.REQUEST_VOTE_REQUEST, 2, 1, 2**64 - 1,
                                            2**64 - 1, 2**64 - 1)))
            assert await asyncio.wait_for(bad.reader.read(), 5) == b""  # refused: closed
            async with KVClient(f"http://127.0.0.1:{c.ports['n1']['client']}") as kv:
                await kv.write("k", 1)  # still serving: raises KVFail otherwise
                assert await kv.read("k") == 1

        asyncio.run(go())
        st = c.admin("n1", "/admin/state")
        assert st["term"] == term and st["role"] == "leader", st
        assert st["refused"] == {"counter-out-of-range": 1}
        events = c.admin("n1", "/admin/events?since=0")["events"]
        (ev,) = [e for e in events if e["type"] == "refused"]
        assert ev["field"] == "term" and ev["message"] == "REQUEST_VOTE_REQUEST" and ev["source"] == 2, ev
        assert not [e for e in events if e["type"] == "node-error"], events
    finally:
        c.stop_all()
