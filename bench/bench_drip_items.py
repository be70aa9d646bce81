"""CPU per batch item of DRiP's per-item path, in one process, load-independent-ish.

What it runs, over a fixed set of pre-built batches (the same ones every run, no clock or
randomness in what is built): the **sender** side of a batch (initiator group tokens for
the flooded messages it starts, one statement token for its yes votes, the batch encoded
once and its own token over the bytes: what `DripNode._send_batches` and
`_request_batch` do, by the same codec and auth calls) and the **receiver** side (the
batch's bytes through `Gate.body`: parse, decode, batch token checked and bound, then
`Gate.item` on every item: each flooded item's initiator token, each relayed yes's
statements). Each group token reaches the receiver over two paths, so one arrival checks
its signature and the other hits the verified-token cache, about the split of a 32-client
`bench_drip.py` run (5.9 signature checks for 22 token verifications per update). Also
printed: the receiver's share spent on the batch as a whole (head, parse, decode, the batch's
own token) and `codec.decode_json` of one batch body alone.

Figures are ``time.process_time`` per batch and per item, best of ``--rounds``; compare
runs of two checkouts on the same machine (`--json` for a machine-readable line). Not a
substitute for `bench_drip.py`: aiohttp, TLS, the core and SQLite are not in it.

``python bench/bench_drip_items.py [--jwt-mode shared|public] [--batches N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from multidict import CIMultiDict  # noqa: E402

from nodes.drip import auth, codec  # noqa: E402
from nodes.drip.admit import Gate, Refusal  # noqa: E402
from nodes.drip.auth import Signer, Verifier  # noqa: E402
from nodes.drip.codec import Commit, Update, VoteResponse, Voting  # noqa: E402

NODES = ("n1", "n2", "n3", "n4", "n5")
NOW = 1_000_000.0
SECRET = b"bench-secret-0123456789abcdef0123456789abcdef"


def _keys() -> dict[str, tuple[bytes, bytes]]:
    out = {}
    for n in NODES:
        # deterministic keys: the same tokens' sizes every run (the bench times, not tests)
        k = ec.derive_private_key(1000 + NODES.index(n), ec.SECP256R1())
        out[n] = (k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()),
                  k.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    return out


def _signers(mode: str, keys: dict[str, tuple[bytes, bytes]]) -> dict[str, Signer]:
    if mode == "shared":
        auth._use_checked_hmac()
        return {n: Signer(n, mode, SECRET) for n in NODES}
    return {n: Signer(n, mode, keys[n][0]) for n in NODES}


def _verifier(mode: str, keys: dict[str, tuple[bytes, bytes]]) -> Verifier:
    if mode == "shared":
        return Verifier(mode, shared_key=SECRET)
    return Verifier(mode, public_keys={n: pub for n, (_, pub) in keys.items()})


def _value(i: int) -> dict[str, Any]:
    return {"seq": i, "client": f"c{i % 32}", "payload": "x" * 24}


def build(n_batches: int) -> list[list[codec.Message]]:
    """The batches n2 sends n1: per batch three votings and three commits of other
    initiators (each initiator's six flooded messages of one turn under one group token),
    and two yes answers of n2's subtree, n3's yes relayed with its statement."""
    out = []
    for b in range(n_batches):
        init = NODES[2 + b % 3]  # n3, n4, n5 initiate; n2 relays to n1
        base = b * 3
        msgs: list[codec.Message] = []
        for j in range(3):
            up = Update(f"u{base + j}", f"k{base + j}", _value(base + j))
            msgs.append(Voting(init, 10 + base + j, False, up, budget_ms=1800))
        for j in range(3):
            up = Update(f"c{base + j}", f"k{base + j}", _value(base + j))
            msgs.append(Commit(init, 10_000 + base + j, False, up, 7 + j))
        for j in range(2):
            msgs.append(VoteResponse("n2", True, "n1", 20 + base + j, f"y{base + j}",
                                     ("n2", "n3"), (), 3, False))
        out.append(msgs)
    return out


class Sender:
    """What the sending node does per batch, by the same calls as `DripNode`."""

    def __init__(self, signers: dict[str, Signer]) -> None:
        self.s = signers

    def flooded_tokens(self, batch: list[codec.Message]) -> list[codec.Message]:
        """The initiator's group token over its flooded messages of the turn (made once per
        group by the initiator in a real mesh; here once per batch, since each batch is
        another initiator's turn)."""
        fl = [m for m in batch if isinstance(m, codec.FLOODED)]
        init = fl[0].initiator  # type: ignore[union-attr]
        tok = "Bearer " + self.s[init].group_token(NOW, [codec.signed_digest(m) for m in fl])
        return [m if not isinstance(m, codec.FLOODED) else _with(m, auth=tok) for m in batch]

    def statements(self, batch: list[codec.Message]) -> list[codec.Message]:
        """n2's own yes statements as one group token, n3's as a relayed one."""
        votes = [m for m in batch if isinstance(m, VoteResponse)]
        digs = [codec.vote_digest(m.uid, m.initiator, m.counter) for m in votes]  # type: ignore[arg-type]
        mine = self.s["n2"].group_token(NOW, digs)
        n3 = self.s["n3"].group_token(NOW, digs)
        return [m if not isinstance(m, VoteResponse) else
                _with(m, statements=(("n2", mine), ("n3", n3))) for m in batch]

    def send(self, items: list[codec.Message]) -> tuple[CIMultiDict[str], bytes]:
        req = codec.encode(codec.Batch("n2", tuple(items)))
        data = req.body_bytes()
        h = CIMultiDict({**req.headers, "Content-Type": "application/json",
                         codec.H_AUTH: self.s["n2"].header(NOW, codec.batch_digest("n2", data),
                                                           once=True)})
        return h, data


def _with(m: Any, **kw: Any) -> Any:
    from dataclasses import replace
    return replace(m, **kw)


def receiver(mode: str, keys: dict[str, tuple[bytes, bytes]]) -> Gate:
    return Gate("n1", _verifier(mode, keys), codec.Limits(), lambda: set(NODES[1:]),
                lambda: 1, lambda n: None, lambda reason, **d: None)


def run(mode: str, n_batches: int) -> dict[str, float]:
    keys = _keys()
    signers = _signers(mode, keys)
    batches = build(n_batches)
    snd = Sender(signers)
    # sender side: tokens and encoding (the flooded tokens are made once per batch)
    t0 = time.process_time()
    prepared = [snd.statements(snd.flooded_tokens(b)) for b in batches]
    wire = [snd.send(items) for items in prepared]
    sender_s = time.process_time() - t0
    # the same flooded items arrive over a second path: another batch, by n3... kept as n2's
    # here (the gate checks the hop's own items the same way), re-encoded with a new token
    again = [snd.send(items) for items in prepared]
    gate = receiver(mode, keys)
    n_items = 0
    body_s = 0.0
    t0 = time.process_time()
    for h, data in [*wire, *again]:
        t1 = time.process_time()
        head = gate.head("n2", None, h, NOW, "POST", "/batch")
        assert not isinstance(head, Refusal), head
        msg = gate.body(head, "POST", "/batch", h, data, NOW)
        assert isinstance(msg, codec.Batch), msg
        body_s += time.process_time() - t1
        for m in msg.items:
            got = gate.item("n2", m, NOW)
            assert not isinstance(got, Refusal), got
            if isinstance(got, VoteResponse):
                assert got.voters == ("n2", "n3"), got
            n_items += 1
    receiver_s = time.process_time() - t0
    t0 = time.process_time()
    for _, data in wire:
        codec.decode_json(data)
    decode_json_s = time.process_time() - t0
    n_sent = sum(len(b) for b in batches)
    return {"sender_us_per_item": 1e6 * sender_s / n_sent,
            "receiver_us_per_item": 1e6 * receiver_s / n_items,
            # of which the batch as a whole (Gate.head and Gate.body: parse, decode, its token)
            "receiver_batch_us_per_item": 1e6 * body_s / n_items,
            # the parse and checks of the body's JSON alone (codec.decode_json)
            "decode_json_us_per_batch": 1e6 * decode_json_s / len(wire),
            "items_per_batch": n_sent / len(batches),
            "batch_bytes": sum(len(d) for _, d in wire) / len(wire)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jwt-mode", choices=("shared", "public"), default="shared")
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    runs = [run(a.jwt_mode, a.batches) for _ in range(a.rounds)]
    best = {k: min(r[k] for r in runs) for k in runs[0]}
    best["both_us_per_item"] = best["sender_us_per_item"] + best["receiver_us_per_item"]
    if a.json:
        print(json.dumps({"jwt_mode": a.jwt_mode, **{k: round(v, 1) for k, v in best.items()}}))
        return
    for k, v in best.items():
        print(f"{k:>22}: {v:8.1f}")


if __name__ == "__main__":
    main()
