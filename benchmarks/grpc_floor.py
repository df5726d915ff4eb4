"""The floor under the server's CPU per request: bare gRPC servers beside `leanrpc serve` (issue 28 item 1).

    python -m benchmarks.grpc_floor --calls 400 --rounds 2
    python -m benchmarks.grpc_floor --calls 400 --rounds 2 --no-leanrpc

Starts, once each, the bare Verifier servers of benchmarks/grpc_bare.py (`aio`: grpc.aio, as
`leanrpc serve` uses; `sync`: grpcio's thread-pool server; both answer VALID after `--delay`
seconds of sleep and do nothing else) and, unless `--no-leanrpc`, `leanrpc serve` on the
stand-in at the load harness's scale with the checks compared with peers off
(benchmarks.server_cpu's server; cache off). Then, `--rounds` times, each target in turn
(alternating, so a disturbance hits all of them alike) answers `--calls` miniF2F snippets
from the same driver (benchmarks.server_cpu.drive: `--concurrency` in flight, unary `Verify`
calls of one snippet, or one `VerifyStream`), and the table gives each server process's own
CPU per call (user + system; leanrpc's REPLs are not counted). The sync server takes unary
calls only.

What the rows say: what a Python gRPC server spends per call on this machine before any work
of its own (aio unary, sync unary, aio stream), next to what leanrpc spends with its pool,
fence, audit and checks. The bare servers' `--delay` (default 0.14 s: with 4 calls in flight
they then answer at leanrpc's rate on 2 stand-in workers, about 28 calls/s, so the calls are
as spread out and each pays its own wakeups; answered at once, several calls would share a
wakeup and read lower). Without the shared
datasets the bare rows still run on a fixed snippet; the leanrpc rows need them and stop
with one line. May import: benchmarks.grpc_bare (run as a process), benchmarks.server_cpu,
benchmarks.targets.common, benchmarks.workloads, psutil.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from . import workloads
from .server_cpu import cpu_seconds, drive, measured_table
from .targets.common import free_port, serve_leanrpc, stop_process, wait_port

# (target, server, rpc): the rows, in the order each round runs them.
_BARE = (
    ("bare grpc.aio", "aio", "unary"),
    ("bare grpc.aio", "aio", "stream"),
    ("bare grpc sync", "sync", "unary"),
)
_LEANRPC = (("leanrpc serve", "leanrpc", "unary"), ("leanrpc serve", "leanrpc", "stream"))
_FIXED_SNIPPET = "theorem t : 1 + 1 = 2 := by norm_num\n"


def _start_bare(mode: str, delay: float) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.grpc_bare",
            "--mode",
            mode,
            "--port",
            str(port),
            "--delay",
            str(delay),
        ],
        stdout=subprocess.DEVNULL,
    )
    return process, port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per target per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--delay", type=float, default=0.14, help="the bare servers' answer delay (s)"
    )
    parser.add_argument("--workers", type=int, default=2, help="leanrpc's workers")
    parser.add_argument("--scale", type=float, default=workloads.DEFAULT_SCALE)
    parser.add_argument("--no-leanrpc", action="store_true", help="bare servers only")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows_wanted = _BARE + (() if args.no_leanrpc else _LEANRPC)
    if args.no_leanrpc:
        codes = [_FIXED_SNIPPET] * args.calls
    else:
        try:
            items = workloads.load("minif2f", scale=args.scale)
        except workloads.SharedNotFound as exc:
            workloads.no_data(str(exc))  # stops with one line
        codes = [items[k % len(items)].code for k in range(args.calls)]
    servers: dict[str, tuple[subprocess.Popen, int]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-grpc-floor-"))
    rows = []
    try:
        for mode in ("aio", "sync"):
            servers[mode] = _start_bare(mode, args.delay)
        if not args.no_leanrpc:
            servers["leanrpc"] = serve_leanrpc(measured_table(args.workers, "off", args.scale), tmp)
        for name, (process, port) in servers.items():
            asyncio.run(wait_port(port, process, 60, name))
        for _target, server, rpc in rows_wanted:  # warm-up: channels, workers, caches
            asyncio.run(
                drive(servers[server][1], codes[: 4 * args.concurrency], rpc, args.concurrency)
            )
        for n in range(args.rounds):
            for target, server, rpc in rows_wanted:
                process, port = servers[server]
                measured = psutil.Process(process.pid)
                load = os.getloadavg()[0]
                cpu0, t0 = cpu_seconds(measured), time.perf_counter()
                valid = asyncio.run(drive(port, codes, rpc, args.concurrency))
                cpu, wall = cpu_seconds(measured) - cpu0, time.perf_counter() - t0
                rows.append(
                    {
                        "round": n + 1,
                        "target": target,
                        "rpc": rpc,
                        "calls": len(codes),
                        "valid": valid,
                        "wall_s": round(wall, 2),
                        "server_cpu_ms_per_call": round(1000 * cpu / len(codes), 3),
                        "loadavg_at_start": round(load, 2),
                    }
                )
    finally:
        for process, _port in servers.values():
            stop_process(process)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"# grpc_floor: {args.calls} calls per target per round, {args.concurrency} in flight, "
        f"bare answer delay {args.delay:g} s"
        + (
            ""
            if args.no_leanrpc
            else f"; leanrpc: {args.workers} stand-in workers, scale {args.scale:g}, checks off"
        )
    )
    print("| round | target | rpc | calls | valid | wall s | server CPU ms/call | load avg |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['round']} | {r['target']} | {r['rpc']} | {r['calls']} | {r['valid']} | {r['wall_s']} | "
            f"{r['server_cpu_ms_per_call']} | {r['loadavg_at_start']} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": rows}, indent=1))
    return 0 if rows and all(r["valid"] == r["calls"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
