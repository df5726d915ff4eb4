"""Compatibility name for the composition root, which lives in `leanrpc.app`.

Owns nothing: `create_server`, `App` and `serve` moved to leanrpc/app.py (the
one place that wires pool, services and edge). Kept so that existing imports
(`from leanrpc.edge.server import create_server`) keep working; new code
imports leanrpc.app.
"""

from __future__ import annotations

from ..app import FORMALIZER_SERVICE, VERIFIER_SERVICE, App, StartupError, create_server, serve

__all__ = ["App", "FORMALIZER_SERVICE", "StartupError", "VERIFIER_SERVICE", "create_server", "serve"]
