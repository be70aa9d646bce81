"""The ARS core on hand-driven exchanges: primary p, replicas r1 (under p) and r2 (under r1).
Every message crosses the real XML encoding (tests/unit/antacid/net.py)."""

from __future__ import annotations

from nodes.antacid import messages as m
from nodes.antacid.core import ArsOptions, ReadZone, TruncateLog, committed_since
from nodes.antacid.state import Committed
from nodes.common.effects import Send, SetTimer
from tests.unit.antacid.net import Net

A = "blocks:z.a"
B = "blocks:z.b"


def settled() -> Net:
    net = Net()
    net.run()
    return net


def test_submit_at_leaf_propagates_up_commits_and_flows_down() -> None:
    net = settled()
    answer = net.submit("r2", (A, "one", "create"), (B, "two", "create"))
    assert answer.gsid.ssn == 1 and answer.gsid.server.host == "r2.test"
    net.run()
    for node in ("p", "r1", "r2"):
        assert net.docs(node) == {A: ("one", 2), B: ("two", 2)}, node
    # the client hears once, from r2, after r2 itself holds CSN 2
    assert net.notified == [m.SubmittedUpdateResultNotification(answer.gsid, 2, "blocks:z")]
    assert all(not c.durable.pending for c in net.cores.values())


def test_ssns_per_server_and_csns_from_the_primary() -> None:
    net = settled()
    g1 = net.submit("r2", (A, "1", "write")).gsid
    g2 = net.submit("r2", (A, "2", "write")).gsid
    g3 = net.submit("p", (B, "3", "write")).gsid
    assert (g1.ssn, g2.ssn, g3.ssn) == (1, 2, 1) and g1.server != g3.server
    net.run()
    log = [(e.csn, e.gsid.ssn, e.gsid.server.host) for e in net.cores["r2"].durable.log]
    assert log == [(2, 1, "p.test"), (3, 1, "r2.test"), (4, 2, "r2.test")]
    assert [e.csn for e in net.cores["p"].durable.log] == [2, 3, 4]


def test_update_group_fails_whole_and_spends_no_csn() -> None:
    net = settled()
    net.submit("p", (A, "x", "create"))
    net.run()
    net.submit("r1", (B, "y", "create"), (A, "again", "create"))  # A exists: all of it fails
    net.run()
    assert net.docs("r1") == {A: ("x", 2)} and net.cores["p"].durable.last_csn == 2
    failed = net.notified[-1]
    assert failed.csn == 0 and failed.error.code == m.DATASTORE_SEMANTICS
    net.submit("r1", (B, "y", "create"))
    net.run()
    assert net.cores["r2"].durable.last_csn == 3  # the next commit takes CSN 3


def test_duplicate_propagation_is_refused_and_changes_nothing() -> None:
    net = settled()
    gsid = net.submit("r1", (A, "x", "write")).gsid
    net.run()
    group = m.UpdateGroup((m.DatumAndOp(A, "evil", "write"),))
    net.queue.append(("r1", "p", m.ArsRequest(99, m.PropagateSubmittedUpdate(gsid, "r1.test", 5002, group))))
    net.step()
    answer = next(msg for _, _, msg in net.queue if isinstance(msg, m.ArsResponse))
    assert isinstance(answer.result, m.ArsError) and answer.result.code == m.DUPLICATE_SUBMISSION
    # committed already: the asker (which may have lost the result) is told its CSN again
    again = [msg.body for _, dst, msg in net.queue if dst == "r1" and isinstance(msg, m.ArsRequest)]
    assert [(b.gsid, b.csn) for b in again] == [(gsid, 2)]
    net.run()
    assert net.docs("r2") == {A: ("x", 2)} and net.cores["p"].durable.last_csn == 2


def test_duplicate_detected_after_the_primary_restarts() -> None:
    net = settled()
    gsid = net.submit("r1", (A, "x", "write")).gsid
    net.run()
    net.boot("p", 999)  # restart from its own records
    assert net.cores["p"].server.incarn == 100  # the persisted incarnation, not a new one
    net.run()
    group = m.UpdateGroup((m.DatumAndOp(A, "evil", "write"),))
    out = net.cores["p"].on_message("r1", m.ArsRequest(5, m.PropagateSubmittedUpdate(
        gsid, "r1.test", 5002, group)), 0.0)
    assert out[0].msg.result.code == m.DUPLICATE_SUBMISSION


