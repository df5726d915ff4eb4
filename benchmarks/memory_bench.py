"""Issue 44: server memory before and after the byte budget and session charging, side by side.

    python benchmarks/memory_bench.py --before ../main/server [--requests 200]

`--before` is the server/ folder of a checkout without the change (run with
PYTHONPATH pointing there); "after" is this checkout. Each case starts a
fresh server process (benchmarks/memproc.py) with the stand-in REPL, one
worker, and reads its peak RSS (VmHWM, reset before the case):

* parallel bodies: 32 REST bodies of 60 MB at once from one peer (each
  refused per snippet by server.max_code_chars, as in the issue);
* session fill: one client records 1 MB commands in one session until it is
  refused (ASCII, then 4-byte characters), with the defaults of each version;
* budget cost: the budget's own work per body, timed in-process; and the miniF2F proofs (benchmarks/workloads.py, no simulated REPL
  cost) sent one per REST request by 4 concurrent clients; mean ms per request.
  Before and after alternate twice and the best of each is kept.

Prints a Markdown table for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import workloads  # noqa: E402
from benchmarks.memproc import ServerProcess, check_body, mb, post, post_parallel  # noqa: E402


def parallel_bodies(server_dir: str | None) -> str:
    with ServerProcess(server_dir=server_dir) as server:
        post(server.http, "/api/check", check_body("theorem t : True := trivial\n"))
        body = check_body("a" * (60 * 2**20))
        before = server.reset_peak()
        answers = post_parallel(server.http, body, 32)
        growth = server.peak() - before
    statuses = collections.Counter(
        str(a[0]) if isinstance(a, tuple) else type(a).__name__ for a in answers
    )
    answered = ", ".join(f"{n} x {status}" for status, n in sorted(statuses.items()))
    return f"+{mb(growth):,.0f} MB ({answered})"


async def _fill(address: str, char: str) -> tuple[int, str]:
    from leanrpc.client import AsyncClient, ClientError

    client = AsyncClient(address, token="memory-test-token", max_retries=0)
    code = 0
    try:
        opened = await client.open_session(
            "import Mathlib\n\ntheorem t0 : True := trivial\n", check_axioms=False
        )
        for n in range(100_000):
            text = f"theorem c{n} : True := trivial\n-- " + char * (2**20 // len(char.encode()))
            try:
                await client.run_in_session(opened.session, text + "\n", check_axioms=False)
            except ClientError as exc:
                return code, str(exc).split(";")[0]
            code += len(text.encode()) + 1
    finally:
        await client.close()
    return code, "never refused"


def session_fill(server_dir: str | None, char: str) -> str:
    settings = {"server.max_code_chars": 2_000_000}
    with ServerProcess(settings, server_dir=server_dir) as server:
        before = server.reset_peak()
        code, _why = asyncio.run(_fill(server.grpc, char))
        growth = server.peak() - before
    return f"+{mb(growth):,.0f} MB for {mb(code):.0f} MB of code ({growth / max(code, 1):.1f}x)"


def budget_cost(server_dir: str | None, bodies: list[bytes]) -> float:
    """Mean ms per request, 4 clients at once over `bodies`."""
    with ServerProcess(server_dir=server_dir) as server:
        post(server.http, "/api/check", bodies[0])  # warm the header
        queue = list(bodies)
        lock = threading.Lock()
        failures = []

        def client() -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    body = queue.pop()
                status, _h, _p = post(server.http, "/api/check", body)
                if status != 200:
                    failures.append(status)

        started = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"requests failed: {failures[:5]}")
    return 1000 * elapsed / len(bodies)


def intake_work_us(bodies: list[bytes], repeats: int = 20) -> float:
    """The budget's own work per body, in-process: the copy into one bytearray, the decode
    bound, and a ticket's acquire and release (edge/budget.py), in microseconds."""
    from leanrpc.edge.budget import ByteBudget, decoded_bound

    budget = ByteBudget(512 * 2**20, 2048 * 2**20)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for body in bodies:
            with budget.ticket("127.0.0.1") as ticket:
                ticket.acquire(len(body))
                kept = bytearray(len(body))
                kept[:] = body
                ticket.acquire(decoded_bound(kept))
        best = min(best, (time.perf_counter() - started) / len(bodies))
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="server/ folder of the version before")
    parser.add_argument("--requests", type=int, default=200, help="miniF2F requests per run")
    parser.add_argument("--rounds", type=int, default=2, help="before/after alternations")
    parser.add_argument("--cost-only", action="store_true", help="only the budget-cost rows")
    args = parser.parse_args()
    before = str(Path(args.before).resolve())
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    cases = [] if args.cost_only else [("ASCII", "a"), ("4-byte characters", "😀")]
    if cases:
        bodies_row = parallel_bodies(before), parallel_bodies(None)
        print(
            f"| 32 parallel 60 MB REST bodies, one peer: peak RSS | {bodies_row[0]} | {bodies_row[1]} |"
        )
    for label, char in cases:
        print(
            f"| one session filled until refused, {label}: peak RSS | "
            f"{session_fill(before, char)} | {session_fill(None, char)} |",
            flush=True,
        )
    items = workloads.load("minif2f", scale=1e-6)[: args.requests]
    bodies = [check_body(item.code) for item in items]
    runs = {"before": [], "after": []}
    for _ in range(args.rounds):
        runs["before"].append(budget_cost(before, bodies))
        runs["after"].append(budget_cost(None, bodies))
    b, a = min(runs["before"]), min(runs["after"])
    print(
        f"| miniF2F, {len(bodies)} REST requests, 4 clients: ms per request (best of {args.rounds}; "
        f"runs {', '.join(f'{x:.2f}' for x in runs['before'])} / "
        f"{', '.join(f'{x:.2f}' for x in runs['after'])}) | {b:.2f} | {a:.2f} ({a / b:.3f}x) |"
    )
    print(
        f"| the budget's own work per miniF2F body (copy, decode bound, acquire and release; "
        f"in-process, best of 20) | none | {intake_work_us(bodies):.1f} us |"
    )
    print(
        f"(mean of all runs: {statistics.mean(runs['before']):.2f} / {statistics.mean(runs['after']):.2f})"
    )


if __name__ == "__main__":
    main()
