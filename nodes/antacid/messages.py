"""ARS messages as typed dataclasses, and their XML: built, parsed and checked against
`nodes/antacid/schema/ars.dtd` both ways.

The wire is untrusted: ``parse`` refuses oversized input, any DTD, entity or external
reference (defusedxml) before anything else reads it, then validates the document against our
DTD (lxml, with entities, DTD loading and the network off) and range-checks every number. What
we send is validated the same way, so a bug of ours cannot put an invalid message on the wire.
Every refusal is an ``ArsProtocolError`` carrying the ARSError code to answer with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from xml.etree.ElementTree import Element as StdElement

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException
from lxml import etree

#: largest ARS message we read or write (bytes); more is refused with 219001
MAX_MESSAGE_BYTES = 1 << 20
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1

Action = Literal["create", "write", "update", "delete"]
ACTIONS: tuple[str, ...] = ("create", "write", "update", "delete")

# the ARSErrorCode values of section 3.1.4 this implementation uses
DELETE_MISSING = 116001
UPDATE_MISSING = 116002
MISSING_URI = 117001
MALFORMED_CLIENT = 127001
ZONE_NOT_HELD = 123001
UPSTREAM_ZONE_NOT_HELD = 123002
SPANS_ZONES = 123003
WRITE_CONFLICT = 126001
DATASTORE_SEMANTICS = 126002
PROPAGATE_FAILED = 210001
REORDER_TIMEOUT = 212001
MALFORMED_ANY = 213003
ENCODING_NOT_UNDERSTOOD = 213001
OVERLOAD = 219001
NO_FULL_ZONE_ENCODING = 223001
PROPAGATE_NOT_DOWNSTREAM = 223002
PUSH_NOT_UPSTREAM = 223003
PULL_NOT_DOWNSTREAM = 223004
SUBPROTOCOL_UNSUPPORTED = 223005
IMPLEMENTATION_FAILURE = 225001
DUPLICATE_SUBMISSION = 226001
BEFORE_TRUNCATION = 226002
MALFORMED_SERVER = 227001

ERROR_TEXT: dict[int, str] = {
    DELETE_MISSING: "Attempt to delete non-existent document.",
    UPDATE_MISSING: "Attempt to update non-existent document.",
    MISSING_URI: "Missing URI in document store request.",
    MALFORMED_CLIENT: "Malformed client-server ARS protocol transmission.",
    ZONE_NOT_HELD: "Request was made to submission server that does not hold zone being requested.",
    UPSTREAM_ZONE_NOT_HELD: "Request was made to upstream server that does not hold zone being requested.",
    SPANS_ZONES: "Attempt to update documents spanning zone boundaries within a single UpdateGroup.",
    WRITE_CONFLICT: "Write-write conflict detected.",
    DATASTORE_SEMANTICS: "Request violates datastore operation semantics.",
    PROPAGATE_FAILED: "Unable to propagate update submission to any upstream servers.",
    REORDER_TIMEOUT: "Timeout at zone primary waiting for submitted update re-ordering.",
    MALFORMED_ANY: "Malformed ARS protocol transmission (client or server).",
    OVERLOAD: "Server resource overload.",
    ENCODING_NOT_UNDERSTOOD: "Content encoding from upstream server not understood.",
    NO_FULL_ZONE_ENCODING: "No content encodings available for full zone transfer.",
    PROPAGATE_NOT_DOWNSTREAM: "PropagateSubmittedUpdate request received from server not configured as a downstream server.",
    PUSH_NOT_UPSTREAM: "PushCommittedUpdates request received from server not configured as an upstream server.",
    PULL_NOT_DOWNSTREAM: "PullCommittedUpdates request received from server not configured as a downstream server.",
    SUBPROTOCOL_UNSUPPORTED: "Requested ARS sub-protocol not supported.",
    IMPLEMENTATION_FAILURE: "Implementation-specific failure.",
    DUPLICATE_SUBMISSION: "Duplicate update submission detected.",
    BEFORE_TRUNCATION: "Request for CSN before log truncation point. Full zone transfer should be requested.",
    MALFORMED_SERVER: "Malformed server-server ARS protocol transmission.",
}

ENCODINGS: tuple[str, ...] = ("DataWithOps", "AllZoneData")

_DTD = etree.DTD(str(Path(__file__).with_name("schema") / "ars.dtd"))
_LXML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                               huge_tree=False, remove_blank_text=True)


class ArsProtocolError(ValueError):
    """A message we refuse; ``code`` is the ARSErrorCode to answer with."""

    def __init__(self, code: int, specifics: str) -> None:
        super().__init__(f"ARSError {code}: {specifics}")
        self.code = code
        self.specifics = specifics


@dataclass(frozen=True)
class ServerId:
    """A GlobalServerID: DNS name (or address), port and incarnation stamp (never 0)."""

    host: str
    port: int
    incarn: int


@dataclass(frozen=True)
class GlobalSubmitID:
    """A submission's identity for all time: the submission server and its SSN there."""

    server: ServerId
    ssn: int


