"""Load generator for leanrpc and its peers (Kimina Lean Server, LeanInteract).

    python -m benchmarks.load run --workers 2 --duration 30             # one leanrpc run
    python -m benchmarks.load run --target kimina --workers 2 --requests 300
    python -m benchmarks.load scaling --duration 30                     # matrix + PNG plots
    python -m benchmarks.load compare --rounds 2 --duration 40          # side by side, alternating

Each run starts its own server (leanrpc, or a peer from benchmarks/.peers-venv) on loopback with
the REPL stand-in (`python -m leanrpc.standin`, never real Lean) as its REPL, warms it up, drives
it open-loop (Poisson arrivals at --rate) or closed-loop (--concurrency requests always in
flight) for --duration seconds or --requests requests, and reports one JSON document (schema
`leanrpc-bench/1`, see `SUMMARY_KEYS`) plus a table. Progress goes to stderr once a second.

Definitions used in every report:

* latency: client send to answer, queueing and any import included;
* repl time: the REPL round trip the server itself measured (leanrpc: boot_s + header_s + body_s;
  Kimina: the `time` field, body only); overhead = latency - queue_s - repl time, per request
  (queue_s is leanrpc-only; for peers, overhead also contains their queueing);
* ideal throughput: workers / mean simulated REPL cost (the workload's burn seconds); the
  ratio to it is the share of the REPL capacity the whole stack delivers.
"""

from __future__ import annotations

import sys

# The rooms (issue 17): config, measure, targets/, driver, report, plots, cli. This module keeps
# `python -m benchmarks.load ...` and the names scripts and tests already use.
from .cli import build_parser, main
from .cli import write_json as _write
from .config import PEERS_VENV, REPO, SCHEMA, SHIM_DIR, SUMMARY_KEYS, TARGETS, Record, RunConfig
from .driver import Progress, drive, run_async, run_rounds
from .measure import ResourceWatch, distribution_ms, machine, percentile
from .plots import plot_scaling, plot_throughput_latency
from .report import aggregate, summarize, table
from .targets import make_target
from .targets.kimina import KiminaTarget
from .targets.kimina_rest import KiminaRestTarget
from .targets.leaninteract import run_leaninteract
from .targets.leanrpc import LeanrpcTarget

__all__ = [
    "PEERS_VENV",
    "REPO",
    "SCHEMA",
    "SHIM_DIR",
    "SUMMARY_KEYS",
    "TARGETS",
    "KiminaRestTarget",
    "KiminaTarget",
    "LeanrpcTarget",
    "Progress",
    "Record",
    "ResourceWatch",
    "RunConfig",
    "_write",
    "aggregate",
    "build_parser",
    "distribution_ms",
    "drive",
    "machine",
    "main",
    "make_target",
    "percentile",
    "plot_scaling",
    "plot_throughput_latency",
    "run_async",
    "run_leaninteract",
    "run_rounds",
    "summarize",
    "table",
]

if __name__ == "__main__":
    sys.exit(main())