def test_primary_holds_early_ssns_and_commits_in_ssn_order() -> None:
    net = settled()
    p = net.cores["p"]
    srv = m.ServerId("r1.test", 5002, 7)
    prop = [m.ArsRequest(i, m.PropagateSubmittedUpdate(
        m.GlobalSubmitID(srv, ssn), "r1.test", 5002,
        m.UpdateGroup((m.DatumAndOp(A, f"v{ssn}", "write"),)))) for i, ssn in ((1, 2), (2, 1))]
    out = p.on_message("r1", prop[0], 0.0)  # SSN 2 first: held, acknowledged
    assert not p.durable.log and out[0].msg.result.gsid.ssn == 2
    p.on_message("r1", prop[1], 0.0)
    assert [(e.csn, e.gsid.ssn) for e in p.durable.log] == [(2, 1), (3, 2)]
    assert p.durable.docs[A] == ("v2", 3)


def test_reorder_timeout_fails_the_held_submission_with_212001() -> None:
    net = settled()
    p = net.cores["p"]
    gsid = m.GlobalSubmitID(m.ServerId("r1.test", 5002, 7), 2)
    p.on_message("r1", m.ArsRequest(1, m.PropagateSubmittedUpdate(
        gsid, "r1.test", 5002, m.UpdateGroup((m.DatumAndOp(A, "v", "write"),)))), 0.0)
    out = p.on_timer(("reorder", gsid), 10.0)
    note = next(e.msg.body for e in out if hasattr(e, "msg"))
    assert note.gsid == gsid and note.csn == 0 and note.error.code == m.REORDER_TIMEOUT
    # the SSN is spent: when SSN 1 comes, SSN 2 passes as failed and SSN 3 is not held
    for ssn in (1, 3):
        p.on_message("r1", m.ArsRequest(ssn + 5, m.PropagateSubmittedUpdate(
            m.GlobalSubmitID(gsid.server, ssn), "r1.test", 5002,
            m.UpdateGroup((m.DatumAndOp(B, str(ssn), "write"),)))), 11.0)
    assert [e.gsid.ssn for e in p.durable.log] == [1, 3]


def test_pull_with_last_seen_csn_sends_only_what_follows() -> None:
    net = settled()
    for v in "123":
        net.submit("p", (A, v, "write"), (B, v, "write"))
    net.run()
    out = net.cores["p"].on_message("r1", m.ArsRequest(1, m.PullCommittedUpdates(
        "r1.test", 5002, (m.ReplState("blocks:z", 2),))), 0.0)
    groups = out[0].msg.result.groups
    assert [g.csn for g in groups] == [3, 4]
    assert groups[0].data == ()  # collapsed away: a noop keeps the CSN sequence whole
    assert [(d.name, d.content) for d in groups[1].data] == [(A, "3"), (B, "3")]


def test_collapsing_matches_the_spec_example() -> None:
    ops = ["write", "write", "delete", "create", "update"]
    log = [Committed(c, None, (m.DatumAndOp("blk2", str(c), a, c),)) for c, a in enumerate(ops, 2)]
    sent = committed_since(log, 1, "z", collapse=True)
    assert [(g.csn, [(d.action, d.content) for d in g.data]) for g in sent] == [
        (2, []), (3, []), (4, []), (5, []), (6, [("write", "6")])]
    deleted = [Committed(c, None, (m.DatumAndOp("blk2", "", a, c),))
               for c, a in enumerate(["create", "write", "update", "delete"], 4)]
    assert [g.data[0].action for g in committed_since(deleted, 3, "z", collapse=True) if g.data] == ["delete"]


def test_downstream_ignores_a_delete_of_a_missing_document() -> None:
    net = settled()
    r1 = net.cores["r1"]
    out = r1.on_message("p", m.ArsResponse(1, m.ArsAnswer()), 0.0)  # stray: refused quietly
    assert out[0].type == "ars-stray-response"
    r1._pulling = None
    net.take("r1", r1._pull("p", 0.0))
    src, dst, req = net.queue.pop()
    answer = m.ArsResponse(req.req_num, m.ArsAnswer(groups=(
        m.UpdateGroup((m.DatumAndOp(A, "", "delete"),), 2, "blocks:z"),)))
    r1.on_message("p", answer, 0.0)
    assert r1.durable.last_csn == 2 and A not in r1.durable.docs


