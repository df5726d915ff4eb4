"""GRPO workload: many completions per statement, some byte-identical.

GRPO-style training samples a group of completions per statement; easy
statements, low temperature and short proofs make many of them identical.
This module builds that workload from the Kimina fixture proofs (costs as in
benchmarks/workloads.py: Kimina-scaled times on the stand-in) and measures a
leanrpc server with and without the result cache, side by side in one run.

    python -m benchmarks.grpo --statements 4 --completions 64 --dup-rates 0 25 50

Workload: for each statement, `completions` items. With duplicate rate d,
round(d * completions) of them are byte-identical copies of the group's other
completions (uniformly chosen), the rest distinct (the proof plus a distinct
comment line: a different body, the same cost); the group is shuffled. A group is submitted at once, as a trainer does, with the groups of
`concurrent_groups` statements in flight together. Ideal speed-up with a
perfect cache: 1 / (1 - d) (2x at 50%).

`grpo_items()` is importable by the load driver (benchmarks.load) as a
workload; `main()` runs it standalone.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import workloads
from .load import _stop_process, _wait_port, free_port


def grpo_items(statements: int, completions: int, dup_rate: float, *, scale: float = workloads.DEFAULT_SCALE,
               seed: int = 0) -> list[workloads.Item]:
    """`statements` groups of `completions` items, a `dup_rate` share duplicated."""
    if not 0 <= dup_rate < 1:
        raise ValueError("dup_rate must be in [0, 1)")
    base = workloads.load("kimina", scale=scale)
    rng = random.Random(seed)
    chosen = rng.sample(base, statements)
    items: list[workloads.Item] = []
    for s, proof in enumerate(chosen):
        # Exactly round(d * n) duplicates per group, in shuffled order.
        unique = [proof.code.rstrip("\n") + f"\n-- completion {s}.{k}\n"
                  for k in range(completions - round(dup_rate * completions))]
        group = unique + [rng.choice(unique) for _ in range(completions - len(unique))]
        rng.shuffle(group)
        for k, code in enumerate(group):
            items.append(workloads.Item(id=f"g{s}-c{k}", code=code, burn_s=proof.burn_s, source="grpo"))
    return items


def duplicate_share(items: list[workloads.Item]) -> float:
    return 1 - len({i.code for i in items}) / len(items)


class Server:
    """A `leanrpc serve` process on the stand-in with Kimina-scaled import costs."""

    def __init__(self, tmp: Path, *, workers: int, cache: bool, scale: float) -> None:
        self.tmp, self.workers, self.cache, self.scale = tmp, workers, cache, scale
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    async def start(self) -> None:
        command = [sys.executable, "-m", "leanrpc.standin", "--import-cost", f"{workloads.import_cost(self.scale):.4f}",
                   "--reimport-cost", f"{workloads.import_cost(self.scale) / 4:.4f}"]
        config = self.tmp / f"grpo-{'cache' if self.cache else 'nocache'}.toml"
        config.write_text(
            "[repl]\ncommand = " + json.dumps(command) + "\n"
            f"[pool]\nworkers = {self.workers}\nmin_warm = {self.workers}\ndefault_timeout_s = 120\n"
            f"[cache]\nenabled = {'true' if self.cache else 'false'}\nmemory_mb = 256\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "leanrpc.cli", "serve", "--config", str(config), "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=open(self.tmp / f"{config.stem}.log", "wb"),
        )
        await _wait_port(self.port, self.process, 60, "leanrpc server")

    def stop(self) -> None:
        if self.process is not None:
            _stop_process(self.process)


async def measure(server: Server, items: list[workloads.Item], concurrent_groups: int, completions: int) -> dict:
    from leanrpc.client import AsyncClient

    client = AsyncClient(f"127.0.0.1:{server.port}", max_retries=2)
    try:
        await client.verify_batch([("warm", items[0].code.split("\n\n", 1)[0] + "\n\ntheorem w : True := trivial\n")])
        groups = [items[i:i + completions] for i in range(0, len(items), completions)]
        semaphore = asyncio.Semaphore(concurrent_groups)

        async def one_group(group):
            async with semaphore:
                return await client.verify([(i.id, i.code) for i in group], progress=False)

        started = time.monotonic()
        answered = await asyncio.gather(*(one_group(g) for g in groups))
        wall = time.monotonic() - started
    finally:
        await client.close()
    results = [r for group in answered for r in group]
    sources: dict[str, int] = {}
    for r in results:
        sources[r.cache_source or "elaborated"] = sources.get(r.cache_source or "elaborated", 0) + 1
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {"wall_s": wall, "throughput": len(results) / wall, "answers": len(results), "sources": sources,
            "statuses": statuses, "verdicts": {r.id: r.status for r in results}}


async def run(args) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="grpo-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for dup in args.dup_rates:
            items = grpo_items(args.statements, args.completions, dup / 100, scale=args.scale, seed=args.seed)
            row = {"dup_rate": dup, "duplicates": duplicate_share(items), "items": len(items)}
            for cache in (False, True):  # side by side, same items, fresh servers
                server = Server(tmp, workers=args.workers, cache=cache, scale=args.scale)
                await server.start()
                try:
                    row["cache" if cache else "nocache"] = await measure(server, items, args.concurrent_groups,
                                                                         args.completions)
                finally:
                    server.stop()
            same = row["cache"].pop("verdicts") == row["nocache"].pop("verdicts")
            row["same_verdicts"] = same
            row["speedup"] = row["cache"]["throughput"] / row["nocache"]["throughput"]
            rows.append(row)
            print(f"dup {dup:>3}% (measured {row['duplicates']:.0%}): uncached {row['nocache']['throughput']:.1f}/s, "
                  f"cached {row['cache']['throughput']:.1f}/s, x{row['speedup']:.2f}, same verdicts: {same}, "
                  f"sources {row['cache']['sources']}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| duplicate rate (measured) | items | uncached req/s | cached req/s | cached / uncached | ideal 1/(1-d) | answered from cache or in-flight | same verdicts |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        reused = r["items"] - r["cache"]["sources"].get("elaborated", 0)
        lines.append(f"| {r['dup_rate']}% ({r['duplicates']:.1%}) | {r['items']} | {r['nocache']['throughput']:.2f} | "
                     f"{r['cache']['throughput']:.2f} | **{r['speedup']:.2f}x** | {1 / (1 - r['duplicates']):.2f}x | "
                     f"{reused} | {r['same_verdicts']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--statements", type=int, default=4)
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--dup-rates", type=int, nargs="+", default=[0, 25, 50])
    parser.add_argument("--concurrent-groups", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scale", type=float, default=workloads.DEFAULT_SCALE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args))
    print()
    print(f"command: python -m benchmarks.grpo {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), {datetime.date.today()}")
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
