"""ANTACID's hostile traffic for the ``hostile`` fault (faults/hostile.py): issue 28's attacks.

ARS runs over BEEP, so every attack is one TCP connection carrying a whole BEEP exchange as
raw bytes, made with our own sans-IO session and frame encoder: the initiator's greeting, a
``start`` of an ARS channel (naming a server in its content when the attack poses as one), then
the hostile frames on channel 1. The node's listener reads them in order, so nothing needs to
wait for its replies (the generic TCP sender connects, writes and closes). Each kind breaks one
layer: the BEEP framing (the node must close the session), the XML (ERR with an ARSError), or
the ARS rules (an ARSError from the core: forged neighbours, replays, CSNs far ahead).

`INTENT` says what each kind tries and what a node should do with it. Not covered by raw
bytes: anything that needs the node's answers first (a replay of a group the node committed
names a GlobalSubmitID it gave out); ``replay`` repeats one request within a session.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from nodes.antacid import messages as m
from nodes.antacid.beep import INITIATOR, LISTENER, Session
from nodes.antacid.beep import management as mgmt
from nodes.antacid.beep.frames import MAX_31, MSG, Frame, Seq
from nodes.antacid.beep.mime import BEEP_XML
from nodes.antacid.beep.mime import encode as mime_encode
from nodes.antacid.beep.session import DEFAULT_WINDOW

PROFILE = "http://xml.resource.org/profiles/ARS"
#: the suite's default zone (harness/suites/antacid.py DEFAULT_OPTIONS["zone"])
ZONE = "zone.test"
U64_PLUS = 2**64
FLOOD_STARTS = 100  # channel starts in one session (a node allows 64 channels open)
OVERSIZE = (1 << 20) + (1 << 16)  # a message past the 1 MiB a node reassembles
LAUGHS = 10  # levels of the billion-laughs DTD (10^10 expansions if anything expanded it)

#: kind -> (what it sends, what the node must answer)
INTENT: dict[str, tuple[str, str]] = {
    "bad-header": ("a MSG header whose msgno is not a number", "session close"),
    "wrong-size": ("a MSG whose size field is 10 octets short of its payload", "session close"),
    "seqno-gap": ("a MSG with seqno 1000 where 0 is due", "session close"),
    "window-overrun": ("a 2000-octet frame, then 4000 octets more before any SEQ",
                       "session close"),
    "oversize-message": ("a 1.06 MiB message in half-window frames", "session close"),
    "oversize-frame": ("a MSG header announcing a 2 MiB payload", "session close"),
    "malformed-xml": ("an unclosed ARSRequest", "ERR ARSError 213003"),
    "billion-laughs": ("an ARSRequest behind a DTD of nested entities", "ERR ARSError"),
    "external-dtd": ("an ARSRequest with an external DTD and a file:// entity", "ERR ARSError"),
    "schema-invalid": ("an ARSRequest with an element the DTD does not have", "ERR ARSError"),
    "ssn-2^64": ("a PropagateSubmittedUpdate with SSN 2^64", "ERR ARSError"),
    "csn-negative": ("a SubmittedUpdateResultNotification with CSN -1", "ERR ARSError"),
    "forged-propagate": ("a PropagateSubmittedUpdate from a server not its downstream",
                         "an ARSError (223002, or 213003 for an unknown name)"),
    "forged-push": ("a PushCommittedUpdates from each other server and itself",
                    "ARSError 223003 but from its real upstream (which it then pulls)"),
    "replay": ("one PropagateSubmittedUpdate twice in a session (posing as the node itself)",
               "an ARSError each"),
    "pull-far-ahead": ("a PullCommittedUpdates with LastSeenCSN 2^63, posing as each other "
                       "server", "ARSError (not downstream, or CSN ahead of its log)"),
    "channel-flood": (f"{FLOOD_STARTS} channel starts in one session, granting the node a "
                      "2^31-1 window on channel 0", "ERR for the starts past its channel limit"),
    "garbage": ("random bytes", "session close"),
}


class Target(Protocol):
    """A node to attack (faults.hostile.Target): its name is its server name in ARS."""

    @property
    def node(self) -> str: ...


def opening(poser: str = "") -> tuple[bytes, Session]:
    """Greeting + start of ARS channel 1 (content ``poser``: the server the attacker poses
    as; empty: a client). The session is returned for callers that add channel 0 frames."""
    s = Session(INITIATOR, ())
    s.start_channel(PROFILE, poser)
    return s.data_to_send(), s


def msg_frame(body: bytes, *, msgno: int = 0, seqno: int = 0, more: bool = False,
              channel: int = 1) -> bytes:
    """One MSG frame carrying ``body`` as an untyped MIME entity."""
    return Frame(MSG, channel, msgno, more, seqno, mime_encode(body)).encode()


def on_channel(poser: str, *bodies: bytes) -> bytes:
    """A whole exchange: the opening, then each body as one MSG on channel 1, in sequence."""
    out, _ = opening(poser)
    seqno = 0
    for i, body in enumerate(bodies):
        frame = msg_frame(body, msgno=i, seqno=seqno)
        seqno += len(mime_encode(body))
        out += frame
    return out


def _group(rng: random.Random) -> m.UpdateGroup:
    return m.UpdateGroup((m.DatumAndOp(f"{ZONE}.hostile{rng.randrange(8)}",
                                       f"hostile:{rng.randrange(10**6)}"),))


def _propagate(rng: random.Random, ssn: int = 1) -> m.ArsRequest:
    gsid = m.GlobalSubmitID(m.ServerId("127.0.0.1", 9, 1 + rng.randrange(10**6)), ssn)
    return m.ArsRequest(1 + rng.randrange(1000),
                        m.PropagateSubmittedUpdate(gsid, "127.0.0.1", 9, _group(rng)))


def billion_laughs() -> bytes:
    ents = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, LAUGHS)]
    return (f'<?xml version="1.0"?>\n<!DOCTYPE ARSRequest [{"".join(ents)}]>\n'
            f'<ARSRequest ReqNum="1"><PushCommittedUpdates UpstreamHost="&lol{LAUGHS - 1};" '
            f'UpstreamPort="9"/></ARSRequest>').encode()


def external_dtd() -> bytes:
    return (b'<?xml version="1.0"?>\n<!DOCTYPE ARSRequest SYSTEM "http://127.0.0.1:9/ars.dtd" '
            b'[<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
            b'<ARSRequest ReqNum="1"><PushCommittedUpdates UpstreamHost="&xxe;" '
            b'UpstreamPort="9"/></ARSRequest>')


def _channel_flood() -> bytes:
    """The greeting, then FLOOD_STARTS start MSGs on channel 0 written at once (our session
    would hold them to channel 0's window; a flooder does not wait)."""
    out = Session(INITIATOR, ()).data_to_send()
    seqno = int(out.split(b"\r\n", 1)[0].split(b" ")[5])  # channel 0 goes on after our greeting
    # the largest window for the node's answers (past the node's greeting), so they all flow
    theirs = Session(LISTENER, (PROFILE,)).data_to_send()
    out += Seq(0, int(theirs.split(b"\r\n", 1)[0].split(b" ")[5]), MAX_31).encode()
    for i in range(FLOOD_STARTS):
        payload = mime_encode(mgmt.encode(mgmt.Start(1 + 2 * i, (PROFILE,))), BEEP_XML)
        out += Frame(MSG, 0, i, False, seqno, payload).encode()
        seqno += len(payload)
    return out


def _oversize(rng: random.Random) -> bytes:
    """One message of OVERSIZE octets in frames of half the window (each is acked as it
    arrives, so the window never stops it: the message limit must)."""
    out, _ = opening()
    body = mime_encode(b"<ARSRequest>" + rng.randbytes(64).hex().encode() * (OVERSIZE // 128))
    step = DEFAULT_WINDOW // 2
    for off in range(0, len(body), step):
        chunk = body[off:off + step]
        out += Frame(MSG, 1, 0, off + step < len(body), off, chunk).encode()
    return out


def _for(rng: random.Random, t: Target, targets: Sequence[Target]) -> Iterator[tuple[str, str, bytes]]:
    others = [o.node for o in targets if o.node != t.node]

    def h(kind: str, data: bytes) -> tuple[str, str, bytes]:
        return (t.node, kind, data)

    client, _ = opening()
    yield h("bad-header", client + b"MSG 1 x . 0 5\r\n\r\nabcEND\r\n")
    body = mime_encode(m.encode(m.ArsRequest(1, m.SubmitUpdate(_group(rng)))))
    yield h("wrong-size", client + f"MSG 1 0 . 0 {len(body) - 10}\r\n".encode() + body + b"END\r\n")
    yield h("seqno-gap", client + msg_frame(m.encode(m.ArsRequest(1, m.SubmitUpdate(_group(rng)))),
                                            seqno=1000))
    yield h("window-overrun", client + msg_frame(b"x" * 1998, more=True)
            + msg_frame(b"y" * 3998, seqno=2000))
    yield h("oversize-message", _oversize(rng))
    yield h("oversize-frame", client + f"MSG 1 0 . 0 {2 << 20}\r\n".encode() + rng.randbytes(4096))
    yield h("malformed-xml", on_channel("", b'<ARSRequest ReqNum="1"><SubmitUpdate'))
    yield h("billion-laughs", on_channel("", billion_laughs()))
    yield h("external-dtd", on_channel("", external_dtd()))
    valid = m.encode(m.ArsRequest(1, m.SubmitUpdate(_group(rng))))
    yield h("schema-invalid", on_channel("", valid.replace(b"<SubmitUpdate ", b"<Mallory ", 1)
                                         .replace(b"</SubmitUpdate>", b"</Mallory>", 1)))
    big = m.encode(_propagate(rng)).replace(b'SSN="1"', f'SSN="{U64_PLUS}"'.encode(), 1)
    yield h("ssn-2^64", on_channel(t.node, big))
    note = m.ArsRequest(1, m.SubmittedUpdateResultNotification(
        m.GlobalSubmitID(m.ServerId("127.0.0.1", 9, 1), 1), 7, ZONE))
    yield h("csn-negative", on_channel("", m.encode(note).replace(b'CSN="7"', b'CSN="-1"', 1)))
    for poser in (t.node, f"mallory-{rng.randrange(10**6)}"):
        yield h("forged-propagate", on_channel(poser, m.encode(_propagate(rng))))
    push = m.encode(m.ArsRequest(1, m.PushCommittedUpdates("127.0.0.1", 9)))
    for poser in [*others, t.node]:
        yield h("forged-push", on_channel(poser, push))
    replayed = m.encode(_propagate(rng))
    yield h("replay", on_channel(t.node, replayed, replayed))
    pull = m.encode(m.ArsRequest(1, m.PullCommittedUpdates(
        "127.0.0.1", 9, (m.ReplState(ZONE, 2**63),))))
    for poser in others or [t.node]:
        yield h("pull-far-ahead", on_channel(poser, pull))
    yield h("channel-flood", _channel_flood())
    yield h("garbage", rng.randbytes(rng.randrange(1, 200)))


def messages(rng: random.Random, targets: Sequence[Target]) -> Iterator[tuple[str, str, bytes]]:
    """One burst: every kind of `INTENT` for every target, in target order."""
    for t in targets:
        yield from _for(rng, t, targets)


def refusals(state: Mapping[str, Any]) -> dict[str, int]:
    """Refusal counters from an ANTACID /admin/state: the ``refused`` map (per reason,
    nodes/common/refusals.py) as ``refused:<reason>`` and ``io.malformed_in``."""
    out: dict[str, int] = {}
    for reason, n in (state.get("refused") or {}).items():
        if isinstance(n, int):
            out[f"refused:{reason}"] = n
    n = (state.get("io") or {}).get("malformed_in")
    if isinstance(n, int):
        out["malformed_in"] = n
    return dict(sorted(out.items()))