def test_a_gap_in_committed_csns_is_refused() -> None:
    net = settled()
    r1 = net.cores["r1"]
    r1._pulling = None
    net.take("r1", r1._pull("p", 0.0))
    _, _, req = net.queue.pop()
    out = r1.on_message("p", m.ArsResponse(req.req_num, m.ArsAnswer(groups=(
        m.UpdateGroup((m.DatumAndOp(A, "x", "write"),), 3, "blocks:z"),))), 0.0)
    assert r1.durable.last_csn == 1 and any(getattr(e, "type", "") == "ars-refused" for e in out)


def test_log_truncation_forces_a_full_zone_transfer() -> None:
    net = settled()
    net.submit("p", (A, "1", "write"))
    net.run()
    net.cut.add(frozenset(("p", "r1")))
    net.submit("p", (B, "2", "write"))
    net.submit("p", (A, "3", "delete"))
    net.run()
    assert net.cores["r1"].durable.last_csn == 2
    net.take("p", net.cores["p"].on_command(TruncateLog(4), "t", 0.0))
    assert net.replies[-1] == {"truncated_through": 4}
    net.cut.clear()
    net.timer("r1", "pull")
    net.run()
    for node in ("r1", "r2"):
        assert net.docs(node) == {B: ("2", 3)}, node
        assert net.cores[node].durable.last_csn == 4
    net.take("r1", net.cores["r1"].on_command(ReadZone(), "t", 0.0))
    assert net.replies[-1]["last_csn"] == 4


def test_partition_on_the_submission_path_still_notifies_after_commit_arrives() -> None:
    net = settled()
    gsid = net.submit("r2", (A, "x", "write")).gsid
    net.run()
    assert net.notified[-1].gsid == gsid
    net.cut.add(frozenset(("r1", "r2")))
    gsid2 = net.submit("r2", (A, "y", "write")).gsid
    net.run()  # every upstream refused: retried later
    assert net.cores["r2"].durable.pending[gsid2].state == "propagating"
    net.cut.clear()
    net.timer("r2", ("propagate", gsid2))
    net.run()
    assert net.notified[-1] == m.SubmittedUpdateResultNotification(gsid2, 3, "blocks:z")
    assert net.docs("r2") == {A: ("y", 3)}


def test_requests_from_servers_off_the_topology_are_refused() -> None:
    net = settled()
    push = net.cores["r1"].on_message("r2", m.ArsRequest(1, m.PushCommittedUpdates("r2.test", 5003)), 0.0)
    assert push[0].msg.result.code == m.PUSH_NOT_UPSTREAM
    pull = net.cores["p"].on_message("r2", m.ArsRequest(2, m.PullCommittedUpdates(
        "r2.test", 5003, (m.ReplState("blocks:z", 1),))), 0.0)
    assert pull[0].msg.result.code == m.PULL_NOT_DOWNSTREAM
    neg = net.cores["p"].on_message("r1", m.ArsRequest(3, m.ContentEncodingNegotiation(
        "blocks:z", ("DataWithOps", "EllipsisNotation"))), 0.0)
    assert neg[0].msg.result.encodings == ("DataWithOps",)


def test_a_missed_result_notification_down_is_retried_on_a_timer() -> None:
    net = settled()
    net.submit("r1", (A, "x", "write"))
    net.step()  # r1 -> p: PropagateSubmittedUpdate
    net.cut.add(frozenset(("p", "r1")))
    net.run()  # p's notification to r1 fails; nothing is resent at once
    assert net.cores["r1"].durable.pending
    net.cut.clear()
    gsid = next(iter(net.cores["r1"].durable.pending))
    net.timer("p", ("notify-down", "r1", gsid))
    net.timer("r1", "pull")
    net.run()
    assert not net.cores["r1"].durable.pending and net.notified[-1].csn == 2


def test_write_write_conflicts_are_refused_with_126001_when_detection_is_on() -> None:
    net = Net(options=ArsOptions(detect_conflicts=True))
    net.run()
    g1 = net.submit("r2", (A, "one", "create")).gsid
    net.run()
    assert net.docs("p") == {A: ("one", 2)}
    # a write naming the CSN it read (2) commits; one naming the IMPLIED 1 (a stale or blind
    # write) is refused, whole, from a replica or at the primary, and spends no CSN
    net.submit("r2", (A, "two", "write", 2))
    net.run()
    assert net.notified[-1].csn == 3 and net.docs("r2") == {A: ("two", 3)}
    stale = net.submit("r1", (B, "new", "create"), (A, "three", "write", 2)).gsid
    net.run()
    failed = net.notified[-1]
    assert failed.gsid == stale and failed.csn == 0 and failed.error.code == m.WRITE_CONFLICT
    # 3.1.4: the specifics name the server that last updated the document
    assert failed.error.specifics == (f"{A} submitted at CSN 2 is at CSN 3, last updated by "
                                      f"r2.test:5003 incarnation {g1.server.incarn}")
    assert failed.error.at.host == "p.test"
    blind = net.submit("p", (A, "four", "write")).gsid
    net.run()
    assert net.notified[-1].gsid == blind and net.notified[-1].error.code == m.WRITE_CONFLICT
    # a new document has nothing to conflict with; the next commit takes CSN 4
    net.submit("p", (B, "b", "create"))
    net.run()
    assert net.notified[-1].csn == 4
    for node in ("p", "r1", "r2"):
        assert net.docs(node) == {A: ("two", 3), B: ("b", 4)}, node


