"""REPL time added by the statement and axiom checks (issue 25), side by side in one run.

Workload: the DeepSeek-Prover-V2 miniF2F proofs (shared/datasets, read from
the zip), each pinned to its own statement (the text up to the main
theorem's `:= by`, closed with `sorry`). One in-process server on the
stand-in REPL, whose cost model burns CPU per elaborated character
(`--cost-per-kchar`), so REPL time is what the REPL processes spend.

Passes over the same snippets, alternating within each round (even rounds
in this order, odd rounds reversed, a cold pass always right before its
cached one):

* `off`: no reference, check_axioms off;
* `axioms`: check_axioms on (the default), no reference;
* `ref+axioms cold`: references and axioms, the reference cache emptied
  first (each reference elaborated once more);
* `ref+axioms cached`: the same, the reference types cached (the goal's case:
  at most 10% of the `off` pass's REPL time added).

REPL time is the CPU seconds (user + system) of the server's whole child
tree over the pass: every live descendant (monitors, REPLs) read through
psutil plus the reaped ones (`os.times()` children), so a recycled worker's
seconds still count. It includes everything the REPL does per command (its
JSON, the fence, the `#print axioms` follow-up, the statement queries, the
references' own elaboration), measured outside the pool. The pool's own
wall time per snippet is shown next to it (`Timings.body_s`: the body and,
pipelined with it since issue 28, its follow-up commands; it includes
waiting on a loaded machine, which CPU seconds do not).

    python -m benchmarks.reference_bench [--limit N] [--rounds R] [--workers W]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import time

import psutil

from benchmarks.measure import foreign_load_pct, machine_busy_s
from benchmarks.workloads import _raw, no_data, require_data
from leanrpc.app import create_server
from leanrpc.config import Config
from leanrpc.core.declarations import declarations, mask
from leanrpc.core.headers import split_header
from leanrpc.services.verify import VerifyOptions

_PROOF_START = re.compile(r":=\s*by\b")
PASSES = ("off", "axioms", "ref+axioms cold", "ref+axioms cached")
GOAL_PCT = 10.0


def pinned_statement(code: str) -> str | None:
    """`code` cut at its last theorem's `:= by`, closed with `sorry`; None if not found."""
    split = split_header(code)
    found = [d for d in declarations(split.body) if d.kind in ("theorem", "lemma") and d.name]
    if not found:
        return None
    start = len(code) - len(split.body) + found[-1].offset
    match = _PROOF_START.search(mask(code), start)
    return None if match is None else code[: match.start()] + ":= by\n  sorry\n"


class ReplCpu:
    """CPU seconds of this process's whole child tree, live and reaped."""

    def __init__(self) -> None:
        self.me = psutil.Process()

    def total(self) -> float:
        spent = 0.0
        for child in self.me.children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.Error:  # gone between the listing and the read: reaped below, or lost
                continue
            spent += times.user + times.system
        reaped = os.times()
        return spent + reaped.children_user + reaped.children_system


async def _pass(app, items, kind: str, cpu: ReplCpu) -> dict:
    service = app.service
    references = kind.startswith("ref")
    if kind.endswith("cold"):
        service.references.forget()
    before_n = service.references.elaborations
    busy0, repl0, started = machine_busy_s(), cpu.total(), time.monotonic()
    server0 = time.process_time()
    results = await asyncio.gather(
        *[
            service.verify(
                name,
                code,
                VerifyOptions(
                    cache=False, reference=ref if references else "", check_axioms=kind != "off"
                ),
            )
            for name, code, ref in items
        ]
    )
    wall = time.monotonic() - started
    repl = cpu.total() - repl0
    server = time.process_time() - server0
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
    return {
        "wall_s": wall,
        "repl_cpu_s": repl,
        "server_cpu_s": server,
        "body_s": sum(r.timings.body_s for r in results),
        "ref_elaborations": service.references.elaborations - before_n,
        "statuses": statuses,
        "foreign_pct": foreign_load_pct(machine_busy_s() - busy0, repl + server, wall),
    }


