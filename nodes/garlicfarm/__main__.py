"""``python -m nodes.garlicfarm --config C.json``: run one Garlic Farm node."""

from __future__ import annotations

import sys

from nodes.common.runtime import main
from nodes.garlicfarm.core import BUGS
from nodes.garlicfarm.server import GarlicFarmNode

if __name__ == "__main__":
    sys.exit(main(None, "garlicfarm", BUGS, GarlicFarmNode))
