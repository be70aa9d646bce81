"""``python -m nodes.antacid --config CONFIG.json``: one ANTACID node (docs/contracts.md section 2)."""

from nodes.antacid.core import BUGS
from nodes.antacid.server import AntacidNode
from nodes.common.runtime import main

if __name__ == "__main__":
    raise SystemExit(main(None, "antacid-node", BUGS, AntacidNode))
