"""Report integration tests import ``report_builders`` (shared with the unit tests) and
``report_cdp`` (this folder) by plain name, under any import mode."""

import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
sys.path.insert(0, str(here.parents[1] / "unit" / "reports"))
