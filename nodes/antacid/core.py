"""The ARS server (ars-c, ars-s, the AllZoneData part of ars-e) for one zone, sans-IO.

Follows the one core interface (docs/contracts.md 0a). Peers are node ids from the topology;
every request the core sends is ``Send(peer, ArsRequest)`` and ends in exactly one
``on_message(peer, ArsResponse)`` or ``on_message(peer, CallFailed(req_num))`` (the runtime's
job: no answer, connection refused). A request from a peer arrives as ``on_message(peer,
ArsRequest)`` and is answered by one ``Send(peer, ArsResponse)``. Client submissions are
``on_command(SubmitUpdate, token)`` answered by ``Reply(token, ArsAnswer | ArsError)``; result
notifications go to ``Send(NotifyDest(host, port), ArsRequest)``. Durable state goes out as
``Persist("ars", record)`` (`nodes.antacid.state` folds the records back at construction).

The algorithms of the draft's section 4: SSNs per (server, zone) from a persisted counter;
the primary assigns CSNs from 2 upwards, one per UpdateGroup, only for a group that applied
whole; the primary serializes each submission server's SSNs in order, holding early arrivals
(4.2.2.3, 4.2.2.7) until ``reorder_timeout`` (then 212001); duplicates (an SSN at or below the
last committed one from that server, or one in progress) get 226001; committed updates go
down the DAG by push (a suggestion, with the Nagle-like outstanding flag of 4.2.2.4) and pull
with LastSeenCSN, at most one pull in flight, applied as a gap-free prefix; pulls are answered
collapsed (4.1.3); a pull from before the log's truncation point gets 226002 and the puller
asks for the whole zone (LastSeenCSN 0, answered with AllZoneData).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from nodes.antacid import messages as m
from nodes.antacid.state import Committed, Durable, Pending, Topology
from nodes.common.effects import Effect, Emit, Persist, Reply, Send, SetTimer

#: the named bug modes (docs/antacid.md), all off by default: the primary gives a CSN twice;
#: a replica applies only the first document of a pulled group; the primary forgets which
#: SSNs it committed (a resubmission commits again); a replica skips every fourth CSN it pulls
BUGS: tuple[str, ...] = ("csn-reused", "partial-group", "duplicates-undetected", "skip-csn")


@dataclass(frozen=True)
class NotifyDest:
    """A client's NotifyHost/NotifyPort: where a result notification goes. ``via`` is the
    submission's command token when it said NotifyOkOnCurrentChannel="yes" (3.2.1.1): the
    runtime may send on that channel while it is open, and must use host and port once it is
    not. Not part of the destination's identity, and not durable (after a restart the
    submission channel is gone)."""

    host: str
    port: int
    via: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CallFailed:
    """The request ``req_num`` we sent to this peer got no answer."""

    req_num: int


@dataclass(frozen=True)
class ReadZone:
    """Client command: the zone's documents and last CSN (for readers and the checker).
    ``zone`` picks one of a server's zones (`nodes.antacid.zones`); None is its first."""

    zone: str | None = None


@dataclass(frozen=True)
class TruncateLog:
    """Admin command: drop committed log entries up to ``through_csn`` (inclusive), in
    ``zone`` (None: the server's first zone)."""

    through_csn: int
    zone: str | None = None


@dataclass
class ArsOptions:
    reorder_timeout: float = 10.0
    propagate_retry: float = 1.0
    propagate_rounds: int = 5  # rounds over all upstreams before 210001 + FailedUpdateSubmission
    notify_retry: float = 1.0
    notify_attempts: int = 10
    pull_interval: float = 5.0
    #: a submission handed upstream with no result this long is offered again (an upstream
    #: that restarted lost what it held; one that has it answers 226001, with the result
    #: when it already committed it)
    result_wait: float = 10.0
    detect_conflicts: bool = False
    collapse: bool = True


@dataclass
class _Out:
    """A request we sent and what to do with its answer."""

    peer: Any
    req: m.ArsRequest
    why: str
    key: Any = None


