"""Replaying a stored run: its test.json back into the TestSpec that made it.

``TestSpec.describe()`` is what the runner writes into ``test.json``; :func:`spec_from_record`
is its inverse for every spec a command line can build (a protocol, a named workload, named
faults or none): protocol, workload, nodes, concurrency, time limit, fault kinds and interval,
seed, bug modes, backend, protocol options, op timeout, quiescence, topology edges, store
and the ``--node-command`` the nodes were started with.
What the record cannot hold (a Workload or nemesis generator built in code, a test's own
checkers) makes the replay refuse, or is said to be missing: never a silent different run.

:func:`command_line` is the equivalent explicit ``harness run`` command, for the run page.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.nemesis_generator import Faults
from harness.spec import TestSpec

#: what ``harness run`` gives a spec when an option is left out (and what TestSpec does for
#: the fields the command line does not set): records older than the stored fault interval
#: and quiescence fall back to them
CLI_DEFAULTS: dict[str, Any] = {"nodes": 5, "time_limit": 30.0, "nemesis": "partition,kill",
                                "nemesis_interval": 5.0, "backend": "local", "bugs": [],
                                "options": {}, "op_timeout": 5.0, "quiesce_s": 3.0}
#: the TestSpec fields an override may set, by the ``harness run`` option that sets them
OVERRIDABLE = ("nodes", "time_limit", "nemesis", "nemesis_interval", "backend", "seed",
               "workload", "concurrency", "bugs", "name", "store", "node_command",
               "kill_for_good")


class ReplayError(ValueError):
    """A test.json that cannot be turned back into the spec that ran: says why and what to do."""


@dataclass(frozen=True)
class FixedTopology:
    """A recorded topology: the same undirected edges whatever node ids it is given (a
    replay has the same node ids). Equal when the edges are."""

    edges: tuple[tuple[str, str], ...]

    def __call__(self, ids: list[str]) -> list[tuple[str, str]]:
        return list(self.edges)


def _full_mesh(ids: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]


def _need(record: dict[str, Any], key: str, what: str) -> Any:
    if record.get(key) is None:
        raise ReplayError(f"test.json has no {key!r}: {what}")
    return record[key]


def _nemesis(record: dict[str, Any]) -> str | None:
    """The named faults a record replays (None: a generator built in code). A record written
    before ``faults`` was stored names its faults in ``nemesis`` (what the command line gave),
    unless that says ``custom``."""
    # nodes killed for good are replayed from ``kill_for_good``, not from the label
    nemesis = ",".join(n for n in (record.get("nemesis") or "none").split(",")
                       if n != "kill-for-good") or "none"
    if "faults" not in record:
        return None if nemesis == "custom" else nemesis
    faults = record["faults"]
    if faults:
        return str(faults["kinds"])
    return "none" if nemesis == "none" else None


def merged(record: dict[str, Any], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record's settings as ``harness run`` options, with ``overrides`` (options given on
    the command line; None means not given) put over them."""
    if record.get("protocol") in (None, ""):
        raise ReplayError("the run had no protocol (a Workload object built in code); rerun "
                          "the test that made it")
    if record.get("workload") == "custom":
        raise ReplayError("the run's workload was built in code (workload: custom); rerun the "
                          "test that made it")
    faults = record.get("faults")
    nemesis = record.get("nemesis") or "none"
    out: dict[str, Any] = {
        "protocol": record["protocol"],
        "name": _need(record, "name", "give --name"),
        "workload": record.get("workload") or "",
        "nodes": len(_need(record, "nodes", "give --nodes")),
        "concurrency": _need(record, "concurrency", "give --concurrency"),
        "time_limit": _need(record, "time_limit", "give --time-limit"),
        "seed": _need(record, "seed", "give --seed"),
        "backend": record.get("backend") or CLI_DEFAULTS["backend"],
        "bugs": list(record.get("bugs") or []),
        "options": dict(record.get("options") or {}),
        "op_timeout": record.get("op_timeout", CLI_DEFAULTS["op_timeout"]),
        "quiesce_s": record.get("quiesce_s", CLI_DEFAULTS["quiesce_s"]),
        "topology": record.get("topology"),
        "store": record.get("store"),
        "node_command": record.get("node_command"),
        "nemesis": _nemesis(record),
        "nemesis_interval": faults["interval_s"] if faults else None,
        "kill_for_good": dict(record.get("kill_for_good") or {}),
        "add_member": dict(record.get("add_member") or {}),
        "decommission": dict(record.get("decommission") or {}),
    }
    for k, v in (overrides or {}).items():
        if k not in OVERRIDABLE:
            raise ValueError(f"{k!r} cannot be overridden; one of {', '.join(OVERRIDABLE)}")
        if v is not None and v != []:
            out[k] = v
    if out["nemesis"] is None:
        raise ReplayError(f"the run's nemesis ({nemesis}) was a generator built in code, not "
                          "named faults; give --nemesis KINDS to replay with named faults, or "
                          "rerun the test that made it")
    if out["nemesis"] != "none" and out["nemesis_interval"] is None:
        out["nemesis_interval"] = CLI_DEFAULTS["nemesis_interval"]
    return out


