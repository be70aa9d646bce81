"""JRaft-exact semantics where a field means something to JRaft's state (issue 22, item 2).

Each test replays JRaft's frames (the golden bytes where JRaft sent them, JRaft-style answers
where JRaft would answer) into our Raft and checks the state that results: a join from a
JRaft leader completes, a snapshot transfer to a JRaft follower ends, and a byte offset is
never read as a log index.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from nodes.common.effects import Reply, Send
from nodes.garlicfarm import codec as C
from nodes.garlicfarm import raft as R
from nodes.garlicfarm.client import WireClient, WireFail
from nodes.garlicfarm.codec import (
    ClusterConfig,
    ClusterServer,
    LogEntry,
    MsgType,
    Request,
    Response,
    SnapshotSyncRequest,
    ValueType,
)
from tests.unit.garlicfarm.test_jraft_golden import golden_frames

EP = {i: f"tcp://127.0.0.1:{18500 + i}" for i in range(1, 6)}


def golden(fid: str) -> Request | Response:
    f = next(f for f in golden_frames() if f["id"] == fid)
    return C.decode(bytes.fromhex(f["hex"]))


def reply(out: list) -> Response:
    (r,) = [e.value for e in out if isinstance(e, Reply)]
    assert r is not None
    return r


def sends(out: list, t: MsgType, to: int | None = None) -> list[Request]:
    return [e.msg for e in out if isinstance(e, Send) and e.msg.type == t and (to is None or e.to == to)]


def app(term: int, v: str) -> LogEntry:
    return LogEntry(term, ValueType.APPLICATION, v.encode())


def cfg_entry(term: int, index: int, prev: int, ids: list[int]) -> LogEntry:
    c = ClusterConfig(index, prev, tuple(ClusterServer(i, EP[i]) for i in ids))
    return LogEntry(term, ValueType.CONFIGURATION, C.encode_config(c))


def leader(me: int, ids: list[int], stored: R.StoredState, **opts) -> R.Raft:
    """A Raft elected leader of ``ids`` (votes from the others answered by hand)."""
    r = R.Raft(me, {i: EP[i] for i in ids}, stored, random.Random(1), R.Options(**opts))
    r.start(0.0)
    r.on_timer("election", 10.0)
    for p in ids:
        if p != me and r.role != R.Role.LEADER:
            r.on_response(Response(MsgType.REQUEST_VOTE_RESPONSE, p, me, r.term, 0, True), 10.0)
    assert r.role == R.Role.LEADER
    return r


# ---------------------------------------------------------------- SyncLog + JoinCluster


def test_join_from_a_jraft_leader_completes():
    """JRaft's own JoinCluster and SyncLog frames (leader 1 -> joiner 4): each pack lands at
    Last Log Index + 1, so entries 1..15 arrive in order and the join's configuration makes
    node 4 a member. (Before: the pack at Last Log Index 5 overwrote entry 5 and acknowledged
    nothing new; the join looped.)"""
    n4 = R.Raft(4, {}, R.StoredState(), random.Random(1))
    n4.start(0.0)
    r = reply(n4.on_request(golden("JoinClusterRequest#33"), "t", 1.0))
    assert r.type == MsgType.JOIN_CLUSTER_RESPONSE and r.accepted
    for fid, last in (("SyncLogRequest#35", 5), ("SyncLogRequest#37", 10), ("SyncLogRequest#39", 15)):
        r = reply(n4.on_request(golden(fid), "t", 1.0))
        assert (r.accepted, r.next_index) == (True, last + 1), fid
        assert n4.last_index == last
    assert [n4.entry(i).value.decode() for i in range(2, 16)] == [
        f"b{b}m{m}:val{b}{m}" for b in range(3) for m in range(5)][:14]
    assert C.decode_config(n4.entry(1).value).log_index == 1
    assert 4 not in n4.servers
    # JRaft's AppendEntries after the sync carries the configuration that adds node 4
    r = reply(n4.on_request(golden("AppendEntriesRequest#40"), "t", 2.0))
    assert r.accepted and r.next_index == 19
    assert 4 in n4.servers and n4.config_index == 18 and n4.can_elect()


def _jraft_follower_apply(log: list[LogEntry], req: Request) -> Response:
    """What JRaft's handleLogSyncRequest does: applyLogPack(lastLogIndex + 1, pack)."""
    pack = C.decode_log_pack(req.entries[0].value)
    del log[req.last_log_index:]
    log.extend(pack.entries)
    return Response(MsgType.SYNC_LOG_RESPONSE, req.destination, req.source, req.term, len(log) + 1, True)