@dataclass
class ArsCore:
    me: str
    topology: Topology
    durable: Durable = field(default_factory=Durable)
    options: ArsOptions = field(default_factory=ArsOptions)
    bugs: Iterable[str] = ()

    def __post_init__(self) -> None:
        self.bugs = frozenset(self.bugs)
        unknown = self.bugs - set(BUGS)
        if unknown:
            raise ValueError(f"unknown ANTACID bug mode(s) {sorted(unknown)}; known: {list(BUGS)}")
        self.server = self.topology.server_id(self.me, self.durable.incarn)
        self.zone = self.topology.zone
        self.primary = self.topology.primary == self.me
        self.upstreams = self.topology.upstream.get(self.me, ())
        self.downstreams = self.topology.downstream_of(self.me)
        self._req = 0
        self._out: dict[tuple[Any, int], _Out] = {}
        self._push_outstanding: set[str] = set()
        self._pulling: str | None = None
        self._pull_again: str | None = None
        #: ars-e (3.4): the encodings each peer supports for our zone, learned by a
        #: ContentEncodingNegotiation either way; absent means DataWithOps only. Kept as long
        #: as calls to the peer go through (the spec's "the ARS channel's lifetime": a call
        #: that fails, or a 223001 from an upstream that forgot, drops it)
        self._encodings: dict[Any, tuple[str, ...]] = {}

    # ------------------------------------------------------------------ interface

    def start(self, now: float) -> list[Effect]:
        fx: list[Effect] = [Emit("start", {"incarn": self.durable.incarn,
                                           "last_csn": self.durable.last_csn,
                                           "last_ssn": self.durable.last_ssn,
                                           "primary": self.primary})]
        if self.durable.fresh_incarn:
            fx.insert(0, Persist("ars", ("incarn", self.durable.incarn)))
        if self.upstreams:
            fx.append(SetTimer("pull", now))
        for gsid, p in sorted(self.durable.pending.items(), key=lambda kv: kv[0].ssn):
            if p.state == "propagating":
                fx += self._propagate(gsid, now)
            elif p.state == "propagated":
                fx.append(SetTimer(("result-wait", gsid), now + self.options.result_wait))
            elif p.state == "notifying":
                fx += self._notify(gsid, now)
        for gsid, (_, group) in sorted(self.durable.held.items(), key=lambda kv: kv[0].ssn):
            if group is not None:  # the reorder clock starts again (timers are not durable)
                fx.append(SetTimer(("reorder", gsid), now + self.options.reorder_timeout))
        for (peer, _), note in list(self.durable.owed.items()):
            fx.append(self._call(peer, note, "notify-down", note.gsid))
        fx += self._push_all()
        return fx

    def on_command(self, cmd: Any, token: Any, now: float) -> list[Effect]:
        if isinstance(cmd, ReadZone):
            docs = {n: {"content": c, "csn": csn} for n, (c, csn) in self.durable.docs.items()}
            return [Reply(token, {"last_csn": self.durable.last_csn, "docs": docs})]
        if isinstance(cmd, TruncateLog):
            through = min(cmd.through_csn, self.durable.last_csn)
            return [Persist("ars", ("truncate", through)), *self._apply(("truncate", through)),
                    Reply(token, {"truncated_through": self.durable.truncated_through})]
        if isinstance(cmd, m.SubmitUpdate):
            return self._submit(cmd, token, now)
        raise ValueError(f"unknown ANTACID command {cmd!r}: send SubmitUpdate, ReadZone or "
                         "TruncateLog")

    def on_timer(self, name: Any, now: float) -> list[Effect]:
        kind, *rest = name if isinstance(name, tuple) else (name,)
        if kind == "pull":
            fx = self._pull(self._next_upstream(), now) if self.upstreams else []
            return [*fx, SetTimer("pull", now + self.options.pull_interval)]
        if kind == "propagate":
            gsid = rest[0]
            p = self.durable.pending.get(gsid)
            return self._propagate(gsid, now) if p and p.state == "propagating" else []
        if kind == "result-wait":
            gsid = rest[0]
            p = self.durable.pending.get(gsid)
            if p is None or p.state != "propagated":
                return []
            return [Emit("result-wait", {"ssn": gsid.ssn, "incarn": gsid.server.incarn}),
                    *self._persist(("pending", gsid, replace(p, state="propagating"))),
                    *self._propagate(gsid, now)]
        if kind == "notify":
            gsid = rest[0]
            p = self.durable.pending.get(gsid)
            return self._notify(gsid, now) if p and p.state == "notifying" else []
        if kind == "notify-down":
            note = self.durable.owed.get((rest[0], rest[1]))
            return [self._call(rest[0], note, "notify-down", rest[1])] if note else []
        if kind == "reorder":
            return self._reorder_timeout(rest[0], now)
        return []

    def on_message(self, peer: Any, msg: Any, now: float) -> list[Effect]:
        if isinstance(msg, m.ArsRequest):
            return self._request(peer, msg, now)
        if isinstance(msg, m.ArsResponse | CallFailed):
            out = self._out.pop((peer, msg.req_num), None)
            if out is None:
                return [Emit("ars-stray-response", {"peer": str(peer), "req": msg.req_num})]
            return self._answered(out, None if isinstance(msg, CallFailed) else msg.result, now)
        return [Emit("ars-refused", {"peer": str(peer), "what": type(msg).__name__})]

    # ------------------------------------------------------------------ helpers

    def _err(self, code: int, specifics: str = "") -> m.ArsError:
        return m.ArsError.of(code, self.server, specifics)

    def _call(self, peer: Any, body: m.Body, why: str, key: Any = None) -> Send[Any, Any]:
        self._req = self._req % m.U32 + 1
        req = m.ArsRequest(self._req, body)
        self._out[(peer, self._req)] = _Out(peer, req, why, key)
        return Send(peer, req)

    def _apply(self, record: tuple[Any, ...]) -> list[Effect]:
        self.durable.apply(record)
        return []

    def _persist(self, record: tuple[Any, ...]) -> list[Effect]:
        self.durable.apply(record)
        return [Persist("ars", record)]

    def _next_upstream(self) -> str:
        ups = self.upstreams
        self.durable.pull_turn = (self.durable.pull_turn + 1) % len(ups)
        return ups[self.durable.pull_turn]

    # ------------------------------------------------------------------ submission

    def _check_group(self, group: m.UpdateGroup) -> m.ArsError | None:
        for d in group.data:
            if not d.name:
                return self._err(m.MISSING_URI, "DatumAndOp without Name")
            if not self.topology.in_zone(d.name):
                return self._err(m.ZONE_NOT_HELD, d.name)
        return None

    def _submit(self, cmd: m.SubmitUpdate, token: Any, now: float) -> list[Effect]:
        bad = self._check_group(cmd.group)
        if bad is not None:
            return [Reply(token, bad)]
        ssn = self.durable.last_ssn + 1
        gsid = m.GlobalSubmitID(self.server, ssn)
        notify = (NotifyDest(cmd.notify_host, cmd.notify_port,
                             token if cmd.notify_ok_on_current_channel else None)
                  if cmd.notify_host is not None and cmd.notify_port is not None else None)
        fx = self._persist(("ssn", ssn))
        fx += self._persist(("pending", gsid, Pending(cmd.group, notify, None, "propagating")))
        fx += [Reply(token, m.ArsAnswer(gsid=gsid)),
               Emit("submit", {"ssn": ssn, "incarn": self.server.incarn,
                               "docs": [d.name for d in cmd.group.data]})]
        if self.primary:
            return fx + self._serialize(gsid, cmd.group, None, now)
        return fx + self._propagate(gsid, now)

    def _propagate(self, gsid: m.GlobalSubmitID, now: float, start: int = 0) -> list[Effect]:
        """Offer the submission to the upstreams in preference order from ``start``."""
        p = self.durable.pending[gsid]
        if start >= len(self.upstreams):
            p.rounds += 1
            if p.rounds >= self.options.propagate_rounds and p.group is not None:
                return self._give_up(gsid, now)
            return [SetTimer(("propagate", gsid), now + self.options.propagate_retry)]
        body = m.PropagateSubmittedUpdate(gsid, self.server.host, self.server.port, p.group,
                                          self.zone)
        return [self._call(self.upstreams[start], body, "propagate", (gsid, start))]

    def _give_up(self, gsid: m.GlobalSubmitID, now: float) -> list[Effect]:
        """210001 to whoever waits; the submission server then sends FailedUpdateSubmission
        upstream until one takes it (the primary must learn the SSN is spent)."""
        p = self.durable.pending[gsid]
        fx = self._result(gsid, 0, self._err(m.PROPAGATE_FAILED, f"{p.rounds} rounds"), now)
        if gsid.server == self.server:
            fx += self._persist(("pending", gsid, replace(p, group=None, state="propagating",
                                                          rounds=0)))
            fx += self._propagate(gsid, now)
        return fx

    def _duplicate(self, gsid: m.GlobalSubmitID) -> bool:
        forgot = "duplicates-undetected" in self.bugs
        return ((not forgot and gsid.ssn <= self.durable.committed_ssn.get(gsid.server, 0))
                or gsid in self.durable.pending
                or gsid in self.durable.held)

    def _on_propagate(self, peer: str, req: m.ArsRequest, now: float) -> list[Effect]:
        b: m.PropagateSubmittedUpdate = req.body  # type: ignore[assignment]
        if peer not in self.downstreams:
            return [Send(peer, m.ArsResponse(req.req_num, self._err(m.PROPAGATE_NOT_DOWNSTREAM, peer)))]
        if b.group is not None:
            bad = self._check_group(b.group)
            if bad is not None:
                return [Send(peer, m.ArsResponse(req.req_num, bad))]
            if self._duplicate(b.gsid):
                fx: list[Effect] = [Send(peer, m.ArsResponse(req.req_num, self._err(
                    m.DUPLICATE_SUBMISSION, f"{b.gsid.server} SSN {b.gsid.ssn}"))),
                    Emit("duplicate", {"ssn": b.gsid.ssn, "from": peer})]
                csn = next((e.csn for e in self.durable.log if e.gsid == b.gsid), None)
                if csn is not None and b.gsid not in self.durable.pending:
                    # committed and passed on here already: the asker lost the result
                    fx += self._owe(peer, m.SubmittedUpdateResultNotification(
                        b.gsid, csn, self.zone))
                return fx
        ack = Send(peer, m.ArsResponse(req.req_num, m.ArsAnswer(gsid=b.gsid)))
        if self.primary:
            return [ack, *self._serialize(b.gsid, b.group, peer, now)]
        fx = self._persist(("pending", b.gsid, Pending(b.group, None, peer, "propagating")))
        return [*fx, ack, *self._propagate(b.gsid, now)]

    # ------------------------------------------------------------------ primary

    def _serialize(self, gsid: m.GlobalSubmitID, group: m.UpdateGroup | None, peer: Any,
                   now: float) -> list[Effect]:
        """Commit in each submission server's SSN order, holding early arrivals."""
        last = self.durable.committed_ssn.get(gsid.server, 0)
        replay = "duplicates-undetected" in self.bugs and gsid.ssn <= last
        if gsid.server != self.server and gsid.ssn != last + 1 and not replay:
            fx = self._persist(("held", gsid, peer, group))
            fx.append(Emit("hold", {"ssn": gsid.ssn, "waiting_for": last + 1}))
            if group is not None:
                fx.append(SetTimer(("reorder", gsid), now + self.options.reorder_timeout))
            return fx
        fx = self._commit(gsid, group, peer, now)
        nxt = m.GlobalSubmitID(gsid.server, gsid.ssn + 1)
        if nxt in self.durable.held:
            nxt_peer, nxt_group = self.durable.held[nxt]
            fx += self._persist(("unheld", nxt))
            fx += self._serialize(nxt, nxt_group, nxt_peer, now)
        return fx

    def _reorder_timeout(self, gsid: m.GlobalSubmitID, now: float) -> list[Effect]:
        held = self.durable.held.get(gsid)
        if held is None or held[1] is None:
            return []
        peer = held[0]
        # the SSN is spent: when the chain reaches it, it passes as a failed submission
        fx = self._persist(("held", gsid, peer, None))
        err = self._err(m.REORDER_TIMEOUT, f"SSN {gsid.ssn} waited for "
                        f"{self.durable.committed_ssn.get(gsid.server, 0) + 1}")
        return [*fx, Emit("reorder-timeout", {"ssn": gsid.ssn}),
                *self._notify_failure(gsid, peer, err, now)]

    def _commit(self, gsid: m.GlobalSubmitID, group: m.UpdateGroup | None, peer: Any,
                now: float) -> list[Effect]:
        """Apply ``group`` whole under a new CSN, or fail it whole (the CSN is not spent)."""
        if group is None:  # FailedUpdateSubmission: the SSN is spent, nothing commits
            return [*self._persist(("ssn-seen", gsid.server, gsid.ssn)),
                    Emit("failed-submission", {"ssn": gsid.ssn})]
        err = self._check_semantics(group)
        if err is not None:
            fx = self._persist(("ssn-seen", gsid.server, gsid.ssn))
            return fx + self._notify_failure(gsid, peer, err, now)
        csn = max(self.durable.last_csn, 1) + 1
        if "csn-reused" in self.bugs and self.durable.last_csn >= 2 and gsid.ssn % 2 == 0:
            csn = self.durable.last_csn  # the bug: the last CSN handed out again
        data = tuple(replace(d, csn=csn) for d in group.data)
        entry = Committed(csn, gsid, data)
        fx = self._persist(("commit", entry))
        fx.append(Emit("commit", group_event(entry)))
        if peer is None:
            fx += self._result(gsid, csn, None, now)
        else:
            fx += self._owe(peer, m.SubmittedUpdateResultNotification(gsid, csn, self.zone))
        return fx + self._push_all()

    def _check_semantics(self, group: m.UpdateGroup) -> m.ArsError | None:
        docs = dict(self.durable.docs)
        for d in group.data:
            have = d.name in docs
            if d.action == "create" and have:
                return self._err(m.DATASTORE_SEMANTICS, f"create of existing {d.name}")
            if d.action == "update" and not have:
                return self._err(m.UPDATE_MISSING, d.name)
            if d.action == "delete" and not have:
                return self._err(m.DELETE_MISSING, d.name)
            if self.options.detect_conflicts and have and (d.csn or 1) != docs[d.name][1]:
                return self._err(m.WRITE_CONFLICT, self._conflict_text(d, docs[d.name][1]))
            if d.action == "delete":
                docs.pop(d.name)
            else:
                docs[d.name] = (d.content, 0)
        return None

    def _conflict_text(self, d: m.DatumAndOp, csn: int) -> str:
        """126001's specifics: the document, both CSNs and (3.1.4) the server that last
        updated it, when the log still holds that CSN (else "unknown": truncated, or written
        earlier in this same group)."""
        by = next((e.gsid.server for e in self.durable.log if e.csn == csn and e.gsid), None)
        who = f"{by.host}:{by.port} incarnation {by.incarn}" if by else "unknown"
        return f"{d.name} submitted at CSN {d.csn or 1} is at CSN {csn}, last updated by {who}"

    def _notify_failure(self, gsid: m.GlobalSubmitID, peer: Any, err: m.ArsError,
                        now: float) -> list[Effect]:
        if peer is None:
            return self._result(gsid, 0, err, now)
        return self._owe(peer, m.SubmittedUpdateResultNotification(gsid, 0, self.zone, err))

    def _owe(self, peer: str, note: m.SubmittedUpdateResultNotification) -> list[Effect]:
        """Send a result down, durably owed until that server acknowledges it (a restarted
        primary sends what it still owes)."""
        return [*self._persist(("owed", peer, note)), self._call(peer, note, "notify-down",
                                                                 note.gsid)]

    # ------------------------------------------------------------------ results

    def _result(self, gsid: m.GlobalSubmitID, csn: int, err: m.ArsError | None,
                now: float) -> list[Effect]:
        """We know the outcome of a pending submission: notify once it is visible here."""
        p = self.durable.pending.get(gsid)
        if p is None:
            return []
        fx = self._persist(("pending", gsid, replace(p, csn=csn, error=err, state="awaiting")))
        return fx + self._release(now)

    def _release(self, now: float) -> list[Effect]:
        """Notify every pending submission whose outcome is known and, when it committed,
        whose CSN has reached this server (4.2.2.6)."""
        fx: list[Effect] = []
        for gsid, p in sorted(self.durable.pending.items(), key=lambda kv: kv[0].ssn):
            if p.state == "awaiting" and (p.error is not None or p.csn <= self.durable.last_csn):
                fx += self._persist(("pending", gsid, replace(p, state="notifying", tries=0)))
                fx += self._notify(gsid, now)
        return fx

    def _wait_result(self, gsid: m.GlobalSubmitID, p: Pending, now: float) -> list[Effect]:
        return [*self._persist(("pending", gsid, replace(p, state="propagated", rounds=0))),
                SetTimer(("result-wait", gsid), now + self.options.result_wait)]

    def _notify(self, gsid: m.GlobalSubmitID, now: float) -> list[Effect]:
        p = self.durable.pending[gsid]
        dest = p.from_peer if p.from_peer is not None else p.notify
        if dest is None:
            return self._done(gsid)
        if p.tries >= self.options.notify_attempts:
            return [Emit("notify-abandoned", {"ssn": gsid.ssn}), *self._done(gsid)]
        p.tries += 1
        body = m.SubmittedUpdateResultNotification(gsid, p.csn or 0, self.zone, p.error)
        return [self._call(dest, body, "notify", gsid),
                SetTimer(("notify", gsid), now + self.options.notify_retry)]

    def _done(self, gsid: m.GlobalSubmitID) -> list[Effect]:
        p = self.durable.pending[gsid]
        fx = self._persist(("done", gsid))
        fx.append(Emit("result", {"ssn": gsid.ssn, "incarn": gsid.server.incarn,
                                  "csn": p.csn or 0,
                                  "error": p.error.code if p.error else None}))
        return fx

    # ------------------------------------------------------------------ requests in

    def _request(self, peer: Any, req: m.ArsRequest, now: float) -> list[Effect]:
        b = req.body
        if isinstance(b, m.PropagateSubmittedUpdate):
            return self._on_propagate(peer, req, now)
        if isinstance(b, m.SubmittedUpdateResultNotification):
            ack = Send(peer, m.ArsResponse(req.req_num, m.ArsAnswer()))
            p = self.durable.pending.get(b.gsid)
            if p is None or p.state not in ("propagating", "propagated"):
                return [ack]
            return [ack, *self._result(b.gsid, b.csn, b.error, now)]
        if isinstance(b, m.PushCommittedUpdates):
            if peer not in self.upstreams:
                return [Send(peer, m.ArsResponse(req.req_num, self._err(m.PUSH_NOT_UPSTREAM, peer)))]
            return [Send(peer, m.ArsResponse(req.req_num, m.ArsAnswer())), *self._pull(peer, now)]
        if isinstance(b, m.PullCommittedUpdates):
            return [Send(peer, m.ArsResponse(req.req_num, self._serve_pull(peer, b)))]
        if isinstance(b, m.ContentEncodingNegotiation):
            if b.zone != self.zone:
                return [Send(peer, m.ArsResponse(req.req_num, self._err(
                    m.UPSTREAM_ZONE_NOT_HELD, b.zone)))]
            names = tuple(n for n in b.names if n in m.ENCODINGS)
            self._encodings[peer] = names
            return [Send(peer, m.ArsResponse(req.req_num, m.ArsAnswer(encodings=names)))]
        return [Send(peer, m.ArsResponse(req.req_num, self._err(m.SUBPROTOCOL_UNSUPPORTED)))]

    def _serve_pull(self, peer: str, b: m.PullCommittedUpdates) -> m.ArsAnswer | m.ArsError:
        if peer not in self.downstreams:
            return self._err(m.PULL_NOT_DOWNSTREAM, peer)
        self._push_outstanding.discard(peer)
        groups: list[m.UpdateGroup] = []
        for st in b.states:
            if st.zone != self.zone:
                return self._err(m.UPSTREAM_ZONE_NOT_HELD, st.zone)
            if st.last_seen_csn == 0 and "AllZoneData" in self._encodings.get(peer, ()):
                groups.append(self._all_zone())
                continue
            if st.last_seen_csn == 0 and self.durable.truncated_through:
                # 3.4: without a negotiation DataWithOps must be used, and the log no longer
                # starts at the beginning
                return self._err(m.NO_FULL_ZONE_ENCODING, "AllZoneData not negotiated; the "
                                 f"log starts after CSN {self.durable.truncated_through}")
            if st.last_seen_csn < self.durable.truncated_through:
                return self._err(m.BEFORE_TRUNCATION, f"CSN {st.last_seen_csn}, truncation "
                                 f"point {self.durable.truncated_through}")
            groups += committed_since(self.durable.log, st.last_seen_csn, self.zone,
                                      collapse=self.options.collapse)
        return m.ArsAnswer(groups=tuple(groups))

    def _all_zone(self) -> m.UpdateGroup:
        data = tuple(m.DatumAndOp(n, c, "write", csn)
                     for n, (c, csn) in sorted(self.durable.docs.items()))
        return m.UpdateGroup(data, max(self.durable.last_csn, 1), self.zone, all_zone=True)

    # ------------------------------------------------------------------ push / pull

    def _push_all(self) -> list[Effect]:
        fx: list[Effect] = []
        for d in self.downstreams:
            if d not in self._push_outstanding:
                self._push_outstanding.add(d)
                fx.append(self._call(d, m.PushCommittedUpdates(
                    self.server.host, self.server.port, self.zone), "push"))
        return fx

    def _pull(self, upstream: str, now: float, last_seen: int | None = None) -> list[Effect]:
        if self._pulling is not None:
            self._pull_again = upstream
            return []
        self._pulling = upstream
        seen = self.durable.last_csn if last_seen is None else last_seen
        if upstream not in self._encodings:  # ars-e first (3.4): may it send AllZoneData?
            return [self._call(upstream, m.ContentEncodingNegotiation(self.zone, m.ENCODINGS),
                               "negotiate", seen)]
        body = m.PullCommittedUpdates(self.server.host, self.server.port,
                                      (m.ReplState(self.zone, seen),))
        return [self._call(upstream, body, "pull",
                           (seen, "AllZoneData" in self._encodings[upstream]))]

    def _negotiated(self, out: _Out, result: m.ArsAnswer | m.ArsError | None,
                    now: float) -> list[Effect]:
        """The answer to our ContentEncodingNegotiation; then the pull it preceded."""
        self._pulling = None
        fx: list[Effect] = []
        if isinstance(result, m.ArsAnswer) and result.encodings is not None:
            extra = set(result.encodings) - set(m.ENCODINGS)
            if extra:  # 4.2.3: the answer must be a subset of what we offered
                fx.append(Emit("ars-refused", {"why": "encodings not offered",
                                               "got": sorted(extra), "from": out.peer}))
            self._encodings[out.peer] = tuple(n for n in result.encodings
                                              if n in m.ENCODINGS)
        elif isinstance(result, m.ArsError | m.ArsAnswer):  # 223005: no ars-e there
            self._encodings[out.peer] = ("DataWithOps",)
        if out.peer in self._encodings:
            return fx + self._pull(out.peer, now, last_seen=out.key)
        return fx + self._pull_pending(now)

    def _pulled(self, out: _Out, result: m.ArsAnswer | m.ArsError | None,
                now: float) -> list[Effect]:
        self._pulling = None
        seen, all_zone = out.key
        fx: list[Effect] = []
        if result is None:
            self._encodings.pop(out.peer, None)  # the channel is likely gone: ask again
        if isinstance(result, m.ArsError) and result.code == m.BEFORE_TRUNCATION:
            if all_zone:  # 4.2.1.4: a full zone transfer, both sides support AllZoneData
                return [Emit("full-transfer", {"from": out.peer, "after": seen}),
                        *self._pull(out.peer, now, last_seen=0)]
            # else the pull timer's rotation re-issues the request at another upstream
            fx.append(Emit("ars-refused", {"why": "before truncation, no AllZoneData",
                                           "from": out.peer}))
        if isinstance(result, m.ArsError) and result.code == m.NO_FULL_ZONE_ENCODING:
            if all_zone:  # it forgot our negotiation (restarted): negotiate again
                self._encodings.pop(out.peer, None)
                return self._pull(out.peer, now, last_seen=0)
        if isinstance(result, m.ArsAnswer):
            if not all_zone and any(g.all_zone for g in result.groups):
                fx.append(Emit("ars-refused", {"why": "AllZoneData not negotiated",
                                               "from": out.peer}))
            else:
                fx += self._apply_committed(out.peer, result.groups)
                fx += self._release(now)
                if self.durable.last_csn > seen:
                    fx += self._push_all()
        return fx + self._pull_pending(now)

    def _pull_pending(self, now: float) -> list[Effect]:
        again, self._pull_again = self._pull_again, None
        return self._pull(again, now) if again is not None else []

    def _apply_committed(self, upstream: str, groups: Iterable[m.UpdateGroup]) -> list[Effect]:
        """Apply the gap-free prefix of ``groups`` after our last CSN, each group whole."""
        fx: list[Effect] = []
        for g in groups:
            if g.all_zone:
                if (g.csn or 0) < self.durable.last_csn:
                    fx.append(Emit("ars-refused", {"why": "stale AllZoneData", "csn": g.csn}))
                    break
                fx += self._persist(("zone", g.csn, g.data))
                fx.append(Emit("zone-transfer", {"csn": g.csn, "from": upstream,
                                                 "docs": len(g.data)}))
                continue
            want = max(self.durable.last_csn, 1) + 1
            if g.csn is None or g.csn < want:
                continue  # already have it
            if "skip-csn" in self.bugs and g.csn % 4 == 0:
                continue  # the bug: this CSN is never applied, the next one is taken
            if (g.csn > want and "skip-csn" not in self.bugs) or g.zone not in (None, self.zone):
                fx.append(Emit("ars-refused", {"why": "gap in committed CSNs", "want": want,
                                               "got": g.csn, "from": upstream}))
                break
            data = g.data[:1] if "partial-group" in self.bugs else g.data
            entry = Committed(g.csn, g.gsid, tuple(replace(d, csn=g.csn) for d in data))
            fx += self._persist(("commit", entry))
            fx.append(Emit("apply", group_event(entry)))
        return fx

    # ------------------------------------------------------------------ answers

    def _answered(self, out: _Out, result: m.ArsAnswer | m.ArsError | None,
                  now: float) -> list[Effect]:
        if out.why == "pull":
            return self._pulled(out, result, now)
        if out.why == "negotiate":
            return self._negotiated(out, result, now)
        if out.why == "push":
            if result is None:
                self._push_outstanding.discard(out.peer)
            return []
        if out.why == "propagate":
            gsid, idx = out.key
            p = self.durable.pending.get(gsid)
            if p is None or p.state != "propagating":
                return []
            if isinstance(result, m.ArsAnswer):
                if p.group is None:  # FailedUpdateSubmission delivered: nothing more to wait for
                    return self._persist(("done", gsid))
                return self._wait_result(gsid, p, now)
            if isinstance(result, m.ArsError) and result.code == m.DUPLICATE_SUBMISSION:
                # an upstream already holds it (our earlier attempt got through): wait for it
                return self._wait_result(gsid, p, now)
            return self._propagate(gsid, now, idx + 1)
        if out.why == "notify":
            p = self.durable.pending.get(out.key)
            if isinstance(result, m.ArsAnswer) and p is not None and p.state == "notifying":
                return self._done(out.key)
            return []
        if out.why == "notify-down":
            if result is None:  # the downstream server missed it: retry later
                return [SetTimer(("notify-down", out.peer, out.key),
                                 now + self.options.notify_retry)]
            if (out.peer, out.key) in self.durable.owed:
                return self._persist(("paid", out.peer, out.key))
            return []
        return []