@dataclass(frozen=True)
class DatumAndOp:
    """One document and the operation on it; ``csn`` None is the IMPLIED default (1)."""

    name: str
    content: str = ""
    action: Action = "write"
    csn: int | None = None


@dataclass(frozen=True)
class UpdateGroup:
    """Documents updated all-or-nothing. Submitted: no csn. Committed: its CSN, the zone
    and the submission it came from; ``all_zone`` marks an AllZoneData transfer (the
    receiver replaces the zone); an empty committed group is a CSN collapsed away (noop)."""

    data: tuple[DatumAndOp, ...]
    csn: int | None = None
    zone: str | None = None
    gsid: GlobalSubmitID | None = None
    all_zone: bool = False


@dataclass(frozen=True)
class ArsError:
    """ARSError: the 6-digit code, its text, optional specifics, where it occurred."""

    code: int
    at: ServerId
    text: str = ""
    specifics: str = ""

    @staticmethod
    def of(code: int, at: ServerId, specifics: str = "") -> ArsError:
        return ArsError(code, at, ERROR_TEXT.get(code, "ARS error."), specifics)


@dataclass(frozen=True)
class SubmitUpdate:
    group: UpdateGroup
    notify_host: str | None = None
    notify_port: int | None = None
    notify_ok_on_current_channel: bool = False


@dataclass(frozen=True)
class SubmittedUpdateResultNotification:
    gsid: GlobalSubmitID
    csn: int
    zone: str
    error: ArsError | None = None


@dataclass(frozen=True)
class PushCommittedUpdates:
    """``zone`` (ZoneTopNodeName, our extension, docs/antacid.md decision 13): the zone whose
    commits prompt the push; None suggests a pull of every zone that upstream feeds."""

    upstream_host: str
    upstream_port: int
    zone: str | None = None


@dataclass(frozen=True)
class ReplState:
    zone: str
    last_seen_csn: int


@dataclass(frozen=True)
class PullCommittedUpdates:
    downstream_host: str
    downstream_port: int
    states: tuple[ReplState, ...]


@dataclass(frozen=True)
class PropagateSubmittedUpdate:
    """``group`` None is a FailedUpdateSubmission. ``zone`` (ZoneTopNodeName, our extension,
    docs/antacid.md decision 13): the zone the GlobalSubmitID's SSN was allocated in (SSNs are
    per server per zone, 3.1.2); a FailedUpdateSubmission has no documents to tell it."""

    gsid: GlobalSubmitID
    notify_host: str
    notify_port: int
    group: UpdateGroup | None
    zone: str | None = None


@dataclass(frozen=True)
class ContentEncodingNegotiation:
    zone: str
    names: tuple[str, ...]


Body = (SubmitUpdate | SubmittedUpdateResultNotification | PushCommittedUpdates
        | PullCommittedUpdates | PropagateSubmittedUpdate | ContentEncodingNegotiation)


@dataclass(frozen=True)
class ArsRequest:
    req_num: int
    body: Body


@dataclass(frozen=True)
class ArsAnswer:
    """Empty (an acknowledgement), or one of: a GlobalSubmitID, committed update groups,
    the supported encodings."""

    gsid: GlobalSubmitID | None = None
    groups: tuple[UpdateGroup, ...] = ()
    encodings: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ArsResponse:
    req_num: int
    result: ArsAnswer | ArsError = field(default_factory=ArsAnswer)


