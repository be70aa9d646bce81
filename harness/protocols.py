"""The registry of protocols the harness can run: name -> ProtocolDef (imported lazily).

Our own suites live in :mod:`harness.suites`. A third party adds a protocol without editing
this project by declaring an entry point in its own package::

    [project.entry-points."chaos_harness.protocols"]
    myproto = "my_package.suite:PROTOCOL"

Two suites claiming one name is an error that names both, never a silent override.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from harness.spec import ProtocolDef

#: the entry point group third-party suites register in
GROUP = "chaos_harness.protocols"

#: our suites: protocol name -> "module:attribute" of its ProtocolDef
BUILTIN: dict[str, str] = {
    "antacid": "harness.suites.antacid:PROTOCOL",
    "garlicfarm": "harness.suites.garlicfarm:PROTOCOL",
    "drip": "harness.suites.drip:PROTOCOL",
    "sds": "harness.suites.sds:PROTOCOL",
    "swim": "harness.suites.swim:PROTOCOL",
}


class SuiteConflict(ValueError):
    """Two suites registered one protocol name."""


@cache
def registry() -> dict[str, str]:
    """Every protocol name -> its suite's "module:attribute", ours and the entry points'."""
    out = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        if ep.name in out and out[ep.name] != ep.value:
            raise SuiteConflict(f"protocol {ep.name!r} is registered twice: {out[ep.name]} and "
                                f"{ep.value} (entry point group {GROUP}); uninstall or rename one")
        out[ep.name] = ep.value
    return out


def names() -> list[str]:
    return sorted(registry())


def get_protocol(name: str) -> ProtocolDef:
    try:
        target = registry()[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; available: {', '.join(names())}") from None
    mod, attr = target.split(":")
    proto = getattr(importlib.import_module(mod), attr)
    if not isinstance(proto, ProtocolDef):
        raise TypeError(f"{target} is a {type(proto).__name__}, not a harness.spec.ProtocolDef")
    return proto
