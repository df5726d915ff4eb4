"""Incremental reuse benchmark: prefix trie routing + the fork's incrementality.

Runs each workload against three pools side by side, each a fresh gRPC server
on loopback with the stand-in REPL (never real Lean) charging realistic,
scaled-down costs:

* ``off``     upstream-like REPL: no incrementality, most-recently-used routing;
* ``no-trie`` the fork (``--fork``, prefix reuse inside each REPL) but
              most-recently-used routing (``pool.prefix_routing = false``);
* ``trie``    the fork plus routing by the pool's prefix trie (the default).

Workloads:

* ``edit``  100 variants of a 200-line file, each changing only the last lemma
            (an editor re-checking after each change), `--editors` at a time;
* ``edit-multi`` the same with 4 files edited at once;
* ``edit-many`` 16 files of 120 lines, each edited 6 times, the edits of all
            files interleaved (a team, or an agent, working on a whole project):
            more files than workers, so where a file's edit lands matters;
* ``grpo``  64 completions of one theorem statement (RL rollouts).

Costs: ``--import-cost`` stands for `import Mathlib` (8 s-class, scaled by
``--scale``), ``--cost-per-kchar`` CPU seconds per 1000 elaborated characters
(the fork charges only the part after the reused prefix). Headers are loaded
before timing starts, so the numbers are steady-state.

    python benchmarks/reuse_bench.py            # full run (a few minutes on 2 cores)
    python benchmarks/reuse_bench.py --quick    # < 60 s, same structure
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import sys
import time

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from leanrpc.config import Config
from leanrpc.core.headers import split_header

MODES = ("off", "no-trie", "trie")
HEADER = "import Mathlib\nopen Nat\n\n"


def edit_file(lines: int, tag: str, variant: int) -> str:
    """A `lines`-line file of two-line lemmas; only the last lemma changes."""
    body = []
    for i in range((lines - 4) // 2):
        body.append(f"theorem {tag}_l{i} (a b : Nat) (h : a = b) : b + {i} = a + {i} := by")
        body.append("  simp [h]")
    body.append(f"theorem {tag}_last (n : Nat) : n + {variant} = {variant} + n := by")
    body.append("  omega")
    return HEADER + "\n".join(body) + "\n"


def grpo_completion(k: int, statement_lines: int) -> str:
    """One rollout: a shared statement (with its context), then a sampled proof."""
    context = [
        f"lemma ctx{i} (x : Nat) : x * {i + 1} = {i + 1} * x := by ring"
        for i in range(statement_lines)
    ]
    statement = "theorem target (a b c : Nat) (h₀ : a ≤ b) (h₁ : b ≤ c) : a ≤ c + 0 := by"
    tactics = [
        "omega",
        "simp; omega",
        "exact Nat.le_trans h₀ (by simpa using h₁)",
        "calc a ≤ b := h₀\n    _ ≤ c + 0 := by simpa",
    ]
    proof = "\n".join("  " + line for line in tactics[k % len(tactics)].split("\n"))
    steps = "\n".join(f"  have s{j} : a ≤ a + {j} := Nat.le_add_right a {j}" for j in range(k % 7))
    return (
        HEADER
        + "\n".join(context)
        + "\n"
        + statement
        + "\n"
        + (steps + "\n" if steps else "")
        + proof
        + "\n"
    )


def workloads(quick: bool) -> dict[str, list[tuple[str, str]]]:
    variants, lines, rollouts = (24, 120, 24) if quick else (100, 200, 64)
    edit = [(f"e{v}", edit_file(lines, "main", v)) for v in range(variants)]
    files = 4
    multi = [(f"m{v}", edit_file(lines, f"f{v % files}", v // files)) for v in range(variants)]
    grpo = [(f"g{k}", grpo_completion(k, 40 if quick else 60)) for k in range(rollouts)]
    many_files, many_edits = (8, 4) if quick else (16, 6)
    # round-robin: every file's next edit comes after one edit of each other file
    many = [
        (f"p{e}_{f}", edit_file(120, f"p{f}", e))
        for e in range(many_edits)
        for f in range(many_files)
    ]
    return {"edit": edit, "edit-multi": multi, "edit-many": many, "grpo": grpo}


def make_config(mode: str, args) -> Config:
    config = Config()
    config.cache.enabled = False  # every request elaborates (the cache is on by default)
    config.server.port = 0
    config.pool.workers = args.workers
    config.pool.default_timeout_s = 600
    config.limits.max_system_memory_percent = 0
    costs = ["--import-cost", str(args.import_cost), "--cost-per-kchar", str(args.cost_per_kchar)]
    fork = ["--fork"] if mode != "off" else []
    config.repl.command = [sys.executable, "-m", "leanrpc.standin", "--no-replay", *fork, *costs]
    config.repl.incrementality = "off" if mode == "off" else "on"
    config.pool.prefix_routing = mode == "trie"
    return config


async def _warm_up(app, client, n: int) -> None:
    """Loads the header on all n workers before timing (steady state): until n workers
    have answered with the header already warm (what the answers themselves say)."""
    warm: set[str] = set()
    for attempt in range(20):
        results = await client.verify_batch(
            [HEADER + f"example : {attempt} = {attempt} := rfl"] * (2 * n)
        )
        warm |= {r.worker for r in results if r.warm_header and r.worker}
        if len(warm) >= n:
            return
    raise RuntimeError("workers did not load the header")


async def run_mode(mode: str, items: list[tuple[str, str]], args) -> dict:
    app = await create_server(make_config(mode, args))
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        await _warm_up(app, client, args.workers)
        slots = asyncio.Semaphore(args.editors)

        async def one(sid: str, code: str):
            async with slots:
                [r] = await client.verify_batch([(sid, code)])
                return r

        started = time.monotonic()
        results = await asyncio.gather(*(one(sid, code) for sid, code in items))
        wall = time.monotonic() - started
        stats = app.pool.metrics(memory=False).stats
    finally:
        await client.close()
        await app.stop(5.0)
    bad = [r for r in results if r.status not in ("VALID", "INVALID", "SORRY")]
    if bad:
        raise RuntimeError(
            f"{mode}: {len(bad)} results failed, e.g. {bad[0].status}: {bad[0].error[:200]}"
        )
    bodies = {sid: split_header(code).padded_body for sid, code in items}
    total_chars = sum(len(body) for body in bodies.values())
    reused = sum(r.reused_prefix_chars for r in results)
    return {
        "wall_s": round(wall, 3),
        "requests": len(results),
        "reused_requests": sum(1 for r in results if r.reused_prefix_chars > 0),
        # elaborated more than half of its body again
        "misses": sum(1 for r in results if r.reused_prefix_chars < len(bodies[r.id]) / 2),
        "body_chars": total_chars,
        "elaborated_chars": total_chars - reused,
        "per_worker": dict(sorted(collections.Counter(r.worker for r in results).items())),
        "queue_s_total": round(sum(r.time_queue_s for r in results), 2),
        "prefix_waits": stats.prefix_waits,
        "prefix_wait_s": round(stats.prefix_wait_s, 2),
        "prefix_spreads": stats.prefix_spreads,
    }


async def main_async(args) -> dict:
    report = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "settings": {
            "workers": args.workers,
            "editors": args.editors,
            "import_cost_s": args.import_cost,
            "cost_per_kchar_s": args.cost_per_kchar,
            "quick": args.quick,
        },
        "workloads": {},
    }
    for name, items in workloads(args.quick).items():
        if args.only and name not in args.only:
            continue
        row = {mode: await run_mode(mode, items, args) for mode in MODES}
        row["speedup_vs_off"] = round(row["off"]["wall_s"] / row["trie"]["wall_s"], 2)
        row["speedup_vs_no_trie"] = round(row["no-trie"]["wall_s"] / row["trie"]["wall_s"], 2)
        row["chars_ratio_vs_off"] = round(
            row["off"]["elaborated_chars"] / max(1, row["trie"]["elaborated_chars"]), 2
        )
        row["chars_ratio_vs_no_trie"] = round(
            row["no-trie"]["elaborated_chars"] / max(1, row["trie"]["elaborated_chars"]), 2
        )
        report["workloads"][name] = row
        print(
            f"{name:11s} {len(items):4d} req | wall s: off {row['off']['wall_s']:7.2f}  no-trie "
            f"{row['no-trie']['wall_s']:7.2f}  trie {row['trie']['wall_s']:7.2f} | speedup x{row['speedup_vs_off']:.2f} "
            f"vs off, x{row['speedup_vs_no_trie']:.2f} vs no-trie | elaborated-chars ratio "
            f"x{row['chars_ratio_vs_off']:.2f} / x{row['chars_ratio_vs_no_trie']:.2f} | misses "
            f"{row['no-trie']['misses']} / {row['trie']['misses']} | trie waits {row['trie']['prefix_waits']} "
            f"({row['trie']['prefix_wait_s']:.2f} s), spreads {row['trie']['prefix_spreads']}, "
            f"per worker {row['trie']['per_worker']}",
            flush=True,
        )
    return report


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller workloads and costs; under 60 s")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--editors", type=int, default=0, help="requests in flight (default: 2 x workers)"
    )
    p.add_argument(
        "--scale",
        type=float,
        default=0.1,
        help="time scale of the simulated Lean costs (default 0.1)",
    )
    p.add_argument(
        "--import-cost",
        type=float,
        default=None,
        help="seconds for `import Mathlib` (default 8 x scale)",
    )
    p.add_argument(
        "--cost-per-kchar",
        type=float,
        default=None,
        help="seconds per 1000 elaborated characters (default 1.5 x scale; quick: 0.5 x scale)",
    )
    p.add_argument("--only", nargs="*", default=None, help="workload names to run")
    p.add_argument("--json", default="", help="also write the report to this file")
    args = p.parse_args(argv)
    args.editors = args.editors or 2 * args.workers
    if args.import_cost is None:
        args.import_cost = 8.0 * args.scale
    if args.cost_per_kchar is None:
        args.cost_per_kchar = (0.5 if args.quick else 1.5) * args.scale
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    report = asyncio.run(main_async(args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == "__main__":
    main()
