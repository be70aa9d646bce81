"""WebSocket lanes (GET /lane, ours) between real DRiP processes: the vote path's batches go
over one WebSocket per link, with the checks and answers of POST /batch; a peer with lanes
off gets POST /batch; forged frames are refused and counted; a lane that dies is replaced."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from drip_mesh import IDS5, Mesh, batch_counters, figure1_meshes

from nodes.drip import codec, lane
from nodes.drip.hostile import Creds
from tests.waiting import eventually


@pytest.fixture
def mesh(tmp_path: Path):
    yield from figure1_meshes(tmp_path)


async def _everywhere(m: Mesh, s: aiohttp.ClientSession, want: dict[str, Any]) -> bool:
    for n in IDS5:
        for k, v in want.items():
            if (await m.read(s, n, k))["value"] != v:
                return False
    return True


@pytest.mark.parametrize("jwt_mode", ["public", "shared"])
def test_updates_commit_over_lanes_and_no_batch_request_is_sent(mesh, jwt_mode: str) -> None:
    m = mesh(options={"jwt_mode": jwt_mode, "max_initiating": 16})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            res = await asyncio.gather(*(m.update(s, IDS5[i % 5], f"k{i}", i, f"u{i}")
                                         for i in range(15)))
            assert all(st == 200 for st, _ in res), res
            for i in range(15, 20):  # one at a time: single-item exchanges go on lanes too
                assert (await m.update(s, "n1", f"k{i}", i, f"u{i}"))[0] == 200
            assert await eventually(lambda: _everywhere(m, s, {f"k{i}": i for i in range(20)}),
                                    10)
            b = await batch_counters(m, s)
            assert all(x["sent"] == 0 and x["taken"] == 0 for x in b.values()), b  # no /batch
            sent = sum(x["lane_exchanges"] for x in b.values())
            taken = sum(x["lane_taken"] for x in b.values())
            assert sent > 0 and taken == sent, b
            assert sum(x["lane_items"] for x in b.values()) >= sent, b
            # one lane per direction of each link, kept open: figure 1 has 6 links
            assert sum(x["lane_opened"] for x in b.values()) <= 12, b
            assert sum(x["lane_accepted"] for x in b.values()) <= 12, b
            assert not any(x["lane_failed"] for x in b.values()), b
            for n in IDS5:
                assert not (await m.state(s, n))["refused"], n
    asyncio.run(go())


def test_a_peer_with_lanes_off_gets_post_batch_and_the_others_keep_their_lanes(mesh) -> None:
    m = mesh(options={"max_initiating": 16})
    m.set_options("n3", lane=False)  # n3's links: n1, n2, n5

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            for rnd in range(2):
                res = await asyncio.gather(*(m.update(s, IDS5[i % 5], f"k{i}", [rnd, i],
                                                      f"u{rnd}-{i}") for i in range(10)))
                assert all(st == 200 for st, _ in res), res
            assert await eventually(lambda: _everywhere(
                m, s, {f"k{i}": [1, i] for i in range(10)}), 10)
            b = await batch_counters(m, s)
            assert b["n3"]["lane_opened"] == 0 and b["n3"]["lane_accepted"] == 0, b
            assert b["n3"]["taken"] > 0 and b["n3"]["lane_taken"] == 0, b
            assert b["n4"]["sent"] == 0 and b["n4"]["lane_exchanges"] > 0, b  # not n3's peer
            assert b["n3"]["sent"] > 0, b  # n3 opens no lane either
            for n in ("n1", "n2", "n5"):  # 404 once, then POST /batch to n3
                assert b[n]["sent"] > 0 and b[n]["lane_exchanges"] > 0, (n, b)
            assert not any(x["lane_failed"] for x in b.values()), b
            for n in IDS5:
                assert not (await m.state(s, n))["refused"], n
    asyncio.run(go())


def _creds(m: Mesh, nid: str) -> Creds:
    return Creds.load(nid, m.extra[nid]["tls"], m.extra[nid]["jwt"])


def _upgrade(creds: Creds, sender: str, key: bytes, signed_key: bytes | None = None
             ) -> dict[str, str]:
    """The headers of a lane upgrade carrying ``key``, its token signed by ``creds`` over an
    upgrade carrying ``signed_key`` (the same key unless given)."""
    signed = codec.LaneOpen(sender, (signed_key or key).hex())
    return {codec.H_NODE: sender, codec.H_LANE_KEY: key.hex(),
            codec.H_AUTH: creds.signer.header(time.time(), codec.signed_digest(signed),
                                              once=True)}


async def _open(m: Mesh, s: aiohttp.ClientSession, creds: Creds, target: str,
                sender: str | None = None) -> tuple[aiohttp.ClientWebSocketResponse, lane.Seal]:
    """A lane to ``target`` opened with ``creds``' certificate, a fresh key and a valid
    upgrade token; and our end's seal (key and seqs)."""
    key = lane.new_key()
    ws = await s.ws_connect(f"https://127.0.0.1:{m.ports[target]['peer']}{lane.PATH}",
                            headers=_upgrade(creds, sender or creds.node, key),
                            ssl=creds.with_cert, max_msg_size=0)
    return ws, lane.Seal(key)


