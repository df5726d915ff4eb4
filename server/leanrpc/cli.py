"""Compatibility entry point: `python -m leanrpc.cli` runs `leanrpc` (see leanrpc.commands)."""

from __future__ import annotations

import sys

from .commands import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
