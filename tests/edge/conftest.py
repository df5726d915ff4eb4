"""tests/edge: stream endings, flow control and size isolation; reuses tests/verify's server helper."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "verify"))
