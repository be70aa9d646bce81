"""A running cluster: ports, proxied links, node configs, processes, admin API, faults.

Every node -> node link and every client -> node link goes through its own proxy
(Toxiproxy for TCP protocols), so the nemesis can cut or slow any one of them. The admin API
is the harness's control plane and is never proxied.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
from pathlib import Path
from typing import Any

import aiohttp

from harness.backends import NodeSpec, get_backend
from harness.member_change import ATTEMPT_TIMEOUT_S, Attempt, MemberChange, in_effect, outcome_of
from harness.node_command import node_argv
from harness.spec import NodeAddr, TestSpec
from harness.store import RunDir, write_json
from osutil.ports import free_port, release

log = logging.getLogger("harness.cluster")
#: the longest a start waits for the nodes to find each other (`Cluster.wait_settled`)
SETTLE_S = 10.0

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


class ClusterError(RuntimeError):
    pass


def link_name(src: str, dst: str) -> str:
    return f"{src}->{dst}"


class Cluster:
    def __init__(self, spec: TestSpec, run_dir: RunDir, *, toxiproxy_url: str | None = None,
                 start_timeout_s: float = 30.0) -> None:
        assert spec.protocol is not None
        self.spec = spec
        self.proto = spec.protocol
        self.run_dir = run_dir
        self.toxiproxy_url = toxiproxy_url
        self.start_timeout_s = start_timeout_s
        self.nodes: list[str] = spec.node_ids
        #: nodes started only by a "join" nemesis op (membership changes during a test)
        self.late: set[str] = set(spec.options.get("late_nodes", []))
        self.backend = get_backend(spec.backend)
        self.ports: dict[str, dict[str, int]] = {}
        self.links: dict[str, str] = {}  # link name -> listen "host:port"
        self.node_specs: dict[str, NodeSpec] = {}
        self.rng = random.Random(f"{spec.seed}:cluster")
        self._session: aiohttp.ClientSession | None = None
        self._faults: Any = None  # faults.nemesis.Nemesis
        self._toxiproxy: Any = None  # faults.toxiproxy.ToxiproxyServer
        self._links: Any = None  # faults.links.TcpLinks or faults.udp_relay.UdpLinks
        self._relay: Any = None
        self._collected = False  # faults.udp_relay.UdpRelayProcess (UDP protocols)
        self._faked: list[int] = []  # pids of node processes started under libfaketime
        self._hostile: Any = None  # faults.hostile.HostileSender (protocols that declare one)
        #: per node, hostile messages sent and refusals counted (collect(); None: none sent)
        self.hostile_report: dict[str, Any] | None = None
        #: membership changes asked by the "add-member" and "decommission" ops, by (op, node)
        self.changes: dict[tuple[str, str], MemberChange] = {}
        self._t0 = 0.0  # loop time at the end of start(): the run's time limit counts from it

    # ---- set-up -------------------------------------------------------------------------
    async def start(self) -> None:
        if self._rates() and self.backend.name != "local":
            raise ClusterError(f"test option clock_rate (a clock-rate fault) needs the local "
                               f"backend, not {self.backend.name}: it preloads libfaketime into "
                               "each node process and rewrites its rate file; use --backend local")
        udp = socket.SOCK_DGRAM if self.proto.transport == "udp" else socket.SOCK_STREAM
        for n in self.nodes:
            self.ports[n] = {p: free_port(kind=udp if p == self.proto.peer_port else socket.SOCK_STREAM)
                             for p in self.proto.ports}
        await self._start_links()
        for i, n in enumerate(self.nodes):
            self.node_specs[n] = self._write_config(n, i)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3))
        first = [n for n in self.nodes if n not in self.late]
        await asyncio.gather(*(self._start_node(n) for n in first))
        await asyncio.gather(*(self.wait_healthy(n) for n in first))
        await self.wait_settled(first)
        from faults.nemesis import Nemesis

        if self.proto.hostile is not None:
            from faults.hostile import HostileSender, Target

            # straight to each node's own peer port: an attacker does not go through our links;
            # over UDP, messages forged from a member go into the relay's link from it
            routes: dict[tuple[str, str], tuple[str, int]] = {}
            if self.proto.transport == "udp":
                from faults.udp_relay import parse_addr

                routes = {(s, d): parse_addr(a) for (s, d), a in self._links.listen.items()
                          if s in self.nodes and d in self.nodes}
            targets = [Target(n, i + 1, HOST, self.ports[n][self.proto.peer_port])
                       for i, n in enumerate(self.nodes)]
            rng = random.Random(f"{self.spec.seed}:hostile")
            driver = self.proto.hostile.driver
            self._hostile = HostileSender(self.proto.hostile, targets, rng, routes) \
                if driver is None else driver(targets, rng, {
                    n: json.loads(self.node_specs[n].config_path.read_text()) for n in self.nodes})
        self._t0 = asyncio.get_running_loop().time()  # the run's clock starts about now
        self._faults = Nemesis(random.Random(f"{self.spec.seed}:faults"), nodes=self,
                               links=self._links, node_names=self.nodes, hostile=self._hostile,
                               topology=None if self.spec.topology is None else self.spec.edges())
        self._faults.unstarted = set(self.late)

    async def _start_links(self) -> None:
        from faults.links import TcpLinks
        from faults.toxiproxy import ToxiproxyServer

        upstream: dict[tuple[str, str], str] = {}
        for a, b in self.spec.edges():
            for src, dst in ((a, b), (b, a)):
                upstream[(src, dst)] = f"{HOST}:{self.ports[dst][self.proto.peer_port]}"
        client_port = self.spec.resolved_workload().client_port or self.proto.client_port
        for dst in self.nodes:
            upstream[("client", dst)] = f"{HOST}:{self.ports[dst][client_port]}"
        if self.proto.transport == "udp":
            from faults.udp_relay import UdpLinks, UdpRelayProcess

            # our own relay process, started from this (main) thread like Toxiproxy
            # link sockets where the nodes reach them (a docker bridge's gateway, say)
            self._relay = UdpRelayProcess(seed=self.rng.randrange(2**31),
                                          link_host=getattr(self.backend, "proxy_host", HOST))
            self._links = await UdpLinks.create(self._relay.client(), upstream)
        else:
            # started from this (main) thread, so PR_SET_PDEATHSIG ties the server to us
            self._toxiproxy = (ToxiproxyServer.attach(self.toxiproxy_url) if self.toxiproxy_url
                               else ToxiproxyServer.from_env())
            client = self._toxiproxy.client(prefix=f"{self.run_dir.path.name}-")
            # proxies listen where the nodes can reach them (a docker bridge's gateway, say)
            self._links = await TcpLinks.create(
                client, upstream, listen_host=getattr(self.backend, "proxy_host", HOST))
        self.links = {link_name(*k): v for k, v in self._links.listen.items()}

    def _write_config(self, n: str, i: int) -> NodeSpec:
        nd = self.run_dir.node_dir(n)
        data = nd / "data"
        # ``late_unbooked``: the others' start-up configs name late nodes (num_id) but give
        # no address (a protocol with dynamic members learns it when they join; the links
        # exist from the start)
        hidden = self.late if self.spec.options.get("late_unbooked") and n not in self.late \
            else set()
        # ``late_unknown``: the others' configs do not name late nodes at all (DRiP: such a
        # node is added at run time with its address, the "add-member" op)
        unknown = self.late if self.spec.options.get("late_unknown") and n not in self.late \
            else set()
        peers = {
            p: {"num_id": j + 1} if p in hidden
            else {"num_id": j + 1, self.proto.peer_port: self.links[link_name(n, p)]}
            for j, p in enumerate(self.nodes) if link_name(n, p) in self.links and p not in unknown
        }
        cfg: dict[str, Any] = {
            "id": n, "num_id": i + 1, "host": HOST, "data_dir": str(data),
            "ports": self.ports[n], "peers": peers, "bugs": self.spec.bugs_of(n),
            "seed": self.rng.randrange(2**31),
            "options": {**self.proto.default_options, **self.spec.options},
        }
        if self.proto.node_extra:
            extra = dict(self.proto.node_extra(self.spec, i, self.run_dir.path))
            cfg["options"].update(extra.pop("options", {}))
            cfg.update(extra)
        path = nd / "config.json"
        write_json(path, cfg)
        if self.spec.node_command is None:
            argv, cwd = ["{python}", "-m", self.proto.module, "--config", str(path)], PROJECT_ROOT
        else:  # the user's implementation, run from where the harness was started
            argv, cwd = node_argv(self.spec.node_command, config=path, node_id=n), Path.cwd()
        return NodeSpec(id=n, argv=argv, config_path=path, data_dir=data,
                        log_path=nd / "log.txt", cwd=cwd, env=self._clock_env(n))

    def _rates(self) -> bool:
        """The run may change a node's clock rate: test option ``clock_rate`` (a sim replay
        with a rate ``skew``) or the ``clock-rate`` fault named in ``--nemesis``."""
        return bool(self.spec.options.get("clock_rate")) or \
            "clock-rate" in self.spec.nemesis_desc.split(",")

    def _clock_env(self, n: str) -> dict[str, str]:
        """`_rates`: node ``n`` starts under libfaketime, so the
        ``clock-rate`` op can change its clocks' rate (faults/clockrate.py); local backend only
        (the library and the rate file must be on the node's own machine)."""
        if not self._rates():
            return {}
        from faults.clockrate import RATE_FILE, ClockRateError, node_env

        try:
            return node_env(self.run_dir.node_dir(n) / RATE_FILE)
        except ClockRateError as e:
            raise ClusterError(str(e)) from None

    def admin_url(self, n: str) -> str:
        return f"http://{HOST}:{self.ports[n]['admin']}"

    async def admin(self, n: str, method: str, path: str, body: Any = None,
                    timeout: float = 3.0) -> Any:
        assert self._session is not None
        async with self._session.request(method, self.admin_url(n) + path, json=body,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            r.raise_for_status()
            return await r.json()

    async def wait_healthy(self, n: str, timeout_s: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_s or self.start_timeout_s)
        while loop.time() < deadline:
            if not self.backend.is_running(n):
                raise ClusterError(f"node {n} exited during start-up; its log says:\n"
                                   + self.log_tail(n))
            with contextlib.suppress(Exception):
                h = await self.admin(n, "GET", "/admin/health", timeout=1.0)
                if h.get("ok"):
                    return
            await asyncio.sleep(0.05)
        raise ClusterError(f"node {n} did not answer /admin/health within "
                           f"{timeout_s or self.start_timeout_s:g}s; log tail:\n" + self.log_tail(n))

    async def wait_settled(self, names: list[str], timeout_s: float = SETTLE_S) -> bool:
        """Until the protocol says the started nodes have found each other
        (`ProtocolDef.settled`), at most ``timeout_s``. Health alone let a DRiP workload start
        while heartbeats were still finding peers: its first updates reached only the peers
        already heard from and held their key's locks for a vote timeout (a hot-key run once
        committed nothing). A mesh that does not settle in time is the run's to show (a bug
        mode, a node's own fault), so the run goes on, with a warning; False then."""
        if self.proto.settled is None:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.proto.settled(await self.states(names)):
            if loop.time() >= deadline:
                log.warning("the nodes had not found each other %gs after answering "
                            "/admin/health; the workload starts anyway", timeout_s)
                return False
            await asyncio.sleep(0.05)
        return True

    def log_tail(self, n: str, lines: int = 20) -> str:
        p = self.node_specs[n].log_path if n in self.node_specs else None
        if p is None or not p.exists():
            return "(no log)"
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])

    # ---- what clients and the runner use -----------------------------------------------
    def client_addr(self, thread: int) -> NodeAddr:
        return self._addr(self.nodes[thread % len(self.nodes)])

    def _addr(self, n: str) -> NodeAddr:
        host, port = self.links[link_name("client", n)].rsplit(":", 1)
        every = {m: self.links[link_name("client", m)] for m in self.nodes}
        return NodeAddr(node=n, host=host, port=int(port), admin_url=self.admin_url(n), all=every,
                        run_dir=str(self.run_dir.path))

    async def nemesis_invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """Faults go to faults/nemesis.py; membership ops ("join": start a late node, "leave":
        its protocol's voluntary leave via ``POST /admin/leave``, "decommission": another
        running node removes it via ``POST /admin/members``, as DRiP offers, "add-member":
        another running node adds it there with its address entry, ``proto.member_entry``)
        are the cluster's own, and so are "last-send" (harness/last_send.py) and Garlic Farm's
        "remove-server" (harness/gf_remove.py)."""
        if op["f"] == "last-send":
            return await self._last_send(op)
        if op["f"] == "remove-server":
            return await self._remove_server(op)
        if op["f"] not in ("join", "leave", "decommission", "add-member"):
            return await self._faults.invoke(op)
        node = (op.get("value") or {}).get("node")
        done: dict[str, Any] = {**op, "type": "info", "value": {"node": node}}
        try:
            if node not in self.node_specs:
                raise ClusterError(f"no node {node!r} in this cluster")
            if op["f"] == "join":
                await self.restart(node)
                self._faults.unstarted.discard(node)
            elif op["f"] in ("decommission", "add-member"):
                return await self._member_change(op["f"], node, done)
            else:
                await self.admin(node, "POST", "/admin/leave", {}, timeout=10.0)
        except Exception as e:
            done["error"] = f"{type(e).__name__}: {e}"
        return done

    async def _last_send(self, op: dict[str, Any]) -> dict[str, Any]:
        """One send at the op's node through the workload's client, held by its ``reach``."""
        from harness.last_send import LAST_SEND_PROCESS, last_send

        v = dict(op.get("value") or {})
        node, reach = str(v.get("node")), [str(n) for n in v.get("reach") or []]
        done: dict[str, Any] = {**op, "type": "info", "value": v}
        unknown = [n for n in [node, *reach] if n not in self.node_specs]
        if unknown:
            done["error"] = f"last-send: no node(s) {unknown} in this cluster"
            return done
        client = self.spec.resolved_workload().client(self._addr(node), LAST_SEND_PROCESS)
        if asyncio.iscoroutine(client):
            client = await client
        try:
            out = await last_send(client, node, reach, f"last:{node}:{self.rng.getrandbits(32):08x}",
                                  self.states)
        finally:
            with contextlib.suppress(Exception):
                await client.close()
        if "error" in out:
            done["error"] = out.pop("error")
        done["value"] = {**v, **out}
        return done

    async def _remove_server(self, op: dict[str, Any]) -> dict[str, Any]:
        """An administrator's RemoveServer for the op's node, straight to the (next) leader."""
        from harness.gf_remove import connections, removal_target, remove_server
        from nodes.garlicfarm.hostile_driver import member

        v = dict(op.get("value") or {})
        node = str(v.get("node"))
        done: dict[str, Any] = {**op, "type": "info", "value": v}
        if self.proto.name != "garlicfarm" or node not in self.node_specs:
            done["error"] = (f"remove-server: a Garlic Farm op, of a node of this cluster "
                             f"({self.proto.name}, {node!r})")
            return done
        up = [n for n in self.nodes if self.backend.is_running(n)]
        configs = {n: json.loads(self.node_specs[n].config_path.read_text()) for n in up}
        conns = await connections(
            {n: (HOST, self.ports[n][self.proto.peer_port]) for n in up},
            {n: member(n, configs[n]) for n in up})
        ids = {n: int(json.loads(self.node_specs[n].config_path.read_text())["num_id"])
               for n in self.nodes}

        def pick(lead: str) -> str:
            return removal_target(node, lead, up, self._faults.partition or frozenset(),
                                  bool(v.get("next_leader")))

        try:
            out = await remove_server(
                conns, ids, pick, next_leader=bool(v.get("next_leader")),
                wait_s=float(v.get("wait_s", 5.0)), fresh=self._fresh_leader,
                hold=self._hold(up) if v.get("hold") else None)
        finally:
            for c in conns.values():
                c.close()
        if "error" in out:
            done["error"] = out.pop("error")
        done["value"] = {**v, **out}
        return done

    def _hold(self, up: list[str]) -> Any:
        """A `gf_remove.Hold` over the nemesis: a leader's links to every running member but
        the one it removes, both ways, cut over the partition in force."""
        from harness.gf_remove import Hold

        async def cut(lead: str, removed: str) -> list[Any]:
            others = [m for m in up if m not in (lead, removed)]
            return await self._faults.hold_cut([(lead, m) for m in others]
                                               + [(m, lead) for m in others])

        async def gone(lead: str, num: int) -> bool:
            s = (await self.states([lead])).get(lead) or {}
            return "servers" in s and int(num) not in s["servers"]

        return Hold(cut, gone, self._faults.release_cut)

    async def _fresh_leader(self, n: str) -> bool:
        """Whether node ``n`` leads a term none of whose entries it has committed yet."""
        from harness.gf_remove import fresh_leader

        return fresh_leader((await self.states([n])).get(n))

    # ---- membership changes, retried as an operator would (harness/member_change.py) ----
    async def _member_change(self, f: str, node: str, done: dict[str, Any]) -> dict[str, Any]:
        """One attempt of the change; ``retry_in_s`` in the answer asks the runner to play the
        op again that much later (a refused or failed change, time left)."""
        if f == "add-member" and self.proto.member_entry is None:
            raise ClusterError(f"{self.proto.name} has no add-member op")
        ch = self.changes.setdefault((f, node), MemberChange(f, node))
        loop = asyncio.get_running_loop()
        if ch.outcome is None:
            ch.record(await self._attempt(ch, loop.time() - self._t0))
        last = ch.attempts[-1]
        wait = ch.retry_in(loop.time() - self._t0, self.spec.time_limit)
        done["value"].update(via=last.via, attempt=last.n, result=last.outcome,
                             outcome=ch.outcome, retry_in_s=wait)
        if last.error is not None:
            done["error"] = f"{last.status or 'no answer'}: {last.error}"
        if wait is not None:
            done["retry_in_s"] = wait
        return done

    def _members_now(self, leaving: str) -> list[str]:
        """Running nodes that are members as far as our changes go, ``leaving`` aside."""
        added = {n for (f, n), c in self.changes.items()
                 if f == "add-member" and c.outcome == "committed"}
        return [n for n in self.nodes if n != leaving and (n not in self.late or n in added)
                and self.backend.is_running(n)]

    async def _attempt(self, ch: MemberChange, at_s: float) -> Attempt:
        n, via = len(ch.attempts) + 1, ch.next_via(self._members_now(ch.node))
        if via is None:
            return Attempt(n, None, at_s, "error", None, "no running member to ask")
        if ch.attempts and any(in_effect(ch.f, ch.node, (s or {}).get("members"))
                               for m, s in (await self.states()).items()
                               if m != ch.node and m in self._members_now(ch.node)):
            return Attempt(n, via, at_s, "in-effect")  # an earlier unanswered try committed
        body: dict[str, Any] = {"id": ch.uid}
        if ch.f == "decommission":
            body["remove"] = [ch.node]
        else:
            assert self.proto.member_entry is not None
            # each member dials it through its own link proxy, like any other node, so the
            # nemesis cuts and slows links into it too
            peer_for = {m: self.links[link_name(m, ch.node)] for m in self.nodes
                        if link_name(m, ch.node) in self.links}
            entry = self.proto.member_entry(
                json.loads(self.node_specs[ch.node].config_path.read_text()),
                f"{HOST}:{self.ports[ch.node][self.proto.peer_port]}", peer_for)
            body.update(add=[ch.node], addresses={ch.node: entry})
        left = self._t0 + self.spec.time_limit - asyncio.get_running_loop().time()
        assert self._session is not None
        try:
            async with self._session.post(
                    self.admin_url(via) + "/admin/members", json=body,
                    timeout=aiohttp.ClientTimeout(total=max(1.0, min(ATTEMPT_TIMEOUT_S, left)))
            ) as r:
                status, text = r.status, await r.text()
        except (aiohttp.ClientError, TimeoutError) as e:
            return Attempt(n, via, at_s, "error", None, f"{type(e).__name__}: {e}".strip())
        if status == 200:
            return Attempt(n, via, at_s, "committed", 200)
        try:
            error = str(json.loads(text).get("error") or text)
        except (ValueError, AttributeError):
            error = text
        return Attempt(n, via, at_s, outcome_of(status), status, error[:500])

    @property
    def membership_report(self) -> list[dict[str, Any]]:
        """Every membership change with its attempts and final outcome (test.json)."""
        return [c.to_json() for c in self.changes.values()]

    async def heal_all(self) -> dict[str, Any]:
        return await self._faults.heal_all()

    async def _start_node(self, n: str) -> None:
        await self.backend.start(self.node_specs[n])
        if self.node_specs[n].env.get("FAKETIME_TIMESTAMP_FILE"):
            self._faked.append(self.backend.pid(n))  # its /dev/shm leftovers, for close()
        direct = getattr(self.backend, "direct_host", None)
        if self._relay is not None and direct is not None:
            # UDP on a docker bridge: the relay delivers to the container's own address, so
            # the node sees each peer's datagrams from the relay socket it was configured with
            host = await asyncio.to_thread(direct, n)
            if host is not None:
                await self._links.relay.retarget(n, host)

    # ---- NodeControl (what faults/nemesis.py drives) ------------------------------------
    async def kill(self, node: str) -> None:
        await self.backend.kill(node)

    async def restart(self, node: str) -> None:
        if self.backend.is_running(node):
            return
        await self._start_node(node)
        await self.wait_healthy(node)

    async def pause(self, node: str) -> None:
        await self.backend.pause(node)

    async def resume(self, node: str) -> None:
        await self.backend.resume(node)

    async def set_clock_offset(self, node: str, offset_s: float) -> None:
        await self.admin(node, "POST", "/admin/clock", {"offset_s": offset_s})

    async def set_clock_rate(self, node: str, rate: float) -> None:
        from faults.clockrate import RATE_FILE, set_rate

        if not self.node_specs[node].env.get("FAKETIME_TIMESTAMP_FILE"):
            raise ClusterError(f"{node} runs at true time: a clock-rate fault needs the run's "
                               "nodes started under libfaketime (test option clock_rate: true)")
        set_rate(self.run_dir.node_dir(node) / RATE_FILE, rate)

    async def states(self, names: list[str] | None = None
                     ) -> dict[str, dict[str, Any] | None]:
        """Each node's ``/admin/state`` (of ``names`` only, when given; None: no answer)."""
        async def one(n: str) -> dict[str, Any] | None:
            try:
                return await self.admin(n, "GET", "/admin/state", timeout=2.0)
            except Exception:
                return None

        which = self.nodes if names is None else names
        got = await asyncio.gather(*(one(n) for n in which))
        return dict(zip(which, got, strict=True))

    async def leader(self) -> str | None:
        if self.proto.leader_of is None:
            return None
        return self.proto.leader_of(await self.states())

    # ---- tear-down ---------------------------------------------------------------------
    async def collect(self) -> None:
        """Final journals, then state dumps, into the run dir (what the checkers read).

        Journals are copied first: a state taken after its journal may only know more than
        the journal, never less, so no entry looks lost merely because of the order we read.
        """
        for n in self.nodes:
            await self.backend.fetch(n, "events.jsonl", self.run_dir.node_dir(n) / "events.jsonl")
        from checkers.observations import GONE_FILE

        for n in sorted(self._faults.gone if self._faults is not None else ()):
            # no final state by design: the checkers judge the run without it
            write_json(self.run_dir.node_dir(n) / GONE_FILE,
                       {"node": n, "why": "killed for good by the nemesis; the final heal "
                                          "left it down"})
        states = await self.states()
        for c in self.changes.values():
            # an attempt left without an answer may have committed after all: the final
            # states say (a member applies a change only once it committed)
            if c.outcome != "committed" and any(
                    in_effect(c.f, c.node, (s or {}).get("members"))
                    for m, s in states.items() if m != c.node and s is not None):
                c.outcome, c.note = "committed", "found in effect in the final states"
            c.close()
        for n in self.nodes:
            if states[n] is not None:
                (self.run_dir.node_dir(n) / "state.json").write_text(json.dumps(states[n], indent=1))
        if self._hostile is not None and self._hostile.sent:
            from faults.hostile import report

            self.hostile_report = report(self.proto.hostile, self._hostile.counts(), states)
        self._collected = True

    async def close(self) -> None:
        try:
            await self.backend.close()
            # the nodes are stopped: their ports may go to later runs (ours or another's)
            release(p for ports in self.ports.values() for p in ports.values())
            # a run that failed before collect(): keep whatever journals the nodes left
            for n in [] if self._collected else self.nodes:
                if n in self.node_specs:
                    with contextlib.suppress(Exception):
                        await self.backend.fetch(n, "events.jsonl",
                                                 self.run_dir.node_dir(n) / "events.jsonl")
        finally:
            try:
                if self._links is not None:
                    await self._links.close()  # deletes this run's proxies
            finally:
                if self._toxiproxy is not None:
                    self._toxiproxy.close()  # stops the server if it is ours
                if self._relay is not None:
                    self._relay.close()
                if self._hostile is not None:
                    self._hostile.close()
                if self._session is not None:
                    await self._session.close()
                if self._faked:
                    from faults.clockrate import forget

                    for pid in self._faked:
                        forget(pid)



@contextlib.asynccontextmanager
async def open_cluster(spec: TestSpec, run_dir: RunDir, *, toxiproxy_url: str | None = None):
    """A started cluster for tests that drive nodes and faults themselves; always torn down."""
    c = Cluster(spec, run_dir, toxiproxy_url=toxiproxy_url)
    try:
        await c.start()
        yield c
    finally:
        await c.close()