def test_conflict_detection_is_off_by_default() -> None:
    net = settled()
    net.submit("p", (A, "one", "create"))
    net.run()
    net.submit("r1", (A, "blind", "write"))  # IMPLIED CSN 1 against CSN 2: no check
    net.run()
    assert net.notified[-1].error is None and net.docs("r2") == {A: ("blind", 3)}


def test_a_replica_negotiates_encodings_before_its_first_pull() -> None:
    net = Net()
    net.timer("r1", "pull")
    first = [(src, dst, type(msg.body).__name__) for src, dst, msg in net.queue
             if isinstance(msg, m.ArsRequest)]
    assert ("r1", "p", "ContentEncodingNegotiation") in first
    assert not any(kind == "PullCommittedUpdates" for _, _, kind in first)
    net.run()
    # each side caches what the other supports for the zone (3.4)
    assert net.cores["r1"]._encodings["p"] == m.ENCODINGS
    assert net.cores["p"]._encodings["r1"] == m.ENCODINGS
    net.submit("p", (A, "x", "write"))
    net.run()
    assert net.docs("r2") == {A: ("x", 2)}


def test_without_negotiation_a_full_zone_pull_gets_dataWithOps_or_223001() -> None:
    net = settled()
    net.submit("p", (A, "1", "write"))
    net.submit("p", (B, "2", "write"))
    net.run()
    p = net.cores["p"]
    p._encodings.clear()  # as after a restart: r1's negotiation is forgotten
    pull = m.ArsRequest(50, m.PullCommittedUpdates("r1.test", 5002, (m.ReplState("blocks:z", 0),)))
    answer = p.on_message("r1", pull, 0.0)[0].msg.result
    assert [(g.csn, g.all_zone) for g in answer.groups] == [(2, False), (3, False)]
    net.take("p", p.on_command(TruncateLog(2), "t", 0.0))
    refused = p.on_message("r1", pull, 0.0)[0].msg.result
    assert refused.code == m.NO_FULL_ZONE_ENCODING
    # negotiated: the same request is answered with AllZoneData
    p.on_message("r1", m.ArsRequest(51, m.ContentEncodingNegotiation("blocks:z", m.ENCODINGS)), 0.0)
    whole = p.on_message("r1", pull, 0.0)[0].msg.result
    assert [(g.csn, g.all_zone) for g in whole.groups] == [(3, True)]


def test_a_restarted_upstream_that_forgot_the_negotiation_is_asked_again() -> None:
    net = settled()
    net.submit("p", (A, "1", "write"))
    net.run()
    net.cut.add(frozenset(("p", "r1")))
    net.submit("p", (B, "2", "write"))
    net.run()
    net.take("p", net.cores["p"].on_command(TruncateLog(3), "t", 0.0))
    net.boot("p", 999)  # forgets what r1 negotiated; r1 still has p's answer cached
    net.cut.clear()
    net.queue.clear()
    net.timer("r1", "pull")
    sent = []
    while net.queue:
        src, dst, msg = net.queue[0]
        if isinstance(msg, m.ArsRequest) and src == "r1":
            body = msg.body
            sent.append(type(body).__name__ if not isinstance(body, m.PullCommittedUpdates)
                        else f"Pull {body.states[0].last_seen_csn}")
        net.step()
    # 226002 -> full transfer -> 223001 (forgotten) -> negotiate again -> AllZoneData
    assert sent[:4] == ["Pull 2", "Pull 0", "ContentEncodingNegotiation", "Pull 0"], sent
    assert net.docs("r1") == {A: ("1", 2), B: ("2", 3)}


