"""ARS messages: every one round-trips through the schema-checked XML, and hostile or
malformed input is refused with the ARSError code to answer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.antacid import messages as m

S = m.ServerId("svr2.example.com", 5682, 1001)
G = m.GlobalSubmitID(S, 7)
DOC = m.DatumAndOp("blocks:z.blk01", "<block name='blk01'>a &amp; b</block>", "create")
GROUP = m.UpdateGroup((DOC, m.DatumAndOp("blocks:z.blk02", "", "delete", 5)))
COMMITTED = m.UpdateGroup((m.DatumAndOp("blocks:z.blk01", "x", "write", 9),), 9, "blocks:z", G)
ERR = m.ArsError.of(m.DATASTORE_SEMANTICS, S, "Request #1 failed")

MESSAGES: list[m.Message] = [
    m.ArsRequest(1, m.SubmitUpdate(GROUP, "client.example.com", 6000, True)),
    m.ArsRequest(2, m.SubmitUpdate(GROUP)),
    m.ArsRequest(3, m.SubmittedUpdateResultNotification(G, 9, "blocks:z")),
    m.ArsRequest(4, m.SubmittedUpdateResultNotification(G, 0, "blocks:z", ERR)),
    m.ArsRequest(5, m.PushCommittedUpdates("svr1.example.com", 5682)),
    m.ArsRequest(6, m.PullCommittedUpdates("svr2.example.com", 5682,
                                           (m.ReplState("blocks:z", 0), m.ReplState("blocks:y", 4)))),
    m.ArsRequest(7, m.PropagateSubmittedUpdate(G, "svr2.example.com", 5682, GROUP)),
    m.ArsRequest(8, m.PropagateSubmittedUpdate(G, "svr2.example.com", 5682, None)),
    m.ArsRequest(9, m.ContentEncodingNegotiation("blocks:z", ("DataWithOps", "AllZoneData",
                                                              "EllipsisNotation"))),
    m.ArsResponse(1, m.ArsAnswer(gsid=G)),
    m.ArsResponse(2, m.ArsAnswer()),
    m.ArsResponse(3, m.ArsAnswer(groups=(COMMITTED, m.UpdateGroup((), 10, "blocks:z")))),
    m.ArsResponse(4, m.ArsAnswer(groups=(m.UpdateGroup((DOC,), 3, "blocks:z", all_zone=True),))),
    m.ArsResponse(5, m.ArsAnswer(encodings=("DataWithOps",))),
    m.ArsResponse(6, m.ArsAnswer(encodings=())),
    m.ArsResponse(m.U32, ERR),
    m.ArsError.of(m.MALFORMED_ANY, S, "parse error"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda x: type(getattr(x, "body", x)).__name__)
def test_every_message_round_trips(msg: m.Message) -> None:
    assert m.parse(m.encode(msg)) == msg


def refused(data: bytes) -> int:
    with pytest.raises(m.ArsProtocolError) as e:
        m.parse(data)
    return e.value.code


def test_entity_expansion_and_dtds_are_refused() -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE ARSRequest [<!ENTITY a "aaaaaaaaaa">'
              b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
              b'<ARSRequest ReqNum="1"><PushCommittedUpdates UpstreamHost="&b;" '
              b'UpstreamPort="1"/></ARSRequest>')
    assert refused(laughs) == m.MALFORMED_ANY
    external = (b'<!DOCTYPE ARSRequest SYSTEM "file:///etc/passwd"><ARSRequest ReqNum="1">'
                b'<PushCommittedUpdates UpstreamHost="h" UpstreamPort="1"/></ARSRequest>')
    assert refused(external) == m.MALFORMED_ANY


def test_malformed_invalid_and_oversized_input_is_refused() -> None:
    assert refused(b"<ARSRequest ReqNum='1'><Push") == m.MALFORMED_ANY
    assert refused(b"<ARSRequest ReqNum='1'><Bogus/></ARSRequest>") == m.MALFORMED_ANY
    assert refused(b"<ARSRequest ReqNum='0'><PushCommittedUpdates UpstreamHost='h' "
                   b"UpstreamPort='1'/></ARSRequest>") == m.MALFORMED_ANY
    assert refused(b"<ARSRequest ReqNum='1'><PushCommittedUpdates UpstreamHost='h' "
                   b"UpstreamPort='99999'/></ARSRequest>") == m.MALFORMED_ANY
    assert refused(b"<ARSResponse ReqNum='1'><ARSAnswer/></ARSResponse>" + b" " * m.MAX_MESSAGE_BYTES) == m.OVERLOAD
    assert refused(b"<html/>") == m.MALFORMED_ANY


def test_submit_update_rules_of_3_2_1_1() -> None:
    ok = m.encode(m.ArsRequest(1, m.SubmitUpdate(GROUP, "c", 1)))
    assert refused(ok.replace(b' NotifyPort="1"', b"")) == m.MALFORMED_CLIENT
    yes_alone = m.encode(m.ArsRequest(1, m.SubmitUpdate(GROUP))).replace(b'"no"', b'"yes"')
    assert refused(yes_alone) == m.MALFORMED_CLIENT
    empty = (b"<ARSRequest ReqNum='1'><SubmitUpdate><UpdateGroup><DataWithOps/></UpdateGroup>"
             b"</SubmitUpdate></ARSRequest>")
    assert refused(empty) == m.MALFORMED_CLIENT
    with pytest.raises(ValueError, match="no documents"):
        m.encode(m.ArsRequest(1, m.SubmitUpdate(m.UpdateGroup(()))))


def test_we_never_send_an_invalid_message() -> None:
    with pytest.raises(ValueError, match="invalid ARS message"):
        m.encode(m.ArsRequest(0, m.PushCommittedUpdates("h", 1)))
    with pytest.raises(ValueError, match="invalid ARS message"):
        m.encode(m.ArsRequest(1, m.PushCommittedUpdates("h", 0)))


_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xD7FF) | st.sampled_from("\n\t"),
                max_size=40)
_name = st.from_regex(r"blocks:[a-z]{1,8}(\.[a-z0-9]{1,8}){0,3}", fullmatch=True)


@given(docs=st.lists(st.tuples(_name, _text, st.sampled_from(m.ACTIONS),
                               st.none() | st.integers(0, m.U64)), min_size=1, max_size=5),
       req=st.integers(1, m.U32), ssn=st.integers(1, m.U64))
def test_any_document_content_round_trips(docs: list, req: int, ssn: int) -> None:
    group = m.UpdateGroup(tuple(m.DatumAndOp(*d) for d in docs))
    msg = m.ArsRequest(req, m.PropagateSubmittedUpdate(m.GlobalSubmitID(S, ssn), "h", 1, group))
    assert m.parse(m.encode(msg)) == msg
