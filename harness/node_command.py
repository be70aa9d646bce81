"""``--node-command``: run the user's own implementation in place of the reference node.

The command is a template, split like a shell line (``shlex``) but never run through a shell:

- ``{config}`` (required): the node's config file (docs/contracts.md section 2), the same file
  the reference node gets; every backend rewrites it to where the node can read it.
- ``{python}``: the Python the backend runs nodes with (the harness's own locally, the node
  image's in docker, the host's on ssh), so ``{python} -m nodes.garlicfarm --config {config}``
  is the reference node itself.
- ``{id}``: the node's id (``n1``).

The node runs with the harness's working directory as its own (``cwd``), so a relative path in
the command means what it meant where you typed it; the docker backend mounts that directory
read-only, and the ssh backend runs it in the host's workdir.
"""

from __future__ import annotations

import shlex
import string
from pathlib import Path

PLACEHOLDERS = ("config", "python", "id")


class NodeCommandError(ValueError):
    """A ``--node-command`` template that cannot start a node."""


def parse(template: str) -> list[str]:
    """The template's words, checked: it names ``{config}`` and no unknown placeholder."""
    try:
        words = shlex.split(template)
    except ValueError as e:
        raise NodeCommandError(f"--node-command {template!r} does not split into words: {e}") from None
    if not words:
        raise NodeCommandError("--node-command is empty; give the command that starts one node, "
                               "e.g. './mynode --config {config}'")
    seen: set[str] = set()
    for w in words:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(w) if f is not None]
        except ValueError as e:
            raise NodeCommandError(f"--node-command word {w!r}: {e} (write {{{{ and }}}} for "
                                   "literal braces)") from None
        for f in fields:
            if f not in PLACEHOLDERS:
                raise NodeCommandError(f"--node-command names {{{f}}}; the placeholders are "
                                       + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS))
        seen.update(fields)
    if "config" not in seen:
        raise NodeCommandError("--node-command must pass the node its config: put {config} where "
                               "your node takes the config file's path")
    if any("{python}" in w and w != "{python}" for w in words):
        raise NodeCommandError("{python} must be a word of its own in --node-command")
    return words


def node_argv(template: str, *, config: Path, node_id: str) -> list[str]:
    """The argv a backend starts: ``{python}`` stays a word of its own for the backend to
    resolve, the config path is the control machine's (backends rewrite it)."""
    return [w if w == "{python}" else w.format(config=str(config), id=node_id, python="")
            for w in parse(template)]
