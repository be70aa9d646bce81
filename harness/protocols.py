"""The registry of protocols the harness can run: name -> ProtocolDef (imported lazily)."""

from __future__ import annotations

import importlib

from harness.spec import ProtocolDef

#: protocol name -> "module:attribute" of its ProtocolDef
REGISTRY: dict[str, str] = {
    "garlicfarm": "nodes.garlicfarm.harness:PROTOCOL",
    "drip": "nodes.drip.harness:PROTOCOL",
    "sds": "nodes.sds.harness:PROTOCOL",
    "swim": "nodes.swim.harness:PROTOCOL",
}


def get_protocol(name: str) -> ProtocolDef:
    try:
        target = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; available: {', '.join(sorted(REGISTRY))}") from None
    mod, attr = target.split(":")
    return getattr(importlib.import_module(mod), attr)
