"""The DRiP wire format: header rules of spec 4.3, round trips, malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.drip import codec
from nodes.drip.codec import U64_MAX, CodecError, Update

ids = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True)
json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                           max_leaves=6)
updates = st.builds(Update, ids, st.text(min_size=1, max_size=20), json_values, st.none() | ids)
counters = st.integers(0, U64_MAX)

messages = st.one_of(
    st.builds(codec.Voting, ids, counters, st.booleans(), updates,
              budget_ms=st.none() | st.integers(0, 10**9 - 1)),
    st.builds(codec.Commit, ids, counters, st.booleans(), updates, st.integers(0, 2**40)),
    st.builds(codec.Abort, ids, counters, st.booleans(), ids, st.text(min_size=1, max_size=20)),
    st.builds(codec.VoteResponse, ids, st.booleans(), ids, counters, ids,
              st.lists(ids, max_size=4).map(lambda x: tuple(sorted(set(x)))),
              st.lists(ids, max_size=4).map(lambda x: tuple(sorted(set(x)))),
              st.integers(0, 2**40), st.booleans()),
    st.builds(codec.SyncBatch, ids, counters, st.booleans(), st.booleans(), ids,
              st.lists(st.builds(codec.Item, st.text(min_size=1, max_size=9), json_values,
                                 st.integers(0, 99), ids, st.none() | ids), max_size=3).map(tuple)),
    st.builds(codec.Heartbeat, ids, st.sampled_from(codec.STATES),
              st.lists(ids, max_size=4).map(lambda x: tuple(sorted(set(x)))), st.booleans()),
    st.builds(codec.NodeNotice, ids, st.booleans()),
    st.builds(codec.SyncRequest, ids),
)


@given(messages)
def test_every_message_round_trips_through_http(msg: codec.Message) -> None:
    req = codec.encode(msg)
    assert codec.decode(req.method, req.path, req.headers, req.body_bytes()) == msg


@pytest.mark.parametrize("raw", ["0", "1", "18446744073709551615"])
def test_counter_accepts_the_whole_unsigned_64_bit_range(raw: str) -> None:
    assert codec.parse_counter(raw) == int(raw)


@pytest.mark.parametrize("raw", ["-1", "+1", "18446744073709551616", "1.5", " 1", "", "0x10",
                                 "999999999999999999999"])
def test_counter_rejects_anything_else(raw: str) -> None:
    with pytest.raises(CodecError, match="DRiP-Node-Counter"):
        codec.parse_counter(raw)


def test_counter_wraps_to_zero_with_the_reset_flag() -> None:
    assert codec.next_counter(5) == (6, False)
    assert codec.next_counter(U64_MAX) == (0, True)


def test_reset_flag_must_be_true_or_false() -> None:
    assert codec.parse_bool("TRUE", "x") is True
    with pytest.raises(CodecError, match="true or false"):
        codec.parse_bool("yes", codec.H_RESET)
    with pytest.raises(CodecError, match="missing"):
        codec.parse_bool(None, codec.H_RESET)


def _voting_headers() -> dict[str, str]:
    return dict(codec.encode(codec.Voting("n1", 3, False, Update("u", "k", 1))).headers)


@pytest.mark.parametrize("drop,match", [
    (codec.H_NODE, "missing DRiP-Node-ID"),
    (codec.H_COUNTER, "missing DRiP-Node-Counter"),
    (codec.H_RESET, "DRiP-Node-Counter-reset"),
])
def test_voting_without_a_required_header_is_rejected(drop: str, match: str) -> None:
    h = _voting_headers()
    del h[drop]
    with pytest.raises(CodecError, match=match):
        codec.decode("POST", "/voting", h, b'{"id":"u","key":"k","value":1}')


@pytest.mark.parametrize("body,match", [
    (b"{not json", "not valid JSON"),
    (b"[1,2]", "expected a JSON object"),
    (b'{"id":"u","value":1}', "body.key"),
    (b'{"id":"u","key":"k"}', "body.value"),
    (b'{"id":"","key":"k","value":1}', "body.id"),
])
def test_malformed_bodies_are_rejected(body: bytes, match: str) -> None:
    with pytest.raises(CodecError, match=match):
        codec.decode("POST", "/voting", _voting_headers(), body)


def test_a_missing_transaction_type_means_update_as_in_the_spec_examples() -> None:
    """Sections 4.5.1.1 and 4.5.2.1 send /voting and /commit without DRiP-Transaction-Type."""
    h = _voting_headers()
    del h[codec.H_TTYPE]
    got = codec.decode("POST", "/voting", h, b'{"id":"u","key":"k","value":1}')
    assert isinstance(got, codec.Voting) and got.update == Update("u", "k", 1)
    c = codec.decode("POST", "/commit", h, b'{"id":"u","key":"k","value":1,"version":2}')
    assert isinstance(c, codec.Commit) and c.version == 2
    h[codec.H_TTYPE] = "bulk"
    with pytest.raises(CodecError, match="must be update or sync"):
        codec.decode("POST", "/voting", h, b'{"id":"u","key":"k","value":1}')


@pytest.mark.parametrize("path", ["/voting/peernode/nodeA/response/yes",
                                  "/node/nodeA/response/yes"])
def test_a_vote_response_may_have_no_body_and_the_spec_example_path(path: str) -> None:
    """Section 4.5.1.2: the heading's path and the example's path, with no body at all."""
    got = codec.decode("POST", path, {codec.H_NODE: "nodeA"}, b"")
    assert got == codec.VoteResponse("nodeA", True, None, None, None)
    assert codec.decode("POST", path.replace("yes", "no"), {codec.H_NODE: "nodeA"}, b"").yes \
        is False
    bare = codec.encode(got)
    assert bare.body is None and codec.decode(bare.method, bare.path, bare.headers, b"") == got
    with pytest.raises(CodecError, match="yes or no"):
        codec.decode("POST", "/node/nodeA/response/maybe", {codec.H_NODE: "nodeA"}, b"")
    with pytest.raises(CodecError, match="path names node"):
        codec.decode("POST", "/node/nodeB/response/yes", {codec.H_NODE: "nodeA"}, b"")


def test_sync_needs_the_sync_complete_header() -> None:
    req = codec.encode(codec.SyncBatch("n1", 1, False, True, "s", ()))
    h = dict(req.headers)
    del h[codec.H_SYNC_COMPLETE]
    with pytest.raises(CodecError, match="DRiP-Sync-Complete"):
        codec.decode("POST", "/commit", h, req.body_bytes())


def test_path_node_must_match_the_header() -> None:
    with pytest.raises(CodecError, match="path names node"):
        codec.decode("POST", "/node/n2/active", {codec.H_NODE: "n1"}, b"")


def test_unknown_endpoint_is_404() -> None:
    with pytest.raises(CodecError) as e:
        codec.decode("POST", "/nope", {codec.H_NODE: "n1"}, b"")
    assert e.value.status == 404


@pytest.mark.parametrize("body,match", [
    (b"[]", "expected a JSON object"),
    (b'{"id":"u"}', "non-empty strings id and key"),
    (b'{"id":"","key":"k"}', "non-empty strings id and key"),
])
def test_malformed_aborts_are_rejected(body: bytes, match: str) -> None:
    h = dict(codec.encode(codec.Abort("n1", 1, False, "u", "k")).headers)
    with pytest.raises(CodecError, match=match):
        codec.decode("POST", "/abort", h, body)


@pytest.mark.parametrize("raw", ["-1", "1.5", "", " 5", "1000000000"])
def test_a_bad_vote_budget_is_rejected(raw: str) -> None:
    h = _voting_headers()
    h[codec.H_BUDGET] = raw
    with pytest.raises(CodecError, match="Budget"):
        codec.decode("POST", "/voting", h, b'{"id":"u","key":"k","value":1}')
