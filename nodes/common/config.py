"""Node configuration (docs/contracts.md section 2): JSON file -> validated dataclass.

Errors are ``ConfigError`` naming the field and what to do; unknown bug names are an error,
so a typo never silently runs the correct node in a test meant to catch a bug.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """The node config is missing a field, has a wrong type, or names an unknown bug."""


@dataclass(frozen=True)
class Ports:
    peer: int
    client: int
    admin: int


@dataclass(frozen=True)
class Peer:
    """How this node reaches one peer. ``peer`` is "host:port" (through its proxy)."""

    name: str
    num_id: int | None
    peer: str | None
    extra: dict[str, Any] = field(default_factory=dict)

    def peer_addr(self) -> tuple[str, int]:
        if not self.peer:
            raise ConfigError(f"peer {self.name!r} has no 'peer' address")
        return split_addr(self.peer, f"peers.{self.name}.peer")


@dataclass(frozen=True)
class NodeConfig:
    id: str
    num_id: int
    host: str
    data_dir: Path
    ports: Ports
    peers: dict[str, Peer]
    bugs: frozenset[str]
    seed: int
    options: dict[str, Any]

    def option(self, name: str, default: Any) -> Any:
        return self.options.get(name, default)


def split_addr(addr: str, where: str = "address") -> tuple[str, int]:
    """'host:port' -> (host, port), with a ConfigError naming ``where`` if malformed."""
    if not isinstance(addr, str) or ":" not in addr:
        raise ConfigError(f"{where}: expected 'host:port', got {addr!r}")
    host, _, port = addr.rpartition(":")
    try:
        p = int(port)
    except ValueError:
        raise ConfigError(f"{where}: port {port!r} is not an integer") from None
    if not 0 < p < 65536:
        raise ConfigError(f"{where}: port {p} out of range")
    return host.strip("[]"), p


def _req(d: dict[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if key not in d:
        raise ConfigError(f"{where}: missing required field {key!r}")
    v = d[key]
    if isinstance(v, bool) and typ is int or not isinstance(v, typ):
        raise ConfigError(f"{where}.{key}: expected {getattr(typ, '__name__', typ)}, got {v!r}")
    return v


def parse_config(raw: Any, known_bugs: Iterable[str]) -> NodeConfig:
    """Validate a decoded config object; ``known_bugs`` are the bug names this node has."""
    if not isinstance(raw, dict):
        raise ConfigError("config: expected a JSON object")
    ports_raw = _req(raw, "ports", dict, "config")
    ports = Ports(*(_req(ports_raw, k, int, "config.ports") for k in ("peer", "client", "admin")))
    for k, v in vars(ports).items():
        if not 0 <= v < 65536:
            raise ConfigError(f"config.ports.{k}: {v} out of range")
    peers: dict[str, Peer] = {}
    for name, p in (raw.get("peers") or {}).items():
        if not isinstance(p, dict):
            raise ConfigError(f"config.peers.{name}: expected an object")
        num = p.get("num_id")
        if num is not None and (not isinstance(num, int) or isinstance(num, bool)):
            raise ConfigError(f"config.peers.{name}.num_id: expected int, got {num!r}")
        addr = p.get("peer")
        if addr is not None:
            split_addr(addr, f"config.peers.{name}.peer")
        extra = {k: v for k, v in p.items() if k not in ("num_id", "peer")}
        peers[name] = Peer(name, num, addr, extra)
    bugs_raw = raw.get("bugs") or []
    if not isinstance(bugs_raw, list) or not all(isinstance(b, str) for b in bugs_raw):
        raise ConfigError("config.bugs: expected a list of strings")
    known = set(known_bugs)
    unknown = sorted(set(bugs_raw) - known)
    if unknown:
        raise ConfigError(
            f"config.bugs: unknown bug mode(s) {unknown}; this node knows {sorted(known)}"
        )
    options = raw.get("options") or {}
    if not isinstance(options, dict):
        raise ConfigError("config.options: expected an object")
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"config.seed: expected int, got {seed!r}")
    data_dir = _req(raw, "data_dir", str, "config")
    return NodeConfig(
        id=_req(raw, "id", str, "config"),
        num_id=_req(raw, "num_id", int, "config"),
        host=raw.get("host", "127.0.0.1"),
        data_dir=Path(data_dir),
        ports=ports,
        peers=peers,
        bugs=frozenset(bugs_raw),
        seed=seed,
        options=dict(options),
    )


def load_config(path: Path | str, known_bugs: Iterable[str]) -> NodeConfig:
    """Read and validate the config JSON at ``path``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e}") from e
    except ValueError as e:
        raise ConfigError(f"config {path} is not valid JSON: {e}") from e
    return parse_config(raw, known_bugs)