def _bare_yes(sender: str) -> bytes:
    """A batch body of one harmless item: the spec's bodiless vote response."""
    req = codec.encode(codec.Batch(sender, (codec.VoteResponse(sender, True, None, None,
                                                                None),)))
    return req.body_bytes()


async def _answer(ws: aiohttp.ClientWebSocketResponse, seal: lane.Seal) -> tuple[int, Any]:
    msg = await asyncio.wait_for(ws.receive(), 10)
    assert msg.type == aiohttp.WSMsgType.BINARY, msg
    _, status, raw = seal.open_answer(msg.data)
    return status, json.loads(raw)


async def _closed(ws: aiohttp.ClientWebSocketResponse) -> bool:
    msg = await asyncio.wait_for(ws.receive(), 10)
    return msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                        aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.ERROR)


def _grew(r0: dict[str, int], r1: dict[str, int]) -> set[str]:
    return {k for k in r1 if r1[k] > r0.get(k, 0)}


@pytest.mark.parametrize("riders", [True, False])
def test_answers_ride_on_the_exchanges_going_back(mesh, riders: bool) -> None:
    """A voter's answer to a /voting and its vote response leave for the same peer in the
    same pass: with ``lane_riders`` (the default) they go as one frame, the answer riding
    on the exchange (docs/drip.md "Riders, session 49"); the control, off, sends every
    answer as a frame of its own. Both commit every update everywhere."""
    m = mesh(options={"lane_riders": riders})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            for i in range(10):  # one at a time: no batching can hide a missing rider
                assert (await m.update(s, IDS5[i % 5], f"k{i}", i, f"u{i}"))[0] == 200
            assert await eventually(lambda: _everywhere(m, s, {f"k{i}": i
                                                              for i in range(10)}), 10)
            b = await batch_counters(m, s)
            answers = sum(c["lane_answers"] for c in b.values())
            rode = answers - sum(c["lane_answer_frames"] for c in b.values())
            assert answers >= 10 * 8, b  # each update's votings alone are 8 exchanges
            if riders:  # (at least each update's first voting's answer, with its vote)
                assert rode >= 5, b
            else:
                assert rode == 0, b
            assert not any(c["lane_failed"] or c["lane_stale_riders"] for c in b.values()), b
    asyncio.run(go())