Message = ArsRequest | ArsResponse | ArsError


# ----------------------------------------------------------------------------- encoding


def _sub(parent: etree._Element, tag: str, text: str | None = None, **attrs: str) -> etree._Element:
    el = etree.SubElement(parent, tag, {k: v for k, v in attrs.items()})
    if text is not None:
        el.text = text
    return el


def _gsid_attrs(g: GlobalSubmitID) -> dict[str, str]:
    return {"SubmisSvrHost": g.server.host, "SubmisSvrPort": str(g.server.port),
            "SubmisSvrIncarn": str(g.server.incarn), "SSN": str(g.ssn)}


def _error_el(parent: etree._Element | None, e: ArsError) -> etree._Element:
    attrs = {"OccurredAtSvrHost": e.at.host, "OccurredAtSvrPort": str(e.at.port),
             "OccurredAtSvrIncarn": str(e.at.incarn)}
    el = etree.Element("ARSError", attrs) if parent is None else _sub(parent, "ARSError", **attrs)
    _sub(el, "ARSErrorCode", str(e.code))
    _sub(el, "ARSErrorText", e.text or ERROR_TEXT.get(e.code, "ARS error."))
    if e.specifics:
        _sub(el, "ARSErrorSpecificsText", e.specifics)
    return el


def _group_el(parent: etree._Element, g: UpdateGroup) -> None:
    attrs: dict[str, str] = {}
    if g.csn is not None:
        attrs["CSN"] = str(g.csn)
    if g.zone is not None:
        attrs["ZoneTopNodeName"] = g.zone
    el = _sub(parent, "UpdateGroup", **attrs)
    if g.gsid is not None:
        _sub(el, "GlobalSubmitID", **_gsid_attrs(g.gsid))
    if g.all_zone:
        enc = _sub(el, "AllZoneData", ZoneTopNodeName=g.zone or "")
    else:
        enc = _sub(el, "DataWithOps")
    for d in g.data:
        da = {"Name": d.name, "Action": d.action}
        if d.csn is not None:
            da["CSN"] = str(d.csn)
        _sub(enc, "DatumAndOp", d.content, **da)


def _body_el(parent: etree._Element, b: Body) -> None:
    match b:
        case SubmitUpdate():
            attrs = {"NotifyOkOnCurrentChannel": "yes" if b.notify_ok_on_current_channel else "no"}
            if b.notify_host is not None:
                attrs["NotifyHost"] = b.notify_host
            if b.notify_port is not None:
                attrs["NotifyPort"] = str(b.notify_port)
            _group_el(_sub(parent, "SubmitUpdate", **attrs), b.group)
        case SubmittedUpdateResultNotification():
            el = _sub(parent, "SubmittedUpdateResultNotification", **_gsid_attrs(b.gsid),
                      CSN=str(b.csn), ZoneTopNodeName=b.zone)
            if b.error is not None:
                _error_el(el, b.error)
        case PushCommittedUpdates():
            zattrs = {} if b.zone is None else {"ZoneTopNodeName": b.zone}
            _sub(parent, "PushCommittedUpdates", UpstreamHost=b.upstream_host,
                 UpstreamPort=str(b.upstream_port), **zattrs)
        case PullCommittedUpdates():
            el = _sub(parent, "PullCommittedUpdates", DownstreamHost=b.downstream_host,
                      DownstreamPort=str(b.downstream_port))
            for s in b.states:
                rs = _sub(el, "ReplState")
                _sub(rs, "TopNodeOfZoneToReplicate", s.zone)
                _sub(rs, "LastSeenCSN", str(s.last_seen_csn))
        case PropagateSubmittedUpdate():
            zattrs = {} if b.zone is None else {"ZoneTopNodeName": b.zone}
            el = _sub(parent, "PropagateSubmittedUpdate", **_gsid_attrs(b.gsid),
                      NotifyHost=b.notify_host, NotifyPort=str(b.notify_port), **zattrs)
            if b.group is None:
                _sub(el, "FailedUpdateSubmission")
            else:
                _group_el(el, b.group)
        case ContentEncodingNegotiation():
            el = _sub(parent, "ContentEncodingNegotiation", ZoneTopNodeName=b.zone)
            for n in b.names:
                _sub(el, "ContentEncodingName", n)
        case _:
            raise TypeError(f"not an ARS request body: {b!r}")


