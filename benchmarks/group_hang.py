"""A GRPO group with one hanging completion: the call's wall time, checkouts side by side
(issue 38 item 6: a pipelined group's failure rules).

    python -m benchmarks.group_hang --checkout before=<checkout> --checkout after=. \\
        --rounds 3 --timeout 3 --scale 0.002

Per round and checkout (alternating, so neighbours share the machine's load): one `leanrpc
serve` of that checkout (its server/ first on PYTHONPATH: its own pool and stand-in; no
bytecode written there), `--workers` warm workers, result cache off, then a warm-up Verify call
of `--group` miniF2F snippets (the workload's first ones: one header, as a GRPO group shares
one), then the measured call: the same snippets with the stand-in's `hang` directive added to
the one at `--hang-at`, under `timeout_s = --timeout`. Printed: the call's wall time, the same
in units of the timeout (with the default `--scale`, the bodies' own work is small beside the
timeout, as a real proof's seconds are beside a limit of minutes: a hang waited out once costs
a little over 1, twice a little over 2, whatever the machine's speed), and the statuses
(every snippet but the hanging one keeps its verdict; the hanging one is TIMEOUT). The client
is this checkout's (leanrpc.client: the wire is the same).
May import: benchmarks.targets.common, benchmarks.workloads, leanrpc.client.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import tempfile
import time
from pathlib import Path

from . import workloads
from .targets.common import leanrpc_table, serve_leanrpc, stop_process, wait_port

HANG = "\n--@standin: hang\n"


def _group(size: int, scale: float) -> list[tuple[str, str]]:
    """The workload's first `size` snippets (one header), as (id, code)."""
    items = workloads.load("minif2f", scale=scale, limit=size)
    return [(item.id, item.code) for item in items]


async def _measure(port: int, group: list[tuple[str, str]], hang_at: int, timeout: float) -> dict:
    from leanrpc.client import AsyncClient

    client = AsyncClient(f"127.0.0.1:{port}", max_retries=0)
    try:
        await client.verify_batch(group, timeout_s=timeout)  # warm-up: boots, the header
        hung = list(group)
        sid, code = hung[hang_at]
        hung[hang_at] = (sid, code + HANG)
        started = time.monotonic()
        results = await client.verify_batch(hung, timeout_s=timeout)
        wall = time.monotonic() - started
    finally:
        await client.close()
    return {
        "wall_s": round(wall, 2),
        "timeouts": round(wall / timeout, 2),
        "hanging": results[hang_at].status,
        "statuses": dict(collections.Counter(r.status for r in results)),
    }


def run_one(name: str, checkout: Path, args, group: list[tuple[str, str]]) -> dict:
    """One server of `checkout`, one warm-up and one measured call."""
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = f"{checkout / 'server'}{os.pathsep}{checkout}"
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    table = leanrpc_table(args.workers, args.scale)
    table["limits"] = {"max_system_memory_percent": 0}
    with tempfile.TemporaryDirectory(prefix="group-hang-") as folder:
        server, port = serve_leanrpc(table, Path(folder))
        os.environ.clear()
        os.environ.update(saved)
        try:
            asyncio.run(wait_port(port, server, 120, f"leanrpc serve of {name}"))
            row = asyncio.run(_measure(port, group, args.hang_at, args.timeout))
        finally:
            stop_process(server)
    return {"variant": name, **row}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkout", action="append", required=True, metavar="NAME=PATH", help="a checkout to run"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--hang-at", type=int, default=5, help="the hanging snippet's place")
    parser.add_argument("--timeout", type=float, default=3.0, help="timeout_s of the calls")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--scale",
        type=float,
        default=0.002,
        help="the stand-in's cost scale (small: a body's work is small beside the timeout, "
        "as a real proof's few seconds are beside a limit of minutes)",
    )
    parser.add_argument("--json", default="", help="also write the rows here")
    args = parser.parse_args(argv)
    if not 0 <= args.hang_at < args.group:
        parser.error("--hang-at must be a place in the group")
    checkouts = []
    for spec in args.checkout:
        name, _, path = spec.partition("=")
        if not name or not path:
            parser.error(f"--checkout {spec!r}: give it as NAME=PATH")
        checkouts.append((name, Path(path).resolve()))
    group = _group(args.group, args.scale)
    rows = []
    for round_ in range(1, args.rounds + 1):
        order = checkouts if round_ % 2 else checkouts[::-1]
        for name, checkout in order:
            row = {"round": round_, **run_one(name, checkout, args, group)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(
        f"# group_hang: {args.group} miniF2F snippets, one hanging at {args.hang_at}, "
        f"timeout_s {args.timeout:g}, {args.workers} workers, at "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print("| round | variant | wall s | in timeouts | hanging one | statuses |")
    print("|---:|---|---:|---:|---|---|")
    for row in rows:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(row["statuses"].items()))
        print(
            f"| {row['round']} | {row['variant']} | {row['wall_s']} | {row['timeouts']} | "
            f"{row['hanging']} | {statuses} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
