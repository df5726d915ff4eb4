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

With `--kimina`, Kimina Lean Server (benchmarks/.peers-venv) gets the same
items in the same run, one `POST /api/check` per group (its batch API); it
has no result cache, so it is the peer's figure at each duplicate rate.

`grpo_items()` is importable by the load driver (benchmarks.load) as a
workload; `main()` runs it standalone.

May import: benchmarks.workloads, benchmarks.config, benchmarks.targets, leanrpc.client.
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
from .config import RunConfig
from .targets.common import leanrpc_table, serve_leanrpc
from .targets.common import stop_process as _stop_process
from .targets.common import wait_port as _wait_port
from .targets.http import HttpConnection
from .targets.kimina import KiminaTarget, status_of


def grpo_items(
    statements: int,
    completions: int,
    dup_rate: float,
    *,
    scale: float = workloads.DEFAULT_SCALE,
    seed: int = 0,
) -> list[workloads.Item]:
    """`statements` groups of `completions` items, a `dup_rate` share duplicated."""
    if not 0 <= dup_rate < 1:
        raise ValueError("dup_rate must be in [0, 1)")
    base = workloads.load("kimina", scale=scale)
    rng = random.Random(seed)
    chosen = rng.sample(base, statements)
    items: list[workloads.Item] = []
    for s, proof in enumerate(chosen):
        # Exactly round(d * n) duplicates per group, in shuffled order.
        unique = [
            proof.code.rstrip("\n") + f"\n-- completion {s}.{k}\n"
            for k in range(completions - round(dup_rate * completions))
        ]
        group = unique + [rng.choice(unique) for _ in range(completions - len(unique))]
        rng.shuffle(group)
        for k, code in enumerate(group):
            items.append(
                workloads.Item(id=f"g{s}-c{k}", code=code, burn_s=proof.burn_s, source="grpo")
            )
    return items


def duplicate_share(items: list[workloads.Item]) -> float:
    return 1 - len({i.code for i in items}) / len(items)


class Server:
    """A `leanrpc serve` process on the stand-in with Kimina-scaled import costs."""

    def __init__(self, tmp: Path, *, workers: int, cache: bool, scale: float) -> None:
        self.tmp, self.workers, self.cache, self.scale = tmp, workers, cache, scale
        self.port = 0  # chosen by serve_leanrpc at start
        self.process: subprocess.Popen | None = None

    async def start(self) -> None:
        table = leanrpc_table(self.workers, self.scale)
        table["pool"]["default_timeout_s"] = 120
        table["cache"] = {"enabled": self.cache, "memory_mb": 256}
        name = f"grpo-{'cache' if self.cache else 'nocache'}"
        self.process, self.port = serve_leanrpc(table, self.tmp, name=name)
        await _wait_port(self.port, self.process, 60, "leanrpc server")

    def stop(self) -> None:
        if self.process is not None:
            _stop_process(self.process)


async def measure(
    server: Server, items: list[workloads.Item], concurrent_groups: int, completions: int
) -> dict:
    from leanrpc.client import AsyncClient

    client = AsyncClient(f"127.0.0.1:{server.port}", max_retries=2)
    try:
        await client.verify_batch(
            [("warm", items[0].code.split("\n\n", 1)[0] + "\n\ntheorem w : True := trivial\n")]
        )
        groups = [items[i : i + completions] for i in range(0, len(items), completions)]
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
    row = _tally([(r.id, r.status, r.cache_source) for r in results], wall)
    # REPL seconds this run really spent: results answered from the cache or
    # in flight carry the original run's timings, so they are not counted.
    row["repl_s"] = sum(r.time_header_s + r.time_body_s for r in results if not r.cache_source)
    return row


def _tally(results: list[tuple[str, str, str]], wall: float) -> dict:
    """(id, status, cache source) triples -> the row fields shared by every server."""
    sources: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for _, status, source in results:
        sources[source or "elaborated"] = sources.get(source or "elaborated", 0) + 1
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "wall_s": wall,
        "throughput": len(results) / wall,
        "answers": len(results),
        "sources": sources,
        "statuses": statuses,
        "verdicts": {i: status for i, status, _ in results},
    }


async def measure_kimina(
    target: KiminaTarget, items: list[workloads.Item], concurrent_groups: int, completions: int
) -> dict:
    """Kimina's server, sent what a trainer sends it: one `POST /api/check` per group of completions."""
    warm = items[0].code.split("\n\n", 1)[0] + "\n\ntheorem w : True := trivial\n"
    groups = [items[i : i + completions] for i in range(0, len(items), completions)]
    semaphore = asyncio.Semaphore(concurrent_groups)
    connections = [HttpConnection(target.port) for _ in range(concurrent_groups)]

    async def one_group(group):
        async with semaphore:
            connection = connections.pop()
            try:
                payload = {
                    "snippets": [{"id": i.id, "code": i.code} for i in group],
                    "timeout": 120,
                    "reuse": True,
                }
                code, body = await connection.post("/api/check", payload, 600)
            finally:
                connections.append(connection)
        if code != 200 or not body:
            return [(i.id, f"http:{code}", "") for i in group]
        return [(r["id"], status_of(r), "") for r in body["results"]]

    try:
        code, _ = await connections[0].post(
            "/api/check",
            {"snippets": [{"id": "warm", "code": warm}], "timeout": 120, "reuse": True},
            120,
        )
        if code != 200:
            raise RuntimeError(f"Kimina warm-up answered HTTP {code}")
        started = time.monotonic()
        answered = await asyncio.gather(*(one_group(g) for g in groups))
        wall = time.monotonic() - started
    finally:
        for connection in connections:
            connection.close()
    return _tally([r for group in answered for r in group], wall)


