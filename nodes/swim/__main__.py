"""``python -m nodes.swim --config CONFIG.json``: one SWIM member (docs/swim.md)."""

from nodes.common.runtime import main
from nodes.swim.core import BUGS
from nodes.swim.server import make_node

if __name__ == "__main__":
    raise SystemExit(main(None, "swim-node", BUGS, make_node))