def test_forged_upgrades_are_refused_and_counted(mesh) -> None:
    m = mesh(options={"jwt_mode": "public"})

    async def go() -> None:
        await m.start()
        n2, n3 = _creds(m, "n2"), _creds(m, "n3")  # a compromised member n2 (n1's peer)
        url = f"https://127.0.0.1:{m.ports['n1']['peer']}{lane.PATH}"
        k1, k2 = lane.new_key(), lane.new_key()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            no_token = {codec.H_NODE: "n2", codec.H_LANE_KEY: k1.hex()}
            other_path = {**no_token, codec.H_AUTH: n2.signer.header(
                time.time(), codec.signed_digest(codec.StateQuery("n2")), once=True)}
            no_key = {k: v for k, v in _upgrade(n2, "n2", k1).items() if k != codec.H_LANE_KEY}
            cases = [  # (creds, headers, status, reason counted)
                (n2, no_token, 401, "bad-token"),
                (n2, other_path, 401, "retargeted"),
                (_creds(m, "n4"), _upgrade(_creds(m, "n4"), "n4", k1), 403, "not-a-peer"),
                (n2, _upgrade(n3, "n3", k1), 403, "not-own-behalf"),  # n3's name, n2's cert
                (n2, _upgrade(n2, "n3", k1), 401, "bad-token"),  # n3's name, n2's token
                (n2, no_key, 400, "malformed"),
                (n2, {**_upgrade(n2, "n2", k1), codec.H_LANE_KEY: "00" * 31}, 400, "malformed"),
                (n2, {**_upgrade(n2, "n2", k1), codec.H_LANE_KEY: k1.hex().upper()}, 400,
                 "malformed"),
                # the key changed after the token was signed over another
                (n2, _upgrade(n2, "n2", k2, signed_key=k1), 401, "retargeted"),
            ]
            for creds, headers, want, reason in cases:
                r0 = (await m.state(s, "n1"))["refused"]
                with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                    await s.ws_connect(url, headers=headers, ssl=creds.with_cert)
                assert e.value.status == want, (reason, e.value)
                r1 = (await m.state(s, "n1"))["refused"]
                assert reason in _grew(r0, r1), (reason, r0, r1)
            assert (await m.state(s, "n1"))["batches"]["lane_accepted"] in (0, 1)  # n2's own
    asyncio.run(go())


