"""POST /batch (ours): several vote-path messages in one request, each decoded as if alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.drip import codec
from nodes.drip.codec import (
    Abort,
    Batch,
    CodecError,
    Commit,
    Heartbeat,
    Update,
    VoteResponse,
    Voting,
)


def _roundtrip(msg: codec.Message) -> codec.Message:
    req = codec.encode(msg)
    return codec.decode(req.method, req.path, {codec.H_NODE: msg.sender}, req.body_bytes())


def test_a_batch_round_trips_with_each_item_and_its_initiator_token() -> None:
    up = Update("u1", "k1", {"v": 1}, None)
    items = (Voting("n1", 7, False, up, auth="tok-v", budget_ms=900),
             Commit("n2", 3, False, Update("u2", "k2", 2, None), 5, auth="tok-c"),
             Abort("n1", 8, False, "u3", "k3", auth="tok-a"),
             VoteResponse("n1", True, "n4", 9, "u4", ("n1",), (), 3, False, (("n1", "s"),)))
    got = _roundtrip(Batch("n1", items))
    assert isinstance(got, Batch) and got.items == items
    assert [getattr(m, "auth", None) for m in got.items] == ["tok-v", "tok-c", "tok-a", None]
    assert got.items[0].budget_ms == 900


def test_the_batch_digest_binds_every_item() -> None:
    a = Batch("n1", (Abort("n1", 1, False, "u", "k", auth="t"),
                     Abort("n1", 2, False, "v", "k", auth="t")))
    b = Batch("n1", (a.items[0], Abort("n1", 2, False, "v", "other", auth="t")))
    assert codec.signed_digest(a) != codec.signed_digest(b)


@pytest.mark.parametrize("body, why", [
    (b'{"items": []}', "expected {items"),
    (b'{"items": [1]}', "batch item 0"),
    (b'{"items": [{"method": "POST", "path": "/batch", "headers": {"DRiP-Node-ID": "n1"},'
     b' "body": {"items": []}}]}', "cannot be batched"),
    (b'{"items": [{"method": "POST", "path": "/abort", "headers": {"DRiP-Node-ID": "n1",'
     b' "DRiP-Node-Counter": "1"}, "body": {"id": "u"}}]}', "batch item 0: abort body"),
])
def test_bad_batches_are_refused_with_the_item_named(body: bytes, why: str) -> None:
    with pytest.raises(CodecError, match=why):
        codec.decode("POST", "/batch", {codec.H_NODE: "n1"}, body)


def test_only_vote_path_messages_batch_and_size_is_capped() -> None:
    hb = codec.encode(Heartbeat("n1", "active"))
    one = {"method": hb.method, "path": hb.path, "headers": hb.headers, "body": hb.body}
    with pytest.raises(CodecError, match="Heartbeat cannot be batched"):
        codec.decode("POST", "/batch", {codec.H_NODE: "n1"},
                     codec.HttpRequest("POST", "/batch", {}, {"items": [one]}).body_bytes())
    many = [{"method": "POST", "path": "/abort", "headers": {}, "body": {}}] * (codec.MAX_BATCH + 1)
    with pytest.raises(CodecError, match="at most"):
        codec.decode("POST", "/batch", {codec.H_NODE: "n1"},
                     codec.HttpRequest("POST", "/batch", {}, {"items": many}).body_bytes())


@given(st.lists(st.sampled_from(["", "batch", "voting", " batch", "batch ", "b", ".."]),
                max_size=5).map("/".join))
def test_a_nested_batch_is_found_as_decode_routes_it(path: str) -> None:
    """`_is_batch_path` is decode's routing test for /batch (its non-empty segments are
    exactly ["batch"]), for any slashes around or between segments."""
    assert codec._is_batch_path(path) == ([p for p in path.split("/") if p] == ["batch"])


@given(st.dictionaries(st.sampled_from(["DRiP-Node-ID", "drip-node-id", "X", "x"]),
                       st.sampled_from(["n1", "n2", 3, None]), max_size=4))
def test_item_headers_are_checked_and_lowered_as_before(headers: dict) -> None:
    it = {"method": "POST", "path": "/voting", "headers": headers}
    ok = all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    got = codec._item_headers(it)
    assert (got is None) == (not ok)
    if ok:
        assert dict(got) == {k.lower(): v for k, v in headers.items()}