def test_our_leader_syncs_a_jraft_joiner_from_index_1_with_jraft_headers():
    """JoinClusterResponse's Next Index 2 (what a JRaft joiner answers on an empty log) must not
    skip entry 1; SyncLog's Last Log Index is the index before the pack; the pack's offsets are
    absolute; the new configuration records the previous configuration's index."""
    stored = R.StoredState(term=1, entries=[cfg_entry(1, 1, 0, [1])] + [app(1, f"v{k}") for k in range(2, 8)])
    lead = leader(1, [1], stored, max_batch=3)
    base_last = lead.last_index  # 7 entries + the leader's noop
    out = lead.on_request(Request(MsgType.ADD_SERVER_REQUEST, 0, 0, 0, entries=(
        LogEntry(0, ValueType.CLUSTER_SERVER, C.encode_cluster_server(ClusterServer(4, EP[4]))),)), "t", 11.0)
    assert sends(out, MsgType.JOIN_CLUSTER_REQUEST, 4)
    out = lead.on_response(Response(MsgType.JOIN_CLUSTER_RESPONSE, 4, 1, lead.term, 2, True), 11.1)
    joiner: list[LogEntry] = []
    packs = []
    while True:
        (req,) = sends(out, MsgType.SYNC_LOG_REQUEST, 4)
        packs.append(req)
        out = lead.on_response(_jraft_follower_apply(joiner, req), 11.2)
        if not sends(out, MsgType.SYNC_LOG_REQUEST, 4):
            break
    assert [(p.last_log_index, p.last_log_term) for p in packs] == [(0, 0), (3, 0), (6, 0)]
    first = C.decode_log_pack(packs[0].entries[0].value)
    second = C.decode_log_pack(packs[1].entries[0].value)
    assert first.base_offset == 0
    assert second.base_offset == sum(9 + len(e.value) for e in first.entries)  # absolute file position
    assert joiner == [lead.entry(i) for i in range(1, base_last + 1)]
    assert lead.joining is None and 4 in lead.servers  # the join completed
    new_cfg = C.decode_config(lead.entry(lead.config_index).value)
    assert (new_cfg.log_index, new_cfg.last_log_index) == (base_last + 1, 1)


# ---------------------------------------------------------------- InstallSnapshot


def test_snapshot_to_a_jraft_follower_ends_and_never_overstates_its_log():
    """The issue's worst bug: a JRaft follower answers the last chunk with the byte offset
    (here 1574); the leader took it for a log index and counted the follower as holding
    entries 21..31 it never had, committing them with one node of three. Now the transfer
    ends there and the match index is the snapshot's last index, nothing more."""
    snap_cfg = ClusterConfig(1, 0, tuple(ClusterServer(i, EP[i]) for i in (1, 2, 3)))
    data = bytes(range(256)) * 6 + b"x" * 38  # 1574 bytes
    stored = R.StoredState(term=1, snapshot=R.Snapshot(20, 1, snap_cfg, data),
                           entries=[app(1, f"e{k}") for k in range(21, 31)])
    lead = leader(1, [1, 2, 3], stored, snapshot_chunk=600)
    assert lead.commit == 20
    # node 3 (JRaft, empty log) refuses the AppendEntries: next index 1, inside the snapshot
    out = lead.on_response(Response(MsgType.APPEND_ENTRIES_RESPONSE, 3, 1, lead.term, 1, False), 11.0)
    received = bytearray()
    for _ in range(10):
        (req,) = sends(out, MsgType.INSTALL_SNAPSHOT_REQUEST, 3)
        s = C.decode_snapshot_sync(req.entries[0].value)
        assert s.offset == len(received)
        received += s.data
        # JRaft's handleSnapshotSyncRequest: Next Index = offset + data length, every chunk
        out = lead.on_response(Response(MsgType.INSTALL_SNAPSHOT_RESPONSE, 3, 1, lead.term,
                                        s.offset + len(s.data), True), 11.1)
        if s.done:
            break
    assert bytes(received) == data and s.done and s.offset + len(s.data) == 1574
    assert 3 not in lead.snap_send  # the transfer ended
    assert lead.match_index[3] == 20 and lead.next_index[3] == 21
    assert lead.commit == 20  # nothing past what two of three hold
    (ae,) = sends(out, MsgType.APPEND_ENTRIES_REQUEST, 3)
    assert ae.last_log_index == 20  # resumes with the log after the snapshot


def test_a_stale_mid_transfer_answer_never_ends_the_transfer():
    data = b"s" * 100
    snap_cfg = ClusterConfig(1, 0, tuple(ClusterServer(i, EP[i]) for i in (1, 2, 3)))
    stored = R.StoredState(term=1, snapshot=R.Snapshot(5, 1, snap_cfg, data), entries=[app(1, "e6")])
    lead = leader(1, [1, 2, 3], stored, snapshot_chunk=100)
    out = lead.on_response(Response(MsgType.APPEND_ENTRIES_RESPONSE, 3, 1, lead.term, 1, False), 11.0)
    (req,) = sends(out, MsgType.INSTALL_SNAPSHOT_REQUEST, 3)
    assert C.decode_snapshot_sync(req.entries[0].value).done
    lead.on_response(Response(MsgType.INSTALL_SNAPSHOT_RESPONSE, 3, 1, lead.term, 40, True), 11.1)
    assert lead.match_index.get(3, 0) == 0 and 3 in lead.snap_send


