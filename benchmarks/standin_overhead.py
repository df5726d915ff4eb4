"""The stand-in's own CPU per request beyond what the request is charged.

A workload's cost is the simulated REPL time of a command, and the ideal
throughput is workers / mean cost, so a stand-in that spends CPU of its own on
top of each charge puts the ideal out of every target's reach. This drives one
stand-in process straight over its pipes (no server, no client library): the
workload's import header once, then each body on that env, and reads the
process's CPU from /proc before and after.

    python -m benchmarks.standin_overhead --requests 200

prints the stand-in's CPU, the charges, and the CPU per request over the
charges (about 0.1 ms: the answer's write; 3.7 ms before 2026-12-04, when the
stand-in's own lexer and elaborator came on top of the charge).

May import: benchmarks.workloads, benchmarks.targets.common (the stand-in's cost flags),
benchmarks.server_cpu (`cpu_seconds`), psutil and the standard library.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import psutil

from . import workloads
from .server_cpu import cpu_seconds
from .targets.common import standin_cost_args


def measure(items: list[workloads.Item], scale: float) -> dict:
    """Drives one stand-in over `items`; returns its CPU, the charges and the overhead."""
    child = subprocess.Popen(
        [sys.executable, "-m", "leanrpc.standin", *standin_cost_args(scale)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None

    def ask(request: dict) -> dict:
        child.stdin.write(json.dumps(request) + "\n\n")
        child.stdin.flush()
        lines: list[str] = []
        while True:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError("the stand-in closed its output")
            if line.strip() == "" and lines:
                return json.loads("".join(lines))
            lines.append(line)

    try:
        envs: dict[str, int | None] = {}
        bodies = []
        for item in items:
            header, body = workloads.split_imports(item.code)
            if header and header not in envs:
                envs[header] = ask({"cmd": header})["env"]
            bodies.append((body, envs.get(header) if header else None, item.burn_s))
        process = psutil.Process(child.pid)
        cpu0, wall0 = cpu_seconds(process), time.perf_counter()
        charged = 0.0
        for body, env, burn_s in bodies:
            ask({"cmd": body} if env is None else {"cmd": body, "env": env})
            charged += burn_s
        cpu, wall = cpu_seconds(process) - cpu0, time.perf_counter() - wall0
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    return {
        "requests": len(bodies),
        "standin_cpu_s": round(cpu, 3),
        "charged_s": round(charged, 3),
        "wall_s": round(wall, 3),
        "over_charge_ms_per_request": round(1000 * (cpu - charged) / max(1, len(bodies)), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="minif2f")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--scale", type=float, default=workloads.DEFAULT_SCALE)
    args = parser.parse_args(argv)
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    items = workloads.require_data(
        workloads.load(args.workload, scale=args.scale, limit=args.requests),
        f"items in workload {args.workload!r}",
    )
    result = measure(items, args.scale)
    print(
        f"{result['requests']} {args.workload} bodies: stand-in CPU {result['standin_cpu_s']:.2f} s "
        f"for {result['charged_s']:.2f} s charged, "
        f"{result['over_charge_ms_per_request']:.2f} ms per request over the charge "
        f"(wall {result['wall_s']:.2f} s)"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
