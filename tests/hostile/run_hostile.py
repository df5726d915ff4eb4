"""The full hostile run (issue 15): 10,000 honest snippets interleaved with
100 forging ones, through the real Pool and VerifyService.

    python tests/hostile/run_hostile.py [snippets] [forgers] [workers] [concurrency] [fence]

`fence` is "on" (default) or "off" (the control: what the forgers achieve
without the fence).

Prints the tally (wrong verdicts, forging snippets answered VALID, statuses,
worker restarts by cause, wall time); exits 1 on any wrong verdict.
tests/hostile/test_forged_verdicts.py runs a CI-sized version of the same.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from hostile_support import interleaved_run, start_service  # noqa: E402


async def main(
    snippets: int, forgers: int, workers: int, concurrency: int, fence: str = "on"
) -> int:
    started = time.monotonic()
    service = await start_service(workers=workers, repl__fence=fence)
    try:
        tally = await interleaved_run(
            service, snippets=snippets, forgers=forgers, concurrency=concurrency
        )
        restarts = {k: v for k, v in service.pool.stats.restarts.items() if v}
        retries = service.pool.stats.retries
        fresh = service.pool.stats.fresh_retries
    finally:
        await service.pool.close(2.0)
    print(
        f"fence {fence}: snippets {snippets} honest + {forgers} forging, {workers} workers, {concurrency} callers, "
        f"{time.monotonic() - started:.1f} s"
    )
    print(f"wrong verdicts: {len(tally.wrong)}  forging snippets VALID: {len(tally.forger_valid)}")
    print(f"honest statuses: {dict(tally.statuses)}")
    print(f"forging statuses: {dict(tally.forger_statuses)}")
    print(
        f"worker restarts by cause: {restarts}; pool retries: {retries} "
        f"({fresh} uncharged, on a fresh process)"
    )
    for item in tally.wrong[:10]:
        print("WRONG", item)
    return 1 if tally.wrong or tally.forger_valid else 0


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:5]]
    numbers += [10_000, 100, 2, 8][len(numbers) :]
    fence = sys.argv[5] if len(sys.argv) > 5 else "on"
    raise SystemExit(asyncio.run(main(*numbers, fence)))