def test_forged_frames_on_a_real_lane_are_refused_counted_and_change_nothing(mesh) -> None:
    small = {"sync_batch_bytes": 64 * 1024, "max_value_bytes": 16 * 1024}
    m = mesh(options={"jwt_mode": "public", **small})
    body_max = small["sync_batch_bytes"] + small["max_value_bytes"] + 64 * 1024

    async def go() -> None:
        await m.start()
        n2 = _creds(m, "n2")  # a compromised member n2 (n1's peer)
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            assert (await m.update(s, "n1", "x", "before", "x0"))[0] == 200
            before = await m.state(s, "n1")

            ws, seal = await _open(m, s, n2, "n1")
            body = _bare_yes("n2")
            st0 = await m.state(s, "n1")
            for _ in range(100):  # good frames: no batch token signed, none checked
                await ws.send_bytes(seal.exchange(body))
                status, ans = await _answer(ws, seal)
                assert status == 200 and ans["answers"][0]["status"] == 200, (status, ans)
            st1 = await m.state(s, "n1")
            # (the peers' heartbeats, ~7 tokens/s, are all n1 checks meanwhile; before
            # session 47 each frame's batch token was one more)
            assert st1["jwt"]["checked"] - st0["jwt"]["checked"] < 50, (st0["jwt"], st1["jwt"])
            assert st1["batches"]["lane_taken"] - st0["batches"]["lane_taken"] == 100
            # well-framed frames the gate refuses: answered, the lane stays
            n3_yes = codec.encode(codec.Batch("n3", (codec.VoteResponse("n3", True, None, None,
                                                                         None),))).body_bytes()
            voting = codec.Voting("n3", 7, False, codec.Update("u9", "y", 1), "Bearer forged")
            forged = codec.encode(codec.Batch("n2", (voting,))).body_bytes()
            cases = [  # (body, status, item status, reason counted)
                (n3_yes, 200, 403, "not-own-behalf"),  # another node's vote over n2's lane
                (forged, 200, 401, "bad-token"),  # a voting without its initiator's token
                (b"[1]", 400, None, "malformed"),  # not a batch
            ]
            for raw, want, item, reason in cases:
                r0 = (await m.state(s, "n1"))["refused"]
                await ws.send_bytes(seal.exchange(raw))
                status, ans = await _answer(ws, seal)
                assert status == want, (status, ans)
                assert item is None or ans["answers"][0]["status"] == item, ans
                assert reason in _grew(r0, (await m.state(s, "n1"))["refused"]), reason
            # an answer riding for a lane n1 does not have (another key's tag): dropped and
            # counted, the exchange it rode on handled as ever
            stale0 = (await m.state(s, "n1"))["batches"]["lane_stale_riders"]
            await ws.send_bytes(seal.exchange(lane.pack_riders(
                lane.lane_tag(bytes(32)), [lane.pack_answer(bytes(32), 0, 200, b"{}")], body)))
            status, ans = await _answer(ws, seal)
            assert status == 200 and ans["answers"][0]["status"] == 200, (status, ans)
            assert (await m.state(s, "n1"))["batches"]["lane_stale_riders"] == stale0 + 1
            # pipelined past what the receiver takes at once (lane.MAX_IN_FLIGHT): it stops
            # reading until answers leave, and answers every one, in order
            frames = [seal.exchange(b"[1]" if i == 40 else body)
                      for i in range(3 * lane.MAX_IN_FLIGHT)]
            for f in frames:
                await ws.send_bytes(f)
            got = [(await _answer(ws, seal))[0] for _ in frames]
            assert got == [400 if i == 40 else 200 for i in range(len(frames))], got
            old_key = seal.key
            await ws.close()

            # frames that are not the lane's own close it: a wrong MAC, a replay, a skipped
            # seq, another lane's key, an answer reflected as an exchange, garbage, a text
            # frame, a frame over aiohttp's max_msg_size
            def altered(sl: lane.Seal, first: bytes) -> bytes:
                return sl.exchange(body)[:-1] + b"]"

            def skipped(sl: lane.Seal, first: bytes) -> bytes:
                sl.sent += 1
                return sl.exchange(body)

            for name, make in [
                    ("wrong MAC", altered),
                    ("replayed", lambda sl, first: first),  # seq 0 again
                    ("skipped seq", skipped),
                    ("another lane's key", lambda sl, first: lane.pack_exchange(
                        old_key, sl.sent, body)),
                    ("reflected", lambda sl, first: lane.pack_answer(sl.key, sl.sent, 200,
                                                                     body)),
                    ("garbage", lambda sl, first: b"\x07ab"),
                    ("riders overrunning the frame", lambda sl, first: sl.exchange(
                        lane.RIDERS + bytes(8) + b"\x01" + (1 << 20).to_bytes(4, "big")
                        + body)),
                    ("text", lambda sl, first: "{}"),
                    ("oversize", lambda sl, first: sl.exchange(b" " * (body_max + 1))),
                    ("> max_msg_size", lambda sl, first: b"\x00" * (
                        body_max + lane.HEAD + lane.RIDERS_MAX_OVERHEAD + 1))]:
                st0 = await m.state(s, "n1")
                ws, seal = await _open(m, s, n2, "n1")
                first = seal.exchange(body)  # a good one first: seq 0 taken
                await ws.send_bytes(first)
                assert (await _answer(ws, seal))[0] == 200
                bad = make(seal, first)
                await (ws.send_str(bad) if isinstance(bad, str) else ws.send_bytes(bad))
                assert await _closed(ws), name
                await ws.close()
                st1 = await m.state(s, "n1")
                assert _grew(st0["refused"], st1["refused"]) == {"lane-frame"}, (name, st1)
                assert st1["refused"]["lane-frame"] == st0["refused"].get("lane-frame", 0) + 1
                # the refused frame was not handled: only the good one was taken
                assert st1["batches"]["lane_taken"] - st0["batches"]["lane_taken"] == 1, name

            after = await m.state(s, "n1")
            assert after["locks"] == before["locks"] == {}
            assert after["kv"] == before["kv"]
            assert (await m.read(s, "n1", "x"))["value"] == "before"
            # the node is alive, and the real n2's lane (replaced by ours) comes back
            res = await asyncio.gather(*(m.update(s, IDS5[i % 5], f"k{i}", i, f"u{i}")
                                         for i in range(10)))
            assert all(st == 200 for st, _ in res), res
            assert await eventually(lambda: _everywhere(m, s, {f"k{i}": i
                                                              for i in range(10)}), 10)
    asyncio.run(go())


