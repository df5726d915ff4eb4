"""Proof-search workload on the Prover service (issue 18 item 7).

Best-first search (leanrpc.client.best_first_search over Expand) on miniF2F
statements (shared/datasets/minif2f-lean4-yangky11, Test split, as written: `:= by
sorry`), with a fixed
tactic list per state (no model), `--concurrency` searches at once, against
a real server on loopback with `--workers` stand-in workers. Reports
expansions per second and, with `--kill-every S`, how many states were
rebuilt after worker kills (kill -9 of a random busy worker every S seconds).

    python benchmarks/search_bench.py --statements 100 --workers 1 2 4 --concurrency 8
    python benchmarks/search_bench.py --statements 100 --workers 4 --kill-every 1.0

LeanInteract is not installed here, so the in-process comparison of the
issue is not run (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from leanrpc.client import AsyncClient, best_first_search  # noqa: E402
from leanrpc.app import create_server  # noqa: E402
from testkit import loopback_config  # noqa: E402

DATASET = ROOT.parent / "shared" / "datasets" / "minif2f-lean4-yangky11" / "MiniF2F" / "Test"
TACTICS = ["intro h", "constructor", "rw [h]", "unfold f", "norm_num", "linarith", "nlinarith [sq_nonneg x]"]


def statements(count: int) -> list[str]:
    out = []
    for path in sorted(DATASET.glob("*.lean"))[:count]:
        out.append(path.read_text())
    return out


async def run(workers: int, codes: list[str], concurrency: int, kill_every: float, max_expansions: int) -> dict:
    app = await create_server(loopback_config(workers, pool__default_timeout_s=30))
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=5)
    slots = asyncio.Semaphore(concurrency)
    totals = {"expansions": 0, "found": 0, "refuted": 0}
    kills = 0
    stop = asyncio.Event()

    async def one(code: str) -> None:
        async with slots:
            result = await best_first_search(client, code, lambda goals: TACTICS, max_expansions=max_expansions,
                                             width=4)
            totals["expansions"] += result.expansions
            totals["found"] += result.proof_text is not None
            totals["refuted"] += result.refuted

    async def killer() -> None:
        nonlocal kills
        rng = random.Random(1)
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), kill_every)
            except asyncio.TimeoutError:
                busy = [w for w in app.pool.workers if w.busy and w.pid]
                if busy:
                    os.kill(rng.choice(busy).pid, signal.SIGKILL)
                    kills += 1

    try:
        started = time.perf_counter()
        task = asyncio.ensure_future(killer()) if kill_every > 0 else None
        await asyncio.gather(*(one(code) for code in codes))
        elapsed = time.perf_counter() - started
        stop.set()
        if task is not None:
            await task
        stats = app.prover.registry.stats
        return {
            "workers": workers, "elapsed_s": elapsed, "expansions": totals["expansions"],
            "per_s": totals["expansions"] / elapsed, "found": totals["found"], "refuted": totals["refuted"],
            "kills": kills, "rebuilt": stats.states_rebuilt, "replayed_tactics": stats.replayed_tactics,
        }
    finally:
        await client.close()
        await app.stop(2.0)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--statements", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--kill-every", type=float, default=0.0)
    parser.add_argument("--max-expansions", type=int, default=32)
    args = parser.parse_args()
    codes = statements(args.statements)
    print(f"# search_bench: {len(codes)} miniF2F statements, {len(TACTICS)} tactics per state, "
          f"{args.concurrency} searches at once, stand-in workers; {platform.node()} {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d')}")
    print("| workers | expansions | seconds | expansions/s | found | refuted | kills | states rebuilt |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for workers in args.workers:
        r = await run(workers, codes, args.concurrency, args.kill_every, args.max_expansions)
        print(f"| {r['workers']} | {r['expansions']} | {r['elapsed_s']:.1f} | {r['per_s']:.0f} | {r['found']} | "
              f"{r['refuted']} | {r['kills']} | {r['rebuilt']} |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
