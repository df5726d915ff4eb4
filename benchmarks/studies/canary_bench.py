"""Canaries against a planted liar, and what they cost (issue 43 item 5).

    python -m benchmarks.studies.canary_bench --trials 20 --items 120 --rounds 2

Two parts, one run:

1. Wrong VALIDs before the catch. One worker runs the trapdoor REPL of
   tests/hostile in `lie-after-trap` mode: an honest stand-in until client 0
   sends a snippet with `TRAPDOOR` (code that got past the policy), then it
   strips every error (and sorryAx) from later answers, so each wrong proof
   comes back VALID. After the trap, wrong proofs (unknown lemma: INVALID on an
   honest worker) are sent one at a time, round-robin from `--clients` clients
   (own tokens, so separate identities), until the worker is poisoned. Counted
   per trial: wrong VALIDs that reached client 0 (the one whose code ran) and
   other clients. Then the same with client 0 alone (only the rate can catch
   it), and with switch canaries off (the rate alone, every client). The
   replacement worker is honest until the next trial's trap.
2. Throughput. The same workload (`--items` miniF2F items with the workloads'
   Kimina-scaled costs) through the server on 2 workers, canaries off and at
   the defaults, with one client and with `--clients` clients at once,
   alternating in `--rounds` rounds; the best round of each is reported.

May import: benchmarks.workloads, leanrpc (app, client, config).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks import workloads

ROOT = Path(__file__).resolve().parents[2]
TRAPDOOR = [sys.executable, str(ROOT / "tests" / "hostile" / "trapdoor_repl.py")]
WRONG = "exact Nat.nonexistent_lemma x"


def _config(workers: int, tokens: list[str], command: list[str] | None = None, **canary):
    from leanrpc.config import Config

    config = Config()
    config.server.port = 0
    config.pool.workers = workers
    config.pool.default_timeout_s = 120
    config.limits.max_system_memory_percent = 0
    config.cache.enabled = False  # every request reaches a worker
    config.sandbox.mode = "off"
    config.server.auth_tokens = tokens
    if command is not None:
        config.repl.command = command
    for key, value in canary.items():
        setattr(config.canary, key, value)
    return config


def _theorem(n: int, proof: str) -> str:
    return f"import Mathlib\n\ntheorem t{n} (x : Nat) : x + {n} = x + {n} := by\n  {proof}\n"


async def _liar_trials(trials: int, clients: int, only_owner: bool, **canary) -> list[tuple]:
    """(wrong VALIDs to client 0, wrong VALIDs to the others, requests) per trial."""
    from leanrpc.app import create_server
    from leanrpc.client import AsyncClient

    tokens = [f"bench-client-{i}-token" for i in range(clients)]
    app = await create_server(_config(1, tokens, [*TRAPDOOR, "lie-after-trap"], **canary))
    address = f"127.0.0.1:{app.port}"
    users = [AsyncClient(address, token=t, max_retries=0) for t in tokens]
    restarts = app.pool.stats.restarts
    n, out = 0, []
    try:
        for _trial in range(trials):
            caught = restarts.get("poisoned", 0)
            n += 1
            await users[0].verify([("trap", _theorem(n, "rfl") + "-- TRAPDOOR\n")])
            own = others = sent = 0
            while restarts.get("poisoned", 0) == caught and sent < 1000:
                who = 0 if only_owner else sent % clients
                n += 1
                [result] = await users[who].verify([(f"w{n}", _theorem(n, WRONG))])
                sent += 1
                if result.status == "VALID":
                    own, others = (own + 1, others) if who == 0 else (own, others + 1)
            out.append((own, others, sent))
    finally:
        for user in users:
            await user.close()
        await app.stop(2.0)
    return out


async def _throughput(codes: list[str], clients: int, **canary) -> tuple[float, int, float]:
    """(snippets per second, canaries sent, share of the workers' time spent on
    canaries) for `codes` split over `clients` clients."""
    from leanrpc.app import create_server
    from leanrpc.client import AsyncClient

    tokens = [f"bench-client-{i}-token" for i in range(clients)]
    app = await create_server(_config(2, tokens, **canary))
    address = f"127.0.0.1:{app.port}"
    users = [AsyncClient(address, token=t, max_retries=0) for t in tokens]
    try:
        await users[0].verify([("warm", codes[0])])
        shares = [codes[i::clients] for i in range(clients)]
        started = time.perf_counter()
        await asyncio.gather(
            *(
                user.verify([(f"c{k}-{i}", code) for i, code in enumerate(share)])
                for k, (user, share) in enumerate(zip(users, shares))
            )
        )
        elapsed = time.perf_counter() - started
        stats = app.pool.runner.canaries.stats
        return len(codes) / elapsed, stats.sent, stats.seconds / (elapsed * 2)
    finally:
        for user in users:
            await user.close()
        await app.stop(2.0)


def _summary(rows: list[tuple]) -> str:
    own = [r[0] for r in rows]
    others = [r[1] for r in rows]
    sent = [r[2] for r in rows]
    return (
        f"| {statistics.mean(own):.2f} (max {max(own)}) | {statistics.mean(others):.2f} "
        f"(max {max(others)}) | {statistics.mean(sent):.1f} |"
    )


async def main(args) -> None:
    os.environ.pop("LEANRPC_TOKENS", None)
    print(f"canary_bench: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("\n| scenario | wrong VALIDs to client 0, mean | to other clients, mean | requests |")
    print("| --- | ---: | ---: | ---: |")
    cases = [
        (f"defaults (rate 0.05, switch on), {args.clients} clients round-robin", False, {}),
        ("defaults, client 0 alone", True, {}),
        (f"rate 0.05, switch off, {args.clients} clients", False, {"on_client_switch": False}),
        (f"canaries off, {args.clients} clients (capped at 1000)", False, {"enabled": False}),
    ]
    for label, only_owner, canary in cases if not args.skip_liar else []:
        trials = 1 if canary.get("enabled") is False else args.trials
        rows = await _liar_trials(trials, args.clients, only_owner, **canary)
        print(f"| {label} {_summary(rows)}")

    items = workloads.load("minif2f", limit=args.items)
    codes = [item.code for item in items]
    settings = {
        "off, 1 client": (1, {"enabled": False}),
        "defaults, 1 client": (1, {}),
        f"off, {args.clients} clients": (args.clients, {"enabled": False}),
        f"defaults, {args.clients} clients": (args.clients, {}),
    }
    best: dict[str, tuple[float, int, float]] = {}
    for _round in range(args.rounds):
        for label, (clients, canary) in settings.items():
            measured = await _throughput(codes, clients, **canary)
            if label not in best or measured[0] > best[label][0]:
                best[label] = measured
    print(
        f"\n| canaries | snippets/s (best of {args.rounds}) | canaries sent "
        "| workers' time on canaries | vs off |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, (rate, sent, share) in best.items():
        off = best[label.replace("defaults", "off")][0]
        print(f"| {label} | {rate:.1f} | {sent} | {share:.1%} | {rate / off:.3f}x |")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--items", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-liar", action="store_true", help="the throughput part only")
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