def test_a_lane_that_dies_fails_its_exchanges_and_a_new_one_takes_over(mesh) -> None:
    m = mesh(options={"max_initiating": 16, "vote_timeout_s": 1.0, "peer_timeout_s": 0.8})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            res = await asyncio.gather(*(m.update(s, "n1", f"a{i}", i, f"a{i}")
                                         for i in range(6)))
            assert all(st == 200 for st, _ in res), res
            opened0 = (await m.state(s, "n1"))["batches"]["lane_opened"]

            m.pause("n2")  # n1's lane to n2 gets no answer: its exchanges time out
            try:
                res = await asyncio.gather(*(m.update(s, "n1", f"p{i}", i, f"p{i}")
                                             for i in range(6)))
                assert all(st in (200, 409) for st, _ in res), res
                assert (await m.state(s, "n1"))["batches"]["lane_failed"] > 0
            finally:
                m.resume("n2")
            m.kill("n2")  # every lane to and from n2 is reset
            res = await asyncio.gather(*(m.update(s, "n1", f"q{i}", i, f"q{i}")
                                         for i in range(6)))
            assert all(st in (200, 409) for st, _ in res), res
            m.start_node("n2")
            await m.wait_healthy("n2")
            await m.wait_all_active(s)
            assert await eventually(lambda: _unlocked(m, s), 8)
            res = await asyncio.gather(*(m.update(s, IDS5[i % 5], f"r{i}", i, f"r{i}")
                                         for i in range(10)))
            assert all(st == 200 for st, _ in res), res
            assert await eventually(lambda: _everywhere(m, s, {f"r{i}": i
                                                              for i in range(10)}), 10)
            b = await batch_counters(m, s)
            assert b["n1"]["lane_opened"] > opened0, b  # a new lane to n2
            assert b["n2"]["lane_accepted"] > 0 and b["n2"]["lane_taken"] > 0, b
            for key, want in [(f"p{i}", i) for i in range(6)] + [(f"q{i}", i) for i in range(6)]:
                vals = {(await m.read(s, n, key))["value"] for n in IDS5}
                assert len(vals) == 1 and vals <= {want, None}, (key, vals)  # all or nothing
    asyncio.run(go())


async def _unlocked(m: Mesh, s: aiohttp.ClientSession) -> bool:
    return not any([(await m.state(s, n))["locks"] for n in IDS5])


def test_stopping_a_node_closes_its_lanes_both_ways_and_leaves_no_task(mesh) -> None:
    m = mesh(options={"max_initiating": 16})

    async def go() -> None:
        async with m.in_process("n1") as node, aiohttp.ClientSession() as s:
            res = await asyncio.gather(*(m.update(s, IDS5[i % 5], f"k{i}", i, f"u{i}")
                                         for i in range(10)))
            assert all(st == 200 for st, _ in res), res

            async def both_ways() -> bool:  # n1's peers: n2 and n3
                return set(node._lanes) == set(node._lanes_in) == {"n2", "n3"}

            assert await eventually(both_ways, 10), (node._lanes, node._lanes_in)
            ours, theirs = list(node._lanes.values()), list(node._lanes_in.values())
        assert all(ln.dead and ln.ws.closed for ln in ours), ours
        assert all(ln.ws.closed for ln in theirs), theirs
        assert not node.background.tasks, node.background.tasks
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not left, left
    asyncio.run(go())


