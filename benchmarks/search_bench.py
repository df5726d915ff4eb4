"""Proof-search workload: leanrpc's Prover vs LeanInteract in-process (issue 18 item 7).

The same best-first search (benchmarks/search_tree.py: fixed tactic list, fewest goals
first, `--width` states per round, at most `--max-expansions` per statement, answers taken
in request order) over the first `--statements` miniF2F Test statements
(shared/datasets/minif2f-lean4-yangky11, `:= by sorry` as written), on two targets,
alternating within one run:

* leanrpc: `leanrpc serve` (a separate process) with W stand-in workers for each W of
  `--workers`; `--concurrency` searches at once, each one Expand stream per round (a state's
  tactics in one request, its results in one message: `pack_results`); a found proof is the
  Prover's whole-proof-verified COMPLETED. `--unpacked` adds, for each W, a run whose client
  asks one message per tactic, as before `pack_results`, so both show side by side.
* LeanInteract 0.11.6 in-process (benchmarks/.peers-venv): P lanes, each a thread with its
  own REPL process (one REPL per running search), P = each W; the whole-proof check is a
  Command with the assembled proof in the header env.

Reports expansions/s, expansions/s per worker (per REPL process), the ratio of leanrpc's
per-worker rate to LeanInteract's at the same process count, CPU per expansion outside the
REPLs (leanrpc's server and search driver, LeanInteract's runner process) and, apart,
leanrpc's server's own share, and whether both targets searched the same trees (per
statement: expansion count, found path and a digest of every expansion's path, status and
goals). `--kill-every N` adds a leanrpc run with the largest W that kills a random REPL with
SIGKILL after every N answered expansions (a count, so the run kills as often on a fast
machine as on a slow one) and counts the expansions whose state was rebuilt (only while no
REPL is booting, as the server's GetServerInfo says: killing them mid-boot trips the boot
circuit breaker instead, another test). With no statements (none found under
$LEANRPC_SHARED, or `--statements 0`) it stops with one line and exit status 1.

    python benchmarks/search_bench.py --statements 100 --workers 1 2 4 --concurrency 8
    python benchmarks/search_bench.py --statements 100 --workers 4 --kill-every 50 --no-leaninteract
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import search_tree  # noqa: E402
from benchmarks.targets.common import (  # noqa: E402
    apply_settings,
    serve_leanrpc,
    stop_process,
    wait_port,
)
from benchmarks.targets.leaninteract_search import run_leaninteract_search  # noqa: E402
from leanrpc.client import AsyncClient  # noqa: E402


def _cpu(process: psutil.Process) -> tuple[float, float]:
    """(the process's CPU seconds, its live descendants' CPU seconds)."""
    t = process.cpu_times()
    repl = 0.0
    for child in process.children(recursive=True):
        try:
            c = child.cpu_times()
            repl += c.user + c.system
        except psutil.Error:
            pass
    return t.user + t.system, repl


async def _search(
    client: AsyncClient,
    name: str,
    code: str,
    tactics: list[str],
    width: int,
    max_expansions: int,
    answered=None,
    pack: bool = True,
) -> dict:
    proof = await client.start_proof(code)
    root = proof.states[0]
    tree = search_tree.BestFirst(
        root.state_id, root.goals, tactics, width=width, max_expansions=max_expansions
    )
    try:
        while pairs := tree.next_round():
            steps: list[search_tree.Step | None] = [None] * len(pairs)
            async for r in client.expand(pairs, pack=pack):
                steps[int(r.request_id)] = search_tree.Step(
                    r.status, r.state_id, tuple(r.goals), r.proof_text, r.rebuilt, r.error
                )
            if answered is not None:
                answered(len(pairs))
            missing = [k for k, s in enumerate(steps) if s is None]
            if missing:
                raise RuntimeError(f"{name}: expansions {missing} got no answer")
            tree.feed(steps)
    finally:
        await client.release_states(proof_ids=[proof.proof_id])
    out = tree.summary(name)
    # The Prover assembles the proof itself; ours must be the same text.
    out["assembled_same"] = (
        not tree.found
        or search_tree.assemble_by_sorry(code, root.start, root.end, list(tree.found))
        == tree.proof_text
    )
    return out


async def run_leanrpc(
    items: list[tuple[str, str]],
    workers: int,
    concurrency: int,
    tactics: list[str],
    *,
    width: int,
    max_expansions: int,
    kill_every: int = 0,
    timeout_s: float = 60.0,
    profile: str = "",
    settings: tuple[str, ...] = (),
    pack: bool = True,
) -> dict:
    """One leanrpc run: a fresh server, a warm-up search per worker, then every statement
    (`pack`: each request's results in one stream message, as the client does by default)."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-search-"))
    table = {
        "repl": {"command": [sys.executable, "-m", "leanrpc.standin"]},
        "pool": {"workers": workers, "min_warm": workers, "default_timeout_s": timeout_s},
        "limits": {"max_system_memory_percent": 0},
    }
    apply_settings(table, settings)
    # --profile-server: the server under cProfile (written when it exits on SIGTERM).
    prefix = ("-m", "cProfile", "-o", f"{profile}.w{workers}.prof") if profile else ()
    server, port = serve_leanrpc(table, tmp, prefix)
    client = None
    try:
        await wait_port(port, server, 60, "leanrpc server")
        client = AsyncClient(f"127.0.0.1:{port}", max_retries=5)
        # Warm-up (not measured): every worker has the header and preamble loaded.
        await asyncio.gather(
            *(_search(client, n, c, tactics, width, 8) for n, c in items[:workers])
        )
        slots = asyncio.Semaphore(concurrency)
        stop = asyncio.Event()
        kill_due = asyncio.Event()
        kills = 0
        expansions = 0

        def answered(n: int) -> None:
            # A kill is due after every `kill_every` answered expansions.
            nonlocal expansions
            expansions += n
            if kill_every > 0 and expansions >= (kills + 1) * kill_every:
                kill_due.set()

        async def one(name: str, code: str) -> dict:
            async with slots:
                try:
                    return await _search(
                        client, name, code, tactics, width, max_expansions, answered, pack
                    )
                except Exception as exc:  # noqa: BLE001 - reported per statement
                    return {
                        "name": name,
                        "expansions": 0,
                        "found": False,
                        "path": [],
                        "error": f"{type(exc).__name__}: {exc}",
                    }

        async def killer() -> None:
            nonlocal kills
            rng = random.Random(1)
            me = psutil.Process(server.pid)
            while not stop.is_set():
                waiters = [
                    asyncio.ensure_future(stop.wait()),
                    asyncio.ensure_future(kill_due.wait()),
                ]
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                for waiter in waiters:
                    waiter.cancel()
                if stop.is_set():
                    return
                repls = []
                for p in me.children(recursive=True):
                    try:
                        if "leanrpc.standin" in " ".join(p.cmdline()) and not p.children():
                            repls.append(p)
                    except psutil.Error:
                        pass
                # Only booted REPLs: killing one mid-boot only trips the boot circuit
                # breaker (UNAVAILABLE for everyone), which is not this test. Listed
                # before asking, so a REPL started after the answer is not among them.
                states = (await client.server_info()).worker_states
                if any(states.get(s, 0) for s in ("spawning", "probing")):
                    repls = []
                if not repls:
                    await asyncio.sleep(0.05)  # all booting: the kill stays due
                    continue
                try:
                    os.kill(rng.choice(repls).pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass
                if expansions < (kills + 1) * kill_every:
                    kill_due.clear()

        proc = psutil.Process(server.pid)
        server0, repl0 = _cpu(proc)
        client0 = time.process_time()
        started = time.perf_counter()
        task = asyncio.ensure_future(killer()) if kill_every > 0 else None
        searches = await asyncio.gather(*(one(n, c) for n, c in items))
        elapsed = time.perf_counter() - started
        stop.set()
        if task is not None:
            await task
        server1, repl1 = _cpu(proc)
        return {
            "target": "leanrpc",
            "workers": workers,
            "elapsed": elapsed,
            "searches": searches,
            "kills": kills,
            "driver_cpu_s": time.process_time() - client0,
            "server_cpu_s": server1 - server0,
            "repl_cpu_s": repl1 - repl0,
        }
    finally:
        if client is not None:
            await client.close()
        stop_process(server)
        shutil.rmtree(tmp, ignore_errors=True)


def totals(run: dict) -> dict:
    searches = run["searches"]
    expansions = sum(s["expansions"] for s in searches)
    processes = run["workers"]
    # CPU outside the REPLs: leanrpc's server and search driver; LeanInteract's runner process.
    # (REPL CPU is not comparable: leanrpc recycles workers mid-run, and a dead REPL's CPU is gone.)
    cpu = run.get("server_cpu_s", 0.0) + run.get("driver_cpu_s", 0.0)
    return {
        "expansions": expansions,
        "per_s": expansions / run["elapsed"],
        "per_worker_s": expansions / run["elapsed"] / processes,
        "found": sum(bool(s["found"]) for s in searches),
        "errors": sum("error" in s for s in searches),
        "rebuilt": sum(s.get("rebuilt", 0) for s in searches),
        "rejected": sum(s.get("rejected", 0) for s in searches),
        "cpu_ms_per_expansion": 1000 * cpu / max(expansions, 1),
        # Of that, leanrpc's server process alone (None for LeanInteract: no server).
        "server_cpu_ms_per_expansion": (
            1000 * run["server_cpu_s"] / max(expansions, 1) if "server_cpu_s" in run else None
        ),
    }


def same_trees(a: dict, b: dict) -> tuple[int, list[str]]:
    """(statements whose trees agree, names of those that differ)."""
    differ = []
    for x, y in zip(a["searches"], b["searches"]):
        keys = ("expansions", "found", "path", "tree")
        if any(x.get(k) != y.get(k) for k in keys):
            differ.append(x["name"])
    return len(a["searches"]) - len(differ), differ


async def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--statements", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--concurrency", type=int, default=8, help="leanrpc: searches at once")
    parser.add_argument("--width", type=int, default=search_tree.WIDTH)
    parser.add_argument("--max-expansions", type=int, default=search_tree.MAX_EXPANSIONS)
    parser.add_argument(
        "--tactic-cost",
        type=float,
        default=0.0,
        help="CPU seconds the stand-in burns per tactic run (a directive line in each tactic)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="rounds of alternating runs")
    parser.add_argument(
        "--kill-every",
        type=int,
        default=0,
        metavar="N",
        help="a leanrpc run that kills a REPL after every N answered expansions",
    )
    parser.add_argument("--no-leaninteract", action="store_true")
    parser.add_argument(
        "--unpacked",
        action="store_true",
        help="also a leanrpc run whose client asks one stream message per tactic (no pack_results)",
    )
    parser.add_argument("--json", help="write every run's figures here")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a leanrpc server setting, e.g. repl.fence=off (JSON values: numbers, true/false)",
    )
    parser.add_argument(
        "--profile-server",
        default="",
        metavar="PREFIX",
        help="run leanrpc's server under cProfile, writing PREFIX.wN.prof per run",
    )
    args = parser.parse_args(argv)
    items = search_tree.statements(args.statements)
    tactics = search_tree.tactic_list(args.tactic_cost)
    print(
        f"# search_bench: {len(items)} miniF2F statements, {len(tactics)} tactics per state, width {args.width}, "
        f"at most {args.max_expansions} expansions per statement, tactic cost {args.tactic_cost * 1000:g} ms, "
        f"leanrpc {args.concurrency} searches at once; {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}",
        flush=True,
    )
    print(
        "| target | workers (REPL processes) | expansions | seconds | expansions/s | per worker | found | "
        "states rebuilt | CPU ms/expansion outside the REPLs | of it, the server | same trees |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    runs: list[dict] = []
    common = dict(width=args.width, max_expansions=args.max_expansions)
    ours_only = dict(common, profile=args.profile_server, settings=tuple(args.set))

    def show(run: dict, reference: dict | None) -> None:
        t = totals(run)
        run["totals"] = t
        same = "-"
        if reference is not None and run is not reference:
            n, differ = same_trees(run, reference)
            run["same_trees"], run["differ"] = n, differ
            same = f"{n}/{len(run['searches'])}" + (
                f" (differ: {', '.join(differ[:3])})" if differ else ""
            )
        label = run["target"] + (
            f", kill -9 every {args.kill_every} expansions: {run['kills']} kills, "
            f"{t['rejected']} expansions rejected"
            if run.get("kills")
            else ""
        )
        server = t["server_cpu_ms_per_expansion"]
        print(
            f"| {label} | {run['workers']} | {t['expansions']} | {run['elapsed']:.1f} | {t['per_s']:.0f} | "
            f"{t['per_worker_s']:.0f} | {t['found']} | {t['rebuilt']} | {t['cpu_ms_per_expansion']:.2f} | "
            f"{'-' if server is None else f'{server:.2f}'} | {same} |",
            flush=True,
        )

    for _ in range(args.repeats):
        for workers in args.workers:
            ours = await run_leanrpc(items, workers, args.concurrency, tactics, **ours_only)
            unpacked = None
            if args.unpacked:
                # The same server, one stream message per tactic (before pack_results).
                unpacked = await run_leanrpc(
                    items, workers, args.concurrency, tactics, pack=False, **ours_only
                )
                unpacked["target"] = "leanrpc, one message per tactic"
            theirs = None
            if not args.no_leaninteract:
                theirs = run_leaninteract_search(
                    items, workers, tactic_cost=args.tactic_cost, **common
                )
                theirs.update(target="leaninteract", workers=workers)
            show(ours, theirs)
            if unpacked is not None:
                show(unpacked, ours)
            if theirs is not None:
                show(theirs, None)
                ratio = ours["totals"]["per_worker_s"] / theirs["totals"]["per_worker_s"]
                ours["ratio_per_worker"] = ratio
                print(
                    f"| ratio leanrpc / LeanInteract per worker | {workers} | | | | **{ratio:.2f}x** | | | | | |",
                    flush=True,
                )
            runs.extend([ours] + ([unpacked] if unpacked else []) + ([theirs] if theirs else []))
    if args.kill_every > 0:
        killed = await run_leanrpc(
            items,
            max(args.workers),
            args.concurrency,
            tactics,
            kill_every=args.kill_every,
            **ours_only,
        )
        reference = next((r for r in runs if r["target"] == "leanrpc"), None)
        show(killed, reference)
        runs.append(killed)
    for run in runs:
        reasons: dict[str, int] = {}
        for search in run["searches"]:
            for reason, n in search.get("rejected_errors", {}).items():
                reasons[reason] = reasons.get(reason, 0) + n
        if reasons:
            top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
            print(
                f"  {run['target']} w={run['workers']} rejected: "
                + "; ".join(f"{n} x {r!r}" for r, n in top)
            )
        if any(not s.get("assembled_same", True) for s in run["searches"]):
            print(
                f"! {run['target']} w={run['workers']}: the Prover's proof text differs from the assembled one"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    return {"runs": runs}


if __name__ == "__main__":
    asyncio.run(main())