def test_an_encoding_answer_outside_the_offer_is_cut_to_the_offer() -> None:
    net = Net()
    net.timer("r1", "pull")
    r1 = net.cores["r1"]
    _, _, neg = next(q for q in net.queue if q[0] == "r1" and q[1] == "p")
    out = r1.on_message("p", m.ArsResponse(neg.req_num, m.ArsAnswer(
        encodings=("DataWithOps", "EllipsisNotation"))), 0.0)
    assert any(getattr(e, "type", "") == "ars-refused" for e in out)
    assert r1._encodings["p"] == ("DataWithOps",)
    pull = [e.msg.body for e in out if isinstance(e, Send)]
    assert isinstance(pull[-1], m.PullCommittedUpdates)


def test_the_reorder_queue_and_owed_results_survive_a_primary_restart() -> None:
    net = settled()
    srv = m.ServerId("r1.test", 5002, 7)

    def prop(ssn: int, req: int) -> m.ArsRequest:
        return m.ArsRequest(req, m.PropagateSubmittedUpdate(
            m.GlobalSubmitID(srv, ssn), "r1.test", 5002,
            m.UpdateGroup((m.DatumAndOp(A, f"v{ssn}", "write"),))))

    net.take("p", net.cores["p"].on_message("r1", prop(3, 1), 0.0))  # held: waits for 1, 2
    net.take("p", net.cores["p"].on_message("r1", prop(2, 2), 0.0))
    net.boot("p", 999)  # a kill: what was held comes back, its reorder clock restarted
    p = net.cores["p"]
    assert sorted(g.ssn for g in p.durable.held) == [2, 3]
    assert p._duplicate(m.GlobalSubmitID(srv, 3))  # still in progress: a resend is 226001
    net.queue.clear()
    net.cut.add(frozenset(("p", "r1")))  # the results down to r1 are lost ...
    net.take("p", p.on_message("r1", prop(1, 3), 0.0))
    assert [(e.csn, e.gsid.ssn) for e in p.durable.log] == [(2, 1), (3, 2), (4, 3)]
    assert not p.durable.held
    net.run()
    assert sorted(g.ssn for _, g in p.durable.owed) == [1, 2, 3]
    net.boot("p", 1000)  # ... and owed across another restart, sent again at start
    net.cut.clear()
    down = [msg.body for src, dst, msg in net.queue
            if src == "p" and dst == "r1" and isinstance(msg.body, m.SubmittedUpdateResultNotification)]
    assert sorted((b.gsid.ssn, b.csn) for b in down) == [(1, 2), (2, 3), (3, 4)]
    net.run()
    assert not net.cores["p"].durable.owed  # r1 acknowledged each one


def test_a_held_submission_times_out_after_a_restart_too() -> None:
    net = settled()
    gsid = m.GlobalSubmitID(m.ServerId("r1.test", 5002, 7), 2)
    net.take("p", net.cores["p"].on_message("r1", m.ArsRequest(1, m.PropagateSubmittedUpdate(
        gsid, "r1.test", 5002, m.UpdateGroup((m.DatumAndOp(A, "v", "write"),)))), 0.0))
    net.now = 5.0
    net.boot("p", 999)
    start = net.cores["p"].start(5.0)
    assert SetTimer(("reorder", gsid), 15.0) in start
    out = net.cores["p"].on_timer(("reorder", gsid), 15.0)
    note = next(e.msg.body for e in out if isinstance(e, Send))
    assert note.error.code == m.REORDER_TIMEOUT
    assert net.cores["p"].durable.held[gsid] == ("r1", None)  # the spent placeholder


def test_notify_ok_on_current_channel_hands_the_runtime_the_submission_token() -> None:
    net = settled()
    p = net.cores["p"]
    yes = m.SubmitUpdate(m.UpdateGroup((m.DatumAndOp(A, "x"),)), "client.test", 7000, True)
    fx = p.on_command(yes, "chan-7", 0.0)
    [note] = [e for e in fx if isinstance(e, Send) and isinstance(e.msg.body,
                                                                  m.SubmittedUpdateResultNotification)]
    assert note.to.via == "chan-7" and (note.to.host, note.to.port) == ("client.test", 7000)
    no = m.SubmitUpdate(m.UpdateGroup((m.DatumAndOp(B, "y"),)), "client.test", 7000)
    fx = p.on_command(no, "chan-8", 0.0)
    [note2] = [e for e in fx if isinstance(e, Send) and isinstance(e.msg.body,
                                                                   m.SubmittedUpdateResultNotification)]
    assert note2.to.via is None and note2.to == note.to  # one destination either way