def spec_from_record(record: dict[str, Any], overrides: dict[str, Any] | None = None
                     ) -> TestSpec:
    """The TestSpec a stored test.json describes (``overrides`` put over it): for a spec built
    from names, ``spec_from_record(spec.describe()) == spec``.

    Raises ReplayError when the record cannot be replayed, ValueError (from the registry)
    for a protocol or workload that is not installed."""
    from harness.protocols import get_protocol

    m = merged(record, overrides)
    proto = get_protocol(m["protocol"])
    ids = [f"n{i + 1}" for i in range(m["nodes"])]
    topology = None
    recorded_ids = list(record.get("nodes") or [])
    pairs = [tuple(e) for e in m["topology"] or []]
    if m["topology"] is not None and pairs != _full_mesh(recorded_ids):
        if ids != recorded_ids:
            raise ReplayError(f"the run's topology {m['topology']!r} names the nodes "
                              f"{recorded_ids}; --nodes {m['nodes']} cannot keep it")
        topology = FixedTopology(tuple(pairs))  # type: ignore[arg-type]
    faults = None if m["nemesis"] == "none" and record.get("faults") is None \
        else Faults(m["nemesis"], m["nemesis_interval"] or CLI_DEFAULTS["nemesis_interval"])
    return TestSpec(name=m["name"], protocol=proto, workload=m["workload"], nodes=m["nodes"],
                    faults=faults, time_limit=m["time_limit"], concurrency=m["concurrency"],
                    seed=m["seed"], backend=m["backend"], bugs=list(m["bugs"]),
                    options=m["options"], op_timeout=m["op_timeout"], quiesce_s=m["quiesce_s"],
                    topology=topology, store=m["store"], node_command=m["node_command"],
                    kill_for_good=m["kill_for_good"], add_member=m["add_member"],
                    decommission=m["decommission"])


@dataclass(frozen=True)
class CommandLine:
    """``harness run ...`` with every option a record sets, and what it cannot express."""

    argv: list[str]
    #: settings of the run the command line has no option for (so only --from replays them)
    not_expressible: list[str]

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


def command_line(record: dict[str, Any]) -> CommandLine:
    """The explicit ``harness run`` command equivalent to ``harness run --from`` this record
    (where the store puts the run apart)."""
    m = merged(record)
    argv = ["harness", "run", m["protocol"]]
    if m["workload"]:
        argv += ["--workload", m["workload"]]
    # --nodes counts the first members; --add-member names the ones added at run time
    argv += ["--nodes", str(m["nodes"] - len(m["add_member"])), "--concurrency", str(m["concurrency"]),
             "--time-limit", f"{m['time_limit']:g}", "--nemesis", m["nemesis"]]
    if m["nemesis"] != "none":
        argv += ["--nemesis-interval", f"{m['nemesis_interval']:g}"]
    argv += ["--seed", str(m["seed"]), "--backend", m["backend"]]
    for b in m["bugs"]:
        argv += ["--bug", b]
    if m["node_command"]:
        argv += ["--node-command", m["node_command"]]
    for node, at in sorted(m["kill_for_good"].items()):
        argv += ["--kill-for-good", f"{node}@{at:g}"]
    for node, at in sorted(m["add_member"].items()):
        argv += ["--add-member", f"{node}@{at:g}"]
    for node, at in sorted(m["decommission"].items()):
        argv += ["--decommission", f"{node}@{at:g}"]
    argv += ["--name", m["name"]]
    if m["add_member"]:  # the options --add-member itself sets
        m["options"] = {k: v for k, v in m["options"].items()
                        if k not in ("late_nodes", "late_unknown")}
    missing = [f"{k} {m[k]!r}" for k in ("options", "op_timeout", "quiesce_s")
               if m[k] != CLI_DEFAULTS[k]]
    ids = [f"n{i + 1}" for i in range(m["nodes"])]
    edges = None if m["topology"] is None else [tuple(e) for e in m["topology"]]
    if edges is not None and edges != _full_mesh(ids):
        named = [n for n, t in _topologies(m["protocol"]).items() if t(ids) == edges]
        if named:
            argv[-2:-2] = ["--topology", named[0]]
        else:
            missing.append(f"topology {m['topology']!r}")
    return CommandLine(argv, missing)


def _topologies(protocol: str) -> dict[str, Any]:
    from harness.protocols import get_protocol

    try:
        return get_protocol(protocol).topologies
    except ValueError:  # a protocol this install lacks: its shapes are unknown here
        return {}
