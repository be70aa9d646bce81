"""The DRiP wire format: header rules of spec 4.3, round trips, malformed input."""

from __future__ import annotations

import dataclasses
import json

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
    if getattr(msg, "reset", False):  # a reset comes only with the wrap-around to counter 0
        msg = dataclasses.replace(msg, counter=0)  # type: ignore[type-var]
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


# ---- bounded numbers and sizes (issue 26): each refused with a 400 and a reason

def _commit(version: int) -> bytes:
    return b'{"id":"u","key":"k","value":1,"version":%d}' % version


_UPDATE_H = {codec.H_NODE: "n1", codec.H_COUNTER: "7", codec.H_RESET: "false"}


@pytest.mark.parametrize(("headers", "body", "reason"), [
    (_UPDATE_H, _commit(2**63 - 1), "exceeds the maximum"),
    (_UPDATE_H, _commit(2**64), "exceeds the maximum"),
    ({**_UPDATE_H, codec.H_RESET: "true"}, _commit(1), "wrap-around"),
    (_UPDATE_H, b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    (_UPDATE_H, b'{"id":"u","key":"k","value":' + b"[" * 33 + b"]" * 33 + b',"version":1}',
     "nested deeper"),
    (_UPDATE_H, b'{"id":"u","key":"\\ud800","value":1,"version":1}', "lone surrogate"),
    (_UPDATE_H, b'{"id":"u","key":"k","value":"%s","version":1}' % (b"x" * 2**20),
     "maximum value size"),
    # not JSON (RFC 8259); the fast encoder would write them as null (session 44)
    (_UPDATE_H, b'{"id":"u","key":"k","value":NaN,"version":1}', "NaN is not JSON"),
    (_UPDATE_H, b'{"id":"u","key":"k","value":[-Infinity],"version":1}', "not JSON"),
    (_UPDATE_H, b'{"id":"u","key":"k","value":1e400,"version":1}', "out of range"),
])
def test_commit_refuses_what_cannot_be_stored(headers: dict[str, str], body: bytes,
                                              reason: str) -> None:
    with pytest.raises(CodecError, match=reason) as e:
        codec.decode("POST", "/commit", headers, body)
    assert e.value.status == 400


def test_the_largest_version_and_value_still_decode() -> None:
    msg = codec.decode("POST", "/commit", _UPDATE_H, _commit(codec.MAX_VERSION))
    assert isinstance(msg, codec.Commit) and msg.version == 2**63 - 2
    big = b'{"id":"u","key":"k","value":"%s","version":1}' % (b"x" * (2**20 - 2))
    assert isinstance(codec.decode("POST", "/commit", _UPDATE_H, big), codec.Commit)
    assert codec.decode("POST", "/commit", {**_UPDATE_H, codec.H_COUNTER: "0",
                                            codec.H_RESET: "true"}, _commit(1)).reset


@pytest.mark.parametrize(("budget", "reason"), [("\u00b2", "ASCII"), ("\u0661\u0662", "ASCII"),
                                                ("2001", "vote timeout"), ("1234567890", "ASCII")])
def test_vote_budget_is_ascii_and_at_most_the_vote_timeout(budget: str, reason: str) -> None:
    h = {**_UPDATE_H, codec.H_BUDGET: budget}
    with pytest.raises(CodecError, match=reason):
        codec.decode("POST", "/voting", h, b'{"id":"u","key":"k","value":1}',
                     limits=codec.Limits(max_budget_ms=2000))
    ok = codec.decode("POST", "/voting", {**_UPDATE_H, codec.H_BUDGET: "2000"},
                      b'{"id":"u","key":"k","value":1}', limits=codec.Limits(max_budget_ms=2000))
    assert isinstance(ok, codec.Voting) and ok.budget_ms == 2000


def test_heartbeat_member_list_is_bounded() -> None:
    body = json.dumps({"members": [f"g{i}" for i in range(codec.MAX_MEMBERS + 1)]}).encode()
    with pytest.raises(CodecError, match="more than the maximum"):
        codec.decode("POST", "/heartbeat/node/n1", {codec.H_NODE: "n1"}, body)


def test_a_configured_value_size_applies() -> None:
    with pytest.raises(CodecError, match="max_value_bytes"):
        Update.from_json({"id": "u", "key": "k", "value": "x" * 100}, codec.Limits(64))


@pytest.mark.parametrize("raw", [
    b'{"k":"\\ud800"}',  # an escape
    b'{"k":"\xed\xa0\x80"}',  # a UTF-8-encoded surrogate, which json takes (surrogatepass)
    '{"k":"\ud800"}'.encode("utf-16-le", "surrogatepass"),  # UTF-16, no BOM
    '{"k":"\ud800"}'.encode("utf-16", "surrogatepass"),  # UTF-16 with a BOM
])
def test_every_way_to_a_lone_surrogate_is_caught_despite_the_fast_path(raw: bytes) -> None:
    """decode_json skips the string walk only when no string can hold a surrogate."""
    with pytest.raises(codec.CodecError, match="lone surrogate"):
        codec.decode_json(raw)


def test_the_fast_path_still_checks_depth_and_takes_plain_bodies() -> None:
    deep = b'{"a":' * 40 + b"1" + b"}" * 40
    with pytest.raises(codec.CodecError, match="nested deeper"):
        codec.decode_json(deep)
    ok = {"items": [{"k": "\ud7ff \u00e9", "v": [1, {"x": "y"}]}] * 50}
    assert codec.decode_json(json.dumps(ok, ensure_ascii=False).encode()) == ok


def test_only_the_planted_mode_raises_the_version_bound() -> None:
    """`no-version-bound` (the server's Limits) takes 2^63-1; the default refuses it, and
    2^64 (SQLite cannot store it) stays refused either way."""
    unbound = codec.Limits(max_version=2**63 - 1)
    msg = codec.decode("POST", "/commit", _UPDATE_H, _commit(2**63 - 1), limits=unbound)
    assert isinstance(msg, codec.Commit) and msg.version == 2**63 - 1
    with pytest.raises(CodecError, match="exceeds the maximum"):
        codec.decode("POST", "/commit", _UPDATE_H, _commit(2**63 - 1))
    with pytest.raises(CodecError, match="exceeds the maximum"):
        codec.decode("POST", "/commit", _UPDATE_H, _commit(2**64), limits=unbound)


deep_values = st.recursive(st.integers(0, 9) | st.text(alphabet="ab", max_size=2),
                           lambda c: st.lists(c, max_size=2) | st.dictionaries(
                               st.text(alphabet="xy", max_size=2), c, max_size=2),
                           max_leaves=60)


def _nest(n: int) -> object:
    v: object = 1
    for i in range(n):
        v = [v] if i % 2 else {"k": v}
    return v


def _refused(d: object, strings: bool) -> bool:
    try:
        codec._check_tree(d, strings, True)
    except CodecError:
        return True
    return False


@given(st.one_of(deep_values, st.integers(25, 40).map(_nest),
                 st.tuples(st.integers(28, 36), deep_values).map(lambda t: [_nest(t[0]), t[1]])))
def test_the_depth_only_check_refuses_exactly_what_the_full_walk_does(d: object) -> None:
    """`_check_tree`'s depth-only pass (a body with no possible surrogate) and its full walk
    agree on every value, at the MAX_DEPTH boundary too."""
    assert _refused(d, False) == _refused(d, True)


def test_the_depth_bound_is_max_depth_levels_of_containers() -> None:
    for strings in (False, True):
        assert not _refused(_nest(codec.MAX_DEPTH), strings)
        assert _refused(_nest(codec.MAX_DEPTH + 1), strings)
        assert _refused([1, {"a": [2, _nest(codec.MAX_DEPTH)]}], strings)


def test_a_node_id_that_is_not_a_string_is_a_codec_error() -> None:
    """A body's ``initiator`` may be any JSON: a list or an object is refused as what it is
    (before session 52 the regex raised TypeError, which the gate turned into a 400 as a
    decoder bug)."""
    for bad in (None, "", "n 1", "x" * 65, ["n1"], {"n1": 1}, 1):
        with pytest.raises(CodecError):
            codec.parse_node_id(bad)  # type: ignore[arg-type]
    body = b'{"id": "u", "initiator": ["n1"], "counter": 1}'
    with pytest.raises(CodecError, match="body.initiator"):
        codec.decode("POST", "/voting/peernode/n2/response/yes", {"DRiP-Node-ID": "n2"}, body)
