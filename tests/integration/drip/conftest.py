"""The drip tests import their helpers by module name; make that work under any --import-mode."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
