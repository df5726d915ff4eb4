"""A real server with stand-in workers for the Prover tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verify"))

from verify_support import running_server  # noqa: E402

__all__ = ["running_server", "AND_STATEMENT"]

# The stand-in splits `constructor` on ∧ into two goals; `exact hp`/`exact hq` close them.
AND_STATEMENT = "theorem and_intro_t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