def _order(round_no: int) -> list[str]:
    if round_no % 2 == 0:
        return list(PASSES)
    return ["ref+axioms cold", "ref+axioms cached", "axioms", "off"]


async def main(limit: int, rounds: int, workers: int, cost_per_kchar: float) -> None:
    try:
        raw = _raw("minif2f")[: limit or None]
    except FileNotFoundError as exc:
        no_data(f"miniF2F proofs: {exc}")
    items = [(name, code, ref) for name, code in raw if (ref := pinned_statement(code)) is not None]
    require_data(items, "miniF2F proofs with a pinnable statement")
    config = Config()
    config.cache.enabled = False
    config.server.port = 0
    config.pool.workers = workers
    config.pool.default_timeout_s = 600
    config.limits.max_system_memory_percent = 0
    config.limits.max_requests_per_worker = (
        0  # no recycling between passes (reaped CPU counts anyway)
    )
    # CPU seconds per 1000 elaborated characters: the stand-in's cost model, so
    # that a long proof costs more REPL time than a one-line query (synthetic).
    # --no-replay: every command is charged (a replayed fixture would cost nothing).
    config.repl.command = [
        sys.executable,
        "-m",
        "leanrpc.standin",
        "--no-replay",
        "--import-cost",
        "0.2",
        "--cost-per-kchar",
        str(cost_per_kchar),
    ]
    app = await create_server(config)
    cpu = ReplCpu()
    table: dict[str, list[dict]] = {kind: [] for kind in PASSES}
    try:
        await _pass(app, items[:8], "off", cpu)  # warm the header on every worker
        await _pass(app, items[:8], "off", cpu)
        for round_no in range(rounds):
            for kind in _order(round_no):
                table[kind].append(await _pass(app, items, kind, cpu))
    finally:
        await app.stop(2.0)
    print(
        f"{len(items)} of {len(raw)} miniF2F proofs pinned to their own statement; {workers} workers; "
        f"stand-in REPL, {cost_per_kchar} CPU s per 1000 chars; {rounds} rounds, passes alternating; "
        f"load average at the end {os.getloadavg()[0]:.2f}"
    )
    print("REPL CPU = CPU seconds of the server's child tree over the pass (the REPL processes)")
    for round_no in range(rounds):
        off = table["off"][round_no]["repl_cpu_s"]
        for kind in PASSES:
            row = table[kind][round_no]
            added = (row["repl_cpu_s"] - off) / off * 100 if off else 0.0
            print(
                f"round {round_no + 1}  {kind:18}  wall {row['wall_s']:6.2f} s  "
                f"REPL CPU {row['repl_cpu_s']:7.2f} s ({added:+5.1f}% vs off)  "
                f"server CPU {row['server_cpu_s']:5.2f} s  pool body {row['body_s']:6.2f} s  "
                f"references elaborated {row['ref_elaborations']:3}  "
                f"foreign load {row['foreign_pct']:4.1f}%  {row['statuses']}"
            )
    print("median over rounds of the per-round REPL CPU added vs off:")
    for kind in PASSES[1:]:
        added = [
            (table[kind][n]["repl_cpu_s"] / table["off"][n]["repl_cpu_s"] - 1) * 100
            for n in range(rounds)
            if table["off"][n]["repl_cpu_s"]
        ]
        goal = f"  (goal <= {GOAL_PCT:g}%)" if kind == "ref+axioms cached" else ""
        print(
            f"  {kind:18} {statistics.median(added):+5.1f}%  (rounds: "
            f"{', '.join(f'{a:+.1f}%' for a in added)}){goal}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="first N proofs (default all 438)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cost-per-kchar", type=float, default=0.02)
    args = parser.parse_args()
    asyncio.run(main(args.limit, args.rounds, args.workers, args.cost_per_kchar))