def test_jraft_snapshot_transfer_into_our_follower_ends_with_a_byte_offset():
    """JRaft's chunks (golden #56 at offset 0, #57 at 64) then a JRaft-style last chunk: each
    answer is offset + length, the last one too (JRaft ends the transfer when it reaches the
    snapshot's size), and the snapshot is installed at JRaft's last log index."""
    n3 = R.Raft(3, {i: EP[i] for i in (1, 2, 3)}, R.StoredState(), random.Random(1))
    n3.start(0.0)
    first, second = golden("InstallSnapshotRequest#56"), golden("InstallSnapshotRequest#57")
    assert reply(n3.on_request(first, "t", 1.0)).next_index == 64  # as JRaft's InstallSnapshotResponse#26
    assert reply(n3.on_request(second, "t", 1.0)).next_index == 128  # and #27
    s = C.decode_snapshot_sync(second.entries[0].value)
    tail = b"p23:v23\n"
    last = SnapshotSyncRequest(s.last_log_index, s.last_log_term, s.config, 128, tail, True)
    req = Request(MsgType.INSTALL_SNAPSHOT_REQUEST, 1, 3, 1, 1, 24, 26, (
        LogEntry(1, ValueType.SNAPSHOT_SYNC_REQUEST, C.encode_snapshot_sync(last)),))
    r = reply(n3.on_request(req, "t", 1.0))
    size = 128 + len(tail)
    assert r.accepted and r.next_index == size  # a byte offset >= size: JRaft's "done"
    assert (n3.snap.last_index, n3.snap.last_term, n3.commit) == (24, 1, 24)
    assert len(n3.snap.data) == size


# ---------------------------------------------------------------- Configuration, ClientRequest


def test_configuration_records_the_previous_configurations_index():
    """JRaft's AddServer frame (golden AppendEntries#40): index 18 names 1 as its predecessor.
    Our RemoveServer-made configuration does the same, not index - 1."""
    cfg = C.decode_config(golden("AppendEntriesRequest#40").entries[2].value)
    assert (cfg.log_index, cfg.last_log_index) == (18, 1)
    stored = R.StoredState(term=1, entries=[cfg_entry(1, 1, 0, [1, 2, 3]), app(1, "a"), app(1, "b")])
    lead = leader(1, [1, 2, 3], stored)
    assert lead.config_index == 1
    restated = lead._make_config(lead.servers, lead.config_index)
    assert restated.last_log_index == 0  # restating keeps what the entry recorded
    made = lead._make_config({1: EP[1], 2: EP[2]}, lead.last_index + 1)
    assert (made.log_index, made.last_log_index) == (lead.last_index + 1, 1)


def test_client_request_to_a_node_knowing_no_leader_answers_destination_minus_one():
    n = R.Raft(2, {i: EP[i] for i in (1, 2, 3)}, R.StoredState(), random.Random(1))
    n.start(0.0)
    req = golden("ClientRequest#8")
    r = reply(n.on_request(req, "t", 0.1))
    assert not r.accepted and r.destination == C.NO_LEADER != n.me
    assert C.encode(r)[5:9] == b"\xff\xff\xff\xff"  # JRaft's int -1
    # once a leader is known, the answer names it
    n.on_request(Request(MsgType.APPEND_ENTRIES_REQUEST, 1, 2, 1, 0, 0, 0), "hb", 0.2)
    assert reply(n.on_request(req, "t", 0.3)).destination == 1


class _Answers:
    """Stands in for a handshaken connection (our client logic only): one canned answer."""

    def __init__(self, resp: Response) -> None:
        self.resp, self.sent = resp, 0

    async def request(self, msg: Request, timeout: float) -> Response:
        self.sent += 1
        return self.resp


def test_wire_client_takes_destination_minus_one_as_no_leader_not_a_redirect():
    wc = WireClient({2: "127.0.0.1:1"})
    conn = _Answers(Response(MsgType.APPEND_ENTRIES_RESPONSE, 2, C.NO_LEADER, 3, 0, False))
    wc._conns[2] = conn  # type: ignore[assignment]
    with pytest.raises(WireFail, match="no leader known"):
        asyncio.run(wc.append({"x": 1}))
    assert conn.sent == 1 and wc.leader_hint is None


def test_bug_sync_loop_acknowledges_jraft_packs_without_applying_them():
    """Bug ``sync-loop`` (the pre-fix reading, kept for the liveness proof): JRaft's first
    SyncLog pack (Last Log Index 0) is answered accepted with Next Index 1 and nothing
    applied, so a JRaft-style leader sends it again; the joiner's log stays empty."""
    n4 = R.Raft(4, {}, R.StoredState(), random.Random(1), bugs=frozenset({"sync-loop"}))
    n4.start(0.0)
    assert reply(n4.on_request(golden("JoinClusterRequest#33"), "t", 1.0)).accepted
    for _ in range(3):
        r = reply(n4.on_request(golden("SyncLogRequest#35"), "t", 1.0))
        assert (r.accepted, r.next_index, n4.last_index) == (True, 1, 0)
