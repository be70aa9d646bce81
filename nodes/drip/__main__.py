"""``python -m nodes.drip --config CONFIG.json`` (docs/contracts.md section 2, docs/drip.md)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from nodes.common import heapdiag
from nodes.common.config import ConfigError, parse_config
from nodes.common.runtime import run, serve, setup_logging
from nodes.drip.core import BUGS
from nodes.drip.server import DripNode, Extra


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="nodes.drip")
    ap.add_argument("--config", required=True, help="node config JSON (docs/drip.md)")
    args = ap.parse_args(argv)
    try:
        raw = json.loads(Path(args.config).read_text(encoding="utf-8"))
        cfg = parse_config(raw, BUGS)
        extra = Extra.from_raw(raw)
        if not cfg.peers:
            raise ConfigError("config.peers: spec 4.1 requires at least one peer")
    except (OSError, ValueError) as e:  # ConfigError is a ValueError
        print(f"nodes.drip: {e}", file=sys.stderr)
        return 2
    setup_logging(cfg.id, str(cfg.options.get("log_level", "INFO")))
    heapdiag.install(cfg.id)  # off unless NODE_HEAPDIAG is set (issue 26's diagnosis)
    logging.getLogger("nodes.drip").info("starting with bugs=%s", sorted(cfg.bugs))
    try:
        node = DripNode(cfg, extra)
    except (OSError, ValueError) as e:  # unreadable key material, bad options
        print(f"nodes.drip: cannot start {cfg.id}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    run(serve(node), node.opts.event_loop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
