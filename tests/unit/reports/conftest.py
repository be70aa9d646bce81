"""The report tests import their store builders as ``report_builders`` under any import mode."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
