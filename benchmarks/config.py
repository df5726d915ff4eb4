"""Benchmark run configuration and the per-request record every target returns.

May import: benchmarks.workloads.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import workloads

SCHEMA = "leanrpc-bench/1"
SUMMARY_KEYS = (
    "schema",
    "target",
    "config",
    "machine",
    "started_at",
    "requests",
    "statuses",
    "errors",
    "duration_s",
    "throughput_rps",
    "latency_ms",
    "repl_ms",
    "overhead_ms",
    "server_internal_ms",
    "ideal_rps",
    "ratio_to_ideal",
    "server",
)
REPO = Path(__file__).resolve().parents[1]
PEERS_VENV = REPO / "benchmarks" / ".peers-venv"
SHIM_DIR = REPO / "benchmarks" / "peers" / "shim"
# leanrpc over gRPC, Kimina's own server, LeanInteract, and leanrpc behind its Kimina REST gateway.
TARGETS = ("leanrpc", "kimina", "leaninteract", "kimina_rest")


@dataclasses.dataclass
class RunConfig:
    target: str = "leanrpc"  # one of TARGETS
    rpc: str = "unary"  # unary | stream (leanrpc only)
    mode: str = "closed"  # closed | open
    concurrency: int = 0  # closed loop; 0 = 2 x workers
    rate: float = 0.0  # open loop, requests/s
    duration_s: float = 0.0
    requests: int = 0
    workers: int = 2
    workload: str = "kimina"
    scale: float = workloads.DEFAULT_SCALE
    limit: int = 0
    reuse: bool = True
    pure_python: bool = False  # LEANRPC_NO_EXTENSIONS=1 on the server
    # leanrpc's trust checks: "default" (axiom check on, code policy `proof`), or "off"
    # (no axiom check, policy `trusted`): the work peers do, for side-by-side rows.
    checks: str = "default"
    warmup: int = -1  # requests before measuring; -1 = 2 x workers
    seed: int = 1
    timeout_s: float = 120.0
    progress: bool = True

    def validate(self) -> None:
        if self.target not in TARGETS:
            raise SystemExit(f"unknown target {self.target!r}")
        if self.rpc not in ("unary", "stream"):
            raise SystemExit(f"unknown --rpc {self.rpc!r}")
        if self.checks not in ("default", "off"):
            raise SystemExit(f"unknown --checks {self.checks!r}")
        if self.mode not in ("closed", "open"):
            raise SystemExit(f"unknown --mode {self.mode!r}")
        if self.mode == "open" and self.rate <= 0:
            raise SystemExit("open loop needs --rate > 0")
        if self.target == "leaninteract" and self.mode != "closed":
            raise SystemExit("leaninteract is a library: closed loop only")
        if not self.duration_s and not self.requests:
            raise SystemExit("give --duration or --requests")
        if self.workers < 1:
            raise SystemExit("--workers must be >= 1")


@dataclasses.dataclass
class Record:
    id: str
    start: float
    end: float
    status: str  # VALID/INVALID/... or an error like "grpc:UNAVAILABLE", "http:429"
    burn_s: float
    repl_s: float | None = None
    queue_s: float | None = None
    verifier: str = ""
    server_total_s: float | None = None  # leanrpc: arrival to answer, inside the server
    warm_header: bool | None = None  # leanrpc: answered by a worker that already held the header