def encode(msg: Message) -> bytes:
    """The XML of ``msg``, validated against the DTD (a failure is our bug: ValueError)."""
    match msg:
        case ArsRequest():
            root = etree.Element("ARSRequest", ReqNum=str(msg.req_num))
            _body_el(root, msg.body)
        case ArsResponse():
            root = etree.Element("ARSResponse", ReqNum=str(msg.req_num))
            if isinstance(msg.result, ArsError):
                _error_el(root, msg.result)
            else:
                a = msg.result
                ans = _sub(root, "ARSAnswer")
                if a.gsid is not None:
                    _sub(ans, "GlobalSubmitID", **_gsid_attrs(a.gsid))
                elif a.encodings is not None:
                    ces = _sub(ans, "ContentEncodingsSupported")
                    for n in a.encodings:
                        _sub(ces, "ContentEncodingName", n)
                for g in a.groups:
                    _group_el(ans, g)
        case ArsError():
            root = _error_el(None, msg)
        case _:
            raise TypeError(f"not an ARS message: {msg!r}")
    if not _DTD.validate(root):
        raise ValueError(f"we built an invalid ARS message: {_DTD.error_log.filter_from_errors()}")
    data = etree.tostring(root, encoding="utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError(f"ARS message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        parse(data)  # the same range checks a receiver makes
    except ArsProtocolError as e:
        raise ValueError(f"we built an invalid ARS message: {e}") from None
    return data


# ----------------------------------------------------------------------------- decoding


def _int(el: StdElement, attr: str, *, lo: int = 0, hi: int = U64) -> int:
    raw = el.get(attr)
    return _num(raw, f"{el.tag}@{attr}", lo, hi)


def _num(raw: str | None, what: str, lo: int, hi: int) -> int:
    if raw is None or not raw.strip().isdigit():
        raise ArsProtocolError(MALFORMED_ANY, f"{what} is not an unsigned integer: {raw!r}")
    n = int(raw.strip())
    if not lo <= n <= hi:
        raise ArsProtocolError(MALFORMED_ANY, f"{what}={n} outside {lo}..{hi}")
    return n


def _port(el: StdElement, attr: str) -> int:
    return _int(el, attr, lo=1, hi=65535)


def _server(el: StdElement) -> ServerId:
    return ServerId(el.get("SubmisSvrHost") or "", _port(el, "SubmisSvrPort"),
                    _int(el, "SubmisSvrIncarn", lo=1))


def _gsid(el: StdElement) -> GlobalSubmitID:
    return GlobalSubmitID(_server(el), _int(el, "SSN", lo=1))


def _error(el: StdElement) -> ArsError:
    at = ServerId(el.get("OccurredAtSvrHost") or "", _port(el, "OccurredAtSvrPort"),
                  _int(el, "OccurredAtSvrIncarn"))
    code = _num(el.findtext("ARSErrorCode"), "ARSErrorCode", 100000, 299999)
    return ArsError(code, at, el.findtext("ARSErrorText") or "",
                    el.findtext("ARSErrorSpecificsText") or "")


def _group(el: StdElement) -> UpdateGroup:
    csn = _int(el, "CSN") if el.get("CSN") is not None else None
    g = el.find("GlobalSubmitID")
    data: list[DatumAndOp] = []
    all_zone = False
    for enc in el:
        if enc.tag == "GlobalSubmitID":
            continue
        all_zone = all_zone or enc.tag == "AllZoneData"
        for d in enc:
            dcsn = _int(d, "CSN") if d.get("CSN") is not None else None
            action = d.get("Action") or "write"
            data.append(DatumAndOp(d.get("Name") or "", d.text or "", action, dcsn))  # type: ignore[arg-type]
    return UpdateGroup(tuple(data), csn, el.get("ZoneTopNodeName"),
                       _gsid(g) if g is not None else None, all_zone)


def _body(el: StdElement) -> Body:
    match el.tag:
        case "SubmitUpdate":
            host, port = el.get("NotifyHost"), el.get("NotifyPort")
            ok = el.get("NotifyOkOnCurrentChannel", "no") == "yes"
            if (host is None) != (port is None) or (ok and host is None):
                raise ArsProtocolError(MALFORMED_CLIENT,
                                       "NotifyHost and NotifyPort go together (and "
                                       "NotifyOkOnCurrentChannel='yes' needs both)")
            group = _group(el[0])
            if not group.data:
                raise ArsProtocolError(MALFORMED_CLIENT, "SubmitUpdate with no documents")
            return SubmitUpdate(group, host, _port(el, "NotifyPort") if port else None, ok)
        case "SubmittedUpdateResultNotification":
            err = el.find("ARSError")
            return SubmittedUpdateResultNotification(
                _gsid(el), _int(el, "CSN"), el.get("ZoneTopNodeName") or "",
                _error(err) if err is not None else None)
        case "PushCommittedUpdates":
            return PushCommittedUpdates(el.get("UpstreamHost") or "", _port(el, "UpstreamPort"),
                                        el.get("ZoneTopNodeName"))
        case "PullCommittedUpdates":
            states = tuple(ReplState((rs.findtext("TopNodeOfZoneToReplicate") or "").strip(),
                                     _num(rs.findtext("LastSeenCSN"), "LastSeenCSN", 0, U64))
                           for rs in el)
            return PullCommittedUpdates(el.get("DownstreamHost") or "",
                                        _port(el, "DownstreamPort"), states)
        case "PropagateSubmittedUpdate":
            inner = el[0]
            group = None if inner.tag == "FailedUpdateSubmission" else _group(inner)
            if group is not None and not group.data:
                raise ArsProtocolError(MALFORMED_SERVER, "PropagateSubmittedUpdate with no documents")
            return PropagateSubmittedUpdate(_gsid(el), el.get("NotifyHost") or "",
                                            _port(el, "NotifyPort"), group,
                                            el.get("ZoneTopNodeName"))
        case "ContentEncodingNegotiation":
            return ContentEncodingNegotiation(el.get("ZoneTopNodeName") or "",
                                              tuple((n.text or "").strip() for n in el))
    raise ArsProtocolError(MALFORMED_ANY, f"unknown request {el.tag}")  # pragma: no cover


def parse(data: bytes) -> Message:
    """The message in ``data``; ``ArsProtocolError`` for anything we refuse to read."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise ArsProtocolError(OVERLOAD, f"message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    try:
        root = SafeET.fromstring(data, forbid_dtd=True, forbid_entities=True,
                                 forbid_external=True)
    except DefusedXmlException as e:
        raise ArsProtocolError(MALFORMED_ANY, f"refused XML construct: {e}") from None
    except SafeET.ParseError as e:
        raise ArsProtocolError(MALFORMED_ANY, f"XML parse error: {e}") from None
    try:
        checked = etree.fromstring(data, _LXML_PARSER)
    except etree.XMLSyntaxError as e:  # pragma: no cover - defusedxml read it already
        raise ArsProtocolError(MALFORMED_ANY, f"XML parse error: {e}") from None
    if not _DTD.validate(checked):
        errors = "; ".join(str(e.message) for e in _DTD.error_log.filter_from_errors()[:3])
        raise ArsProtocolError(MALFORMED_ANY, f"not valid ARS: {errors}")
    match root.tag:
        case "ARSRequest":
            return ArsRequest(_int(root, "ReqNum", lo=1, hi=U32), _body(root[0]))
        case "ARSResponse":
            req = _int(root, "ReqNum", lo=1, hi=U32)
            inner = root[0]
            if inner.tag == "ARSError":
                return ArsResponse(req, _error(inner))
            gsid_el = inner.find("GlobalSubmitID")
            ces = inner.find("ContentEncodingsSupported")
            return ArsResponse(req, ArsAnswer(
                _gsid(gsid_el) if gsid_el is not None else None,
                tuple(_group(g) for g in inner.findall("UpdateGroup")),
                tuple((n.text or "").strip() for n in ces) if ces is not None else None))
        case "ARSError":
            return _error(root)
    raise ArsProtocolError(MALFORMED_ANY, f"{root.tag} is not an ARS message")
