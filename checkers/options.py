"""A test's node options as the nodes ran with them, for checkers whose bounds depend on them.

test.json records ``node_options`` (the protocol's defaults under the options the test gave:
exactly what each node's config got); records written before it fall back to ``options``, so a
checker's own default then stands in for the protocol's."""

from __future__ import annotations

from typing import Any


def option(test: dict[str, Any], key: str, default: Any = None) -> Any:
    opts = test.get("node_options")
    if opts is None:
        opts = test.get("options") or {}
    return opts.get(key, default)