def test_a_decommissioned_peers_lanes_are_closed_both_ways(mesh) -> None:
    """A lane must not outlive the trust it was opened under: once the mesh decommissions
    n3, n1 closes its lane to n3 and n3's lane to it (a later one is opened, if at all,
    under n3's new entry)."""
    m = mesh(options={"max_initiating": 16})

    async def go() -> None:
        async with m.in_process("n1") as node, aiohttp.ClientSession() as s:
            async def both_ways() -> bool:  # n1's peers: n2 and n3
                res = await asyncio.gather(*(m.update(s, IDS5[i % 5], f"k{i}", i, f"u{i}")
                                             for i in range(5)))
                assert all(st == 200 for st, _ in res), res
                return {"n2", "n3"} <= set(node._lanes) & set(node._lanes_in)

            assert await eventually(both_ways, 10), (node._lanes, node._lanes_in)
            out, inward = node._lanes["n3"], node._lanes_in["n3"]
            keep_out, keep_in = node._lanes["n2"], node._lanes_in["n2"]
            async with s.post(m.admin("n2") + "/admin/members", json={"id": "m1",
                              "remove": ["n3"]}) as r:
                assert r.status == 200, await r.text()

            async def closed() -> bool:  # (the commit reaches n1 after n2's answer)
                return out.dead and out.ws.closed and inward.ws.closed

            assert await eventually(closed, 10), (out.dead, out.ws.closed, inward.ws.closed)
            assert "n3" not in node.core.members
            assert node.batch_stats["lane_retired"] == 2, node.batch_stats
            # n2's entry did not change: its lanes stay
            assert not keep_out.dead and not keep_in.ws.closed
            assert node._lanes.get("n2") is keep_out and node._lanes_in.get("n2") is keep_in
    asyncio.run(go())


def test_a_lane_is_replaced_after_its_max_age_and_closed_by_its_acceptor_if_not(mesh) -> None:
    m = mesh(options={"max_initiating": 16, "lane_max_age_s": 1.0, "peer_timeout_s": 1.0})

    async def go() -> None:
        await m.start()
        async with aiohttp.ClientSession() as s:
            await m.wait_all_active(s)
            for rnd in range(3):  # each round past the lanes' max age
                res = await asyncio.gather(*(m.update(s, IDS5[i % 5], f"k{i}", [rnd, i],
                                                      f"u{rnd}-{i}") for i in range(10)))
                assert all(st == 200 for st, _ in res), res
                await asyncio.sleep(1.2)
            b = await batch_counters(m, s)
            # new lanes (new keys, signed upgrades) replaced the old: no exchange failed
            assert sum(x["lane_opened"] for x in b.values()) > 12, b
            assert sum(x["lane_retired"] for x in b.values()) > 0, b
            assert not any(x["lane_failed"] for x in b.values()), b
            assert await eventually(lambda: _everywhere(
                m, s, {f"k{i}": [2, i] for i in range(10)}), 10)

            # an opener that keeps its lane past the max age: the acceptor closes it
            # (lane_max_age_s + peer_timeout_s + 1 s after it opened)
            r0 = (await m.state(s, "n1"))["batches"]["lane_retired"]
            ws, seal = await _open(m, s, _creds(m, "n2"), "n1")
            t0 = time.monotonic()
            await ws.send_bytes(seal.exchange(_bare_yes("n2")))
            assert (await _answer(ws, seal))[0] == 200
            assert await _closed(ws)
            assert time.monotonic() - t0 > 2.5
            await ws.close()
            assert (await m.state(s, "n1"))["batches"]["lane_retired"] > r0
    asyncio.run(go())