async def run(args) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="grpo-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for dup in args.dup_rates:
            items = grpo_items(
                args.statements, args.completions, dup / 100, scale=args.scale, seed=args.seed
            )
            row = {"dup_rate": dup, "duplicates": duplicate_share(items), "items": len(items)}
            # Side by side, same items, fresh servers; the order alternates from one rate to the next
            # so that machine noise does not always favour the same server.
            order = ["nocache", "cache"] + (["kimina"] if args.kimina else [])
            if len(rows) % 2:
                order.reverse()
            for name in order:
                if name == "kimina":
                    target = KiminaTarget(
                        RunConfig(target="kimina", workers=args.workers, scale=args.scale), tmp
                    )
                    await target.start()
                    try:
                        row["kimina"] = await measure_kimina(
                            target, items, args.concurrent_groups, args.completions
                        )
                    finally:
                        await target.stop()
                    continue
                server = Server(tmp, workers=args.workers, cache=name == "cache", scale=args.scale)
                await server.start()
                try:
                    row[name] = await measure(
                        server, items, args.concurrent_groups, args.completions
                    )
                finally:
                    server.stop()
            reference = row["nocache"].pop("verdicts")
            same = row["cache"].pop("verdicts") == reference
            row["same_verdicts"] = same
            row["speedup"] = row["cache"]["throughput"] / row["nocache"]["throughput"]
            row["repl_saving"] = row["nocache"]["repl_s"] / max(row["cache"]["repl_s"], 1e-9)
            line = (
                f"dup {dup:>3}% (measured {row['duplicates']:.0%}): uncached {row['nocache']['throughput']:.1f}/s, "
                f"cached {row['cache']['throughput']:.1f}/s, x{row['speedup']:.2f} (REPL seconds x{row['repl_saving']:.2f}), "
                f"same verdicts: {same}, "
                f"sources {row['cache']['sources']}"
            )
            if "kimina" in row:
                row["kimina_same_verdicts"] = row["kimina"].pop("verdicts") == reference
                row["cached_vs_kimina"] = row["cache"]["throughput"] / row["kimina"]["throughput"]
                line += (
                    f"; kimina {row['kimina']['throughput']:.1f}/s (cached leanrpc x{row['cached_vs_kimina']:.2f}),"
                    f" statuses {row['kimina']['statuses']}, same verdicts: {row['kimina_same_verdicts']}"
                )
            rows.append(row)
            print(line, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    kimina = any("kimina" in r for r in rows)
    head = (
        "| duplicate rate (measured) | items | uncached req/s | cached req/s | cached / uncached | ideal 1/(1-d) |"
        " of ideal | REPL s uncached / cached | answered from cache or in-flight | same verdicts |"
    )
    rule = "|---|---|---|---|---|---|---|---|---|---|"
    if kimina:
        head += " Kimina req/s | cached leanrpc / Kimina | Kimina same verdicts |"
        rule += "---|---|---|"
    lines = [head, rule]
    for r in rows:
        reused = r["items"] - r["cache"]["sources"].get("elaborated", 0)
        line = (
            f"| {r['dup_rate']}% ({r['duplicates']:.1%}) | {r['items']} | {r['nocache']['throughput']:.2f} | "
            f"{r['cache']['throughput']:.2f} | **{r['speedup']:.2f}x** | {1 / (1 - r['duplicates']):.2f}x | "
            f"{r['speedup'] * (1 - r['duplicates']):.0%} | "
            f"{r['nocache']['repl_s']:.1f} / {r['cache']['repl_s']:.1f} = {r['repl_saving']:.2f}x | "
            f"{reused} | {r['same_verdicts']} |"
        )
        if "kimina" in r:
            line += f" {r['kimina']['throughput']:.2f} | {r['cached_vs_kimina']:.2f}x | {r['kimina_same_verdicts']} |"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--statements", type=int, default=4)
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--dup-rates", type=int, nargs="+", default=[0, 25, 50])
    parser.add_argument("--concurrent-groups", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scale", type=float, default=workloads.DEFAULT_SCALE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kimina",
        action="store_true",
        help="also run Kimina's server (benchmarks/.peers-venv) on the same items, in the same run",
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args))
    print()
    print(
        f"command: python -m benchmarks.grpo {' '.join(argv if argv is not None else sys.argv[1:])}"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores (shared), {datetime.date.today()}"
    )
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