def group_event(e: Committed) -> dict[str, Any]:
    """The journal fields of a ``commit`` (primary) or ``apply`` (replica) event, the ones the
    ANTACID ordering checker reads (docs/antacid.md): the CSN, the GlobalSubmitID (``server``
    "host:port", ``incarn``, ``ssn``; all None for a group without one), the documents written
    and those deleted."""
    g = e.gsid
    return {"csn": e.csn, "server": f"{g.server.host}:{g.server.port}" if g else None,
            "incarn": g.server.incarn if g else None, "ssn": g.ssn if g else None,
            "docs": [d.name for d in e.data if d.action != "delete"],
            "deleted": [d.name for d in e.data if d.action == "delete"]}


def committed_since(log: Iterable[Committed], last_seen: int, zone: str, *,
                    collapse: bool) -> list[m.UpdateGroup]:
    """The committed groups after ``last_seen``, every CSN present (4.1.3: an entry whose
    documents all have later updates in the range is sent empty, a noop)."""
    entries = [e for e in log if e.csn > last_seen]
    latest: dict[str, int] = {}
    if collapse:
        for e in entries:
            for d in e.data:
                latest[d.name] = e.csn
    out = []
    for e in entries:
        data = e.data
        if collapse:
            data = tuple(replace(d, action="delete" if d.action == "delete" else "write")
                         for d in e.data if latest[d.name] == e.csn)
        out.append(m.UpdateGroup(data, e.csn, zone, e.gsid))
    return out
