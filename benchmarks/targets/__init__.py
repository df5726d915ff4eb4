"""Benchmark targets: each starts a server on loopback with the REPL stand-in, sends one item
per request (`send`), and stops. LeanInteract, a library, runs through `run_leaninteract`.

May import: benchmarks.{config,measure,report,workloads}; never the driver or the CLI.
"""

from __future__ import annotations

from pathlib import Path

from ..config import RunConfig


def make_target(cfg: RunConfig, tmp: Path):
    if cfg.target == "leanrpc":
        from .leanrpc import LeanrpcTarget

        return LeanrpcTarget(cfg, tmp)
    if cfg.target == "kimina":
        from .kimina import KiminaTarget

        return KiminaTarget(cfg, tmp)
    if cfg.target == "kimina_rest":
        from .kimina_rest import KiminaRestTarget

        return KiminaRestTarget(cfg, tmp)
    raise SystemExit("leaninteract runs through run_leaninteract()")
