"""How the harness runs DRiP: the ProtocolDef, the ``registry`` workload, per-run key material.

``node_extra`` writes the run's TLS CA, each node's certificate and the JWT keys under
``<run dir>/tls/`` (once per run) and returns the extra config keys ``tls``, ``jwt`` and
``mesh_members``. ``spec.options["jwt_mode"]`` picks ``public`` (default: each node signs with
its own key, so no node can sign as another) or ``shared`` (one HMAC secret for the mesh).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from faults.hostile import HostileDef
from harness import generators as g
from harness.spec import DefiniteFailure, NodeAddr, ProtocolDef, TestSpec, Workload
from nodes.drip import hostile
from nodes.drip.client import DripClient, DripRefused, DripUnsure
from nodes.drip.core import BUGS
from nodes.drip.material import ensure_ca, ensure_jwt_keypair, ensure_shared_secret, issue_node_cert
from nodes.drip.topology import TOPOLOGIES


def node_extra(spec: TestSpec, index: int, run_path: Path) -> dict[str, Any]:
    tls_dir = Path(run_path) / "tls"
    ids = spec.node_ids
    me = ids[index]
    files = issue_node_cert(tls_dir, me, ensure_ca(tls_dir))
    # ``late_unknown``: late nodes are known to nobody until the "add-member" op adds them
    # (harness/cluster.py); each starts with ``join`` and knows every node
    late = set(spec.options.get("late_nodes", [])) if spec.options.get("late_unknown") \
        else set()
    if me not in late:
        ids = [n for n in ids if n not in late]
    mode = str(spec.options.get("jwt_mode", "public"))
    if mode == "shared":
        jwt_cfg: dict[str, Any] = {"mode": "shared",
                                   "shared_key_file": str(ensure_shared_secret(tls_dir))}
    elif mode == "public":
        pairs = {n: ensure_jwt_keypair(tls_dir, n) for n in ids}
        jwt_cfg = {"mode": "public", "private_key_file": str(pairs[me][0]),
                   "public_keys": {n: str(pub) for n, (_, pub) in pairs.items()}}
    else:
        raise ValueError(f"options.jwt_mode must be 'shared' or 'public', got {mode!r}")
    out = {"tls": {"ca": str(files.ca), "cert": str(files.cert), "key": str(files.key)},
           "jwt": jwt_cfg, "mesh_members": list(ids)}
    return {**out, "options": {"join": True}} if me in late else out


def member_entry(config: dict[str, Any], peer: str,
                 peer_for: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``POST /admin/members`` address entry of the node whose ``config`` this is, as its
    operator gives it: where members dial it (``peer_for``: each member through its own
    link, so faults on links into it apply as on any other), its certificate and (public
    keys) its JWT key."""
    entry: dict[str, Any] = {"peer": peer, "cert": Path(config["tls"]["cert"]).read_text()}
    if peer_for:
        entry["peer_for"] = dict(peer_for)
    if config["jwt"]["mode"] == "public":
        entry["jwt_key"] = Path(config["jwt"]["public_keys"][config["id"]]).read_text()
    return entry


class _Client:
    """One harness process's client (harness.spec.Client) over the node's client library:
    ``update`` value ``[key, value, uid]``: ok when committed, fail when the node refused it
    (certainly never commits), info when it answered without knowing; ``read`` value
    ``[key, null]``: ok ``[key, value, version]``. A timeout or lost connection is info."""

    def __init__(self, addr: NodeAddr | None, process: int) -> None:
        if addr is None:
            raise ValueError("the drip workload needs a cluster: no node address given")
        self.node: str | None = addr.node
        self.drip = DripClient(addr.host, addr.port)

    async def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        f, value = op["f"], op.get("value")
        try:
            if f == "update":
                key, new, uid = value
                await self.drip.update(key, new, uid)
                return {"type": "ok", "value": value}
            if f == "read":
                v, version = await self.drip.read(value[0])
                return {"type": "ok", "value": [value[0], v, version]}
        except DripRefused as e:
            raise DefiniteFailure(str(e)) from e
        except DripUnsure as e:
            return {"type": "info", "value": value, "error": str(e)}
        raise DefiniteFailure(f"unknown op {f!r}: the drip client does update and read")

    async def close(self) -> None:
        await self.drip.close()


def _client(addr: NodeAddr | None, process: int) -> _Client:
    return _Client(addr, process)


def update_reads(keys: int = 4, read_ratio: float = 0.2) -> g.Generator:
    """Updates of a few hot keys (so votes conflict) with some local reads."""
    seq = itertools.count()

    def one(ctx: g.Context) -> dict[str, Any]:
        key = f"k{ctx.rng.randrange(keys)}"
        if ctx.rng.random() < read_ratio:
            return {"f": "read", "value": [key, None]}
        n = next(seq)
        return {"f": "update", "value": [key, n, f"u{n}-p{ctx.process}"]}

    return g.Fn(one)


def _generator(spec: TestSpec) -> g.Generator:
    keys = int(spec.options.get("keys", 8))
    rate = float(spec.options.get("rate", 10.0))
    return g.rate(rate, update_reads(keys, float(spec.options.get("read_ratio", 0.2))))


def _final(spec: TestSpec) -> g.Generator:
    keys = int(spec.options.get("keys", 8))
    done: set[int | str] = set()

    def reads(ctx: g.Context) -> Any:
        if ctx.thread in done:
            return None
        done.add(ctx.thread)
        return g.Seq([{"f": "read", "value": [f"k{i}", None]} for i in range(keys)])

    class PerThread:
        def __init__(self) -> None:
            self.cur: dict[int | str, g.Generator] = {}

        def op(self, ctx: g.Context) -> Any:
            gen = self.cur.get(ctx.thread)
            if gen is None:
                if ctx.thread in done:
                    return None
                gen = reads(ctx)
                self.cur[ctx.thread] = gen
            return gen.op(ctx)

    return PerThread()


def make_workload() -> Workload:
    from checkers import liveness, twopc

    return Workload(client=_client, generator=_generator,
                    checkers={"2pc": twopc.check, liveness.NAME: liveness.check},
                    final_generator=_final)


def settled(states: dict[str, dict[str, Any] | None]) -> bool:
    """Every started node active and hearing every peer it has: before that, an update
    reaches only the peers already heard from and can only abort, after holding its key's
    locks on them for a vote timeout."""
    def hears_all(st: Any) -> bool:  # (a node of another implementation may say less)
        peers = st.get("peers") if isinstance(st, dict) else None
        return (isinstance(peers, dict) and st.get("state") == "active"
                and all(isinstance(p, dict) and p.get("up") for p in peers.values()))

    return all(hears_all(st) for st in states.values())


PROTOCOL = ProtocolDef(
    name="drip",
    module="nodes.drip",
    workloads={"registry": make_workload},
    bugs=BUGS,
    default_workload="registry",
    node_extra=node_extra,
    leader_of=None,
    settled=settled,
    topologies={n: t for n, t in TOPOLOGIES.items() if n != "full"},
    # TLS and a signed token per request: DRiP sends its attacks itself (nodes/drip/hostile.py)
    hostile=HostileDef(hostile.no_messages, hostile.refusals, transport="tcp",
                       driver=hostile.driver),
    member_entry=member_entry,
)
