"""Server CPU per snippet, GRPO-shaped batches against one snippet per call, side by side (issue 38 item 6).

    python -m benchmarks.batch_cpu --checkout before=<main checkout> --checkout after=. \\
        --requests 320 --rounds 2 --checks default

Runs `python -m benchmarks.server_cpu` for each checkout and each shape (`--shapes`, default
unary and `batch:16`: Verify calls of 16 snippets), alternating round by round, so every
variant sees the same foreign load as its neighbours. Each run imports leanrpc and the harness
from its own checkout (PYTHONPATH, no bytecode written there) and measures its own server
process's CPU over the same miniF2F snippets (benchmarks/server_cpu.py: stand-in REPL, result
cache off). Per run it prints the server CPU ms per snippet, the throughput and the foreign
load: CPU used on the machine during the run by anything but that run's own process tree, in
percent of all cores (benchmarks.measure). Only rounds with a low foreign load say much on a
shared 2-core box; the ratio between neighbouring runs says more than any one figure.
May import: benchmarks.measure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .measure import foreign_load_pct, machine_busy_s


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_one(name: str, checkout: Path, shape: str, args, out: Path) -> dict:
    """One server_cpu run of `checkout` in `shape` ("unary" or "batch:N")."""
    env = dict(os.environ, PYTHONPATH=f"{checkout / 'server'}{os.pathsep}{checkout}")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("LEANRPC_SHARED", "/work/shared")
    rpc, _, size = shape.partition(":")
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.server_cpu",
        "--requests",
        str(args.requests),
        "--rounds",
        "1",
        "--idle",
        "0",
        "--checks",
        args.checks,
        "--rpc",
        rpc,
        "--json",
        str(out),
    ]
    if size:
        cmd += ["--batch", size]
    for setting in args.set:
        cmd += ["--set", setting]
    busy0, ours0, t0 = machine_busy_s(), _children_cpu_s(), time.monotonic()
    subprocess.run(cmd, cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    busy, ours, wall = machine_busy_s() - busy0, _children_cpu_s() - ours0, time.monotonic() - t0
    row = json.loads(out.read_text())["rounds"][0]
    return {
        "variant": name,
        "shape": shape,
        "server_cpu_ms": row["server_cpu_ms_per_request"],
        "req_per_s": row["req_per_s"],
        "valid": row["valid"],
        "requests": row["requests"],
        "foreign_load_pct": round(foreign_load_pct(busy, ours, wall), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkout",
        action="append",
        required=True,
        metavar="NAME=PATH",
        help="a checkout to run (its server/ and benchmarks/), named in the table",
    )
    parser.add_argument("--shapes", default="unary,batch:16")
    parser.add_argument("--requests", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--checks", choices=("off", "default"), default="default")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    checkouts = []
    for item in args.checkout:
        name, _, path = item.partition("=")
        if not path:
            parser.error(f"--checkout {item!r}: write NAME=PATH")
        checkouts.append((name, Path(path).resolve()))
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-cpu-") as tmp:
        for n in range(args.rounds):
            for shape in shapes:
                order = checkouts if n % 2 == 0 else checkouts[::-1]
                for name, checkout in order:
                    row = run_one(name, checkout, shape, args, Path(tmp) / "run.json")
                    row["round"] = n + 1
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    print(
        f"# batch_cpu: miniF2F, {args.requests} snippets per run, checks {args.checks}, "
        f"{args.rounds} rounds, at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print("| round | variant | shape | valid | req/s | server CPU ms/snippet | foreign load % |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['round']} | {r['variant']} | {r['shape']} | {r['valid']}/{r['requests']} | "
            f"{r['req_per_s']} | {r['server_cpu_ms']} | {r['foreign_load_pct']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
