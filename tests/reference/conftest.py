"""tests/reference: statements pinned to a reference; reuses tests/verify's server helper."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "verify"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "native"))
