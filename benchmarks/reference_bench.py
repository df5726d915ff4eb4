"""REPL time added by statement pinning (issue 25), references off vs on, in one run.

Workload: the DeepSeek-Prover-V2 miniF2F proofs (shared/datasets, read from
the zip), each pinned to its own statement (the text up to the main
theorem's `:= by`, closed with `sorry`). One in-process server on the
stand-in REPL; passes over the same snippets: references off, on with a
cold reference cache (each reference elaborated once), on again (cached),
then check_axioms on (issue 25 item 3) without and with the cached
references. The first three pass check_axioms=False explicitly (it is on by
default now). The `#print axioms` command's own REPL seconds are not timed
apart by the pool: its cost shows in the wall time only.
REPL time is the body's REPL seconds (`Timings.body_s`) plus, when pinned,
the statement queries' REPL seconds and the references' own elaboration.

    python -m benchmarks.reference_bench [--limit N] [--workers W]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time

from leanrpc.app import create_server
from leanrpc.config import Config
from leanrpc.core.declarations import declarations, mask
from leanrpc.core.headers import split_header
from leanrpc.services.verify import VerifyOptions

from benchmarks.workloads import _raw, no_data, require_data

_PROOF_START = re.compile(r":=\s*by\b")


def pinned_statement(code: str) -> str | None:
    """`code` cut at its last theorem's `:= by`, closed with `sorry`; None if not found."""
    split = split_header(code)
    found = [d for d in declarations(split.body) if d.kind in ("theorem", "lemma") and d.name]
    if not found:
        return None
    start = len(code) - len(split.body) + found[-1].offset
    match = _PROOF_START.search(mask(code), start)
    return None if match is None else code[:match.start()] + ":= by\n  sorry\n"


async def _pass(app, items, reference: bool, check_axioms: bool = False) -> dict:
    service = app.verify
    before_s, before_n = service.references.elaboration_s, service.references.elaborations
    started = time.monotonic()
    results = await asyncio.gather(*[
        service.verify(name, code, VerifyOptions(cache=False, reference=ref if reference else "",
                                                check_axioms=check_axioms))
        for name, code, ref in items])
    wall = time.monotonic() - started
    body = sum(r.timings.body_s for r in results)
    queries = sum(r.reference.query_s for r in results if r.reference is not None)
    elaboration = service.references.elaboration_s - before_s
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
    return {"wall_s": wall, "body_s": body, "query_s": queries, "ref_elab_s": elaboration,
            "ref_elaborations": service.references.elaborations - before_n, "statuses": statuses}


async def main(limit: int, workers: int, cost_per_kchar: float) -> None:
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
    # CPU seconds per 1000 elaborated characters: the stand-in's cost model, so
    # that a long proof costs more REPL time than a one-line query (synthetic).
    config.repl.command = [sys.executable, "-m", "leanrpc.standin", "--import-cost", "0.2",
                           "--cost-per-kchar", str(cost_per_kchar)]
    app = await create_server(config)
    try:
        await _pass(app, items[:8], False)  # warm the header
        off = await _pass(app, items, False)
        cold = await _pass(app, items, True)
        warm = await _pass(app, items, True)
        # Issue 25 item 3: check_axioms (now the server default) on, same snippets.
        axioms = await _pass(app, items, False, check_axioms=True)
        both = await _pass(app, items, True, check_axioms=True)
    finally:
        await app.stop(2.0)
    print(f"{len(items)} of {len(raw)} proofs pinned to their own statement, {workers} workers "
          f"(stand-in REPL, {cost_per_kchar} s per 1000 chars)")
    for label, row in (("references off", off), ("on, cold cache", cold), ("on, cached", warm),
                       ("axioms only", axioms), ("cached + axioms", both)):
        repl = row["body_s"] + row["query_s"] + row["ref_elab_s"]
        added = (repl - off["body_s"]) / off["body_s"] * 100 if off["body_s"] else 0.0
        print(f"{label:16} wall {row['wall_s']:6.2f} s  REPL body {row['body_s']:6.2f} s  queries "
              f"{row['query_s']:5.2f} s  ref elab {row['ref_elab_s']:5.2f} s ({row['ref_elaborations']})  "
              f"REPL total {repl:6.2f} s  (+{added:4.1f}% vs off)  {row['statuses']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cost-per-kchar", type=float, default=0.02)
    args = parser.parse_args()
    asyncio.run(main(args.limit, args.workers, args.cost_per_kchar))
