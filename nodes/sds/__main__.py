"""``python -m nodes.sds --config CONFIG.json``: one SDS node (docs/contracts.md section 2)."""

from nodes.common.runtime import main
from nodes.sds.core import BUGS
from nodes.sds.server import SdsNode

if __name__ == "__main__":
    raise SystemExit(main(None, "sds-node", BUGS, SdsNode))
