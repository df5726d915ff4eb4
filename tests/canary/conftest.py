"""tests/canary: the pool's canaries (pool/canary.py, services/canary.py); reuses
tests/cache's helpers (a server with a result cache)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cache"))
