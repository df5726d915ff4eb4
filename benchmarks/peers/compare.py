"""Side by side: leanrpc (gRPC), leanrpc behind its Kimina REST gateway, Kimina Lean Server and
LeanInteract on the same workload and REPL.

    bash benchmarks/peers/setup.sh                       # once: the peers' virtualenv
    python -m benchmarks.load compare --workers 2 --duration 40 --rounds 2 --json out.json

Every target gets the same proofs (same order), the same stand-in REPL with the same simulated
costs, the same worker count and the same closed-loop concurrency (one snippet per request:
leanrpc unary `Verify`, Kimina `POST /api/check` to Kimina's server and to leanrpc's gateway
(target `kimina_rest`, the same bytes), LeanInteract `server.run`). Targets run one at
a time (2 cores), alternating within each round and in reverse order on the next, so machine
noise hits all of them; the reported figures are means over rounds, and the ratios are taken
between those means. With `--rpc stream` a further row, "leanrpc (VerifyStream)", sends the
same snippets one per message over one VerifyStream per lane (what leanrpc's own client's
`verify` does for many snippets), checks off like the peers, with its own ratios; the unary
row stays the one compared first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

from ..config import SCHEMA, RunConfig
from ..driver import run_rounds
from ..plots import PlotsUnavailable, plot_throughput_latency
from ..report import table


def _write(path: str | None, data) -> None:
    if path:
        import json

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2) + "\n")


def no_successes(results: dict[str, dict]) -> list[str]:
    """Targets that answered nothing: their latency figures are None and no ratio means anything."""
    return [name for name, summary in results.items() if not summary["requests"]["answered"]]


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def ratios(results: dict[str, dict], reference: str = "leanrpc") -> dict[str, dict]:
    """leanrpc's throughput and latency as multiples of each peer's; None where either side
    answered nothing (listed under "no_successes" in the report, never a crash)."""
    ours = results[reference]
    out: dict[str, dict] = {}
    for name, peer in results.items():
        if name == reference:
            continue
        if not ours["requests"]["answered"] or not peer["requests"]["answered"]:
            out[name] = {"throughput_x": None, "p50_x": None, "p99_x": None}
            continue
        ratio = _ratio
        out[name] = {
            "throughput_x": ratio(ours["throughput_rps"], peer["throughput_rps"]),
            "p50_x": ratio(ours["latency_ms"]["p50"], peer["latency_ms"]["p50"]),
            "p99_x": ratio(ours["latency_ms"]["p99"], peer["latency_ms"]["p99"]),
        }
    return out


def plot(results: dict[str, dict], out_dir: Path, workers: int) -> Path:
    names = list(results)
    return plot_throughput_latency(
        results,
        names,
        names,
        out_dir / "compare_peers.png",
        throughput_title=f"Throughput, {workers} workers, same REPL stand-in",
        latency_title="Latency (queueing included)",
        ideal_label="ideal",
    )


CHECKED = "leanrpc (default checks)"
STREAMED = "leanrpc (VerifyStream)"


def main(args, base: RunConfig) -> int:
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if "leanrpc" not in targets:
        targets.insert(0, "leanrpc")
    # leanrpc as peers work (no axiom check, no code policy) is the row the ratios use; a
    # second row keeps the shipped checks on, so the cost of trust is in the same run.
    configs = {
        t: dataclasses.replace(base, target=t, rpc="unary", mode="closed", checks="off")
        for t in targets
    }
    configs[CHECKED] = dataclasses.replace(
        base, target="leanrpc", rpc="unary", mode="closed", checks="default"
    )
    if base.rpc == "stream":
        configs[STREAMED] = dataclasses.replace(
            base, target="leanrpc", rpc="stream", mode="closed", checks="off"
        )
    for cfg in configs.values():
        cfg.validate()
    results = asyncio.run(run_rounds(configs, args.rounds))
    failed = no_successes(results)
    report = {
        "schema": SCHEMA,
        "kind": "compare",
        "results": results,
        "ratios": ratios(results),
        "no_successes": failed,
    }
    if STREAMED in results:
        report["ratios_stream"] = ratios(
            {k: v for k, v in results.items() if k not in ("leanrpc", CHECKED)}, STREAMED
        )
    if "kimina_rest" in results and "kimina" in results:
        # The drop-in claim: Kimina's API served by leanrpc against Kimina's own server.
        report["ratios_kimina_rest"] = ratios(
            {k: results[k] for k in ("kimina_rest", "kimina")}, "kimina_rest"
        )
    _write(args.json, report)
    print(table(list(results.values())))
    print()
    for peer, r in report["ratios"].items():
        print(
            f"leanrpc vs {peer}: throughput {r['throughput_x']}x, p50 {r['p50_x']}x, p99 {r['p99_x']}x"
        )
    for peer, r in report.get("ratios_stream", {}).items():
        print(
            f"{STREAMED} vs {peer}: throughput {r['throughput_x']}x, p50 {r['p50_x']}x, p99 {r['p99_x']}x"
        )
    for peer, r in report.get("ratios_kimina_rest", {}).items():
        print(
            f"kimina_rest vs {peer}: throughput {r['throughput_x']}x, p50 {r['p50_x']}x, p99 {r['p99_x']}x"
        )
    for name in failed:
        print(f"{name}: NO SUCCESSES ({results[name]['errors']}): its ratios are None")
    try:
        print(f"wrote {plot(results, Path(args.out_dir), base.workers)}")
    except PlotsUnavailable as exc:
        print(f"plots skipped: {exc}", file=sys.stderr)
    clean = all(
        s["requests"]["lost"] == 0 and s["requests"]["failed"] == 0 for s in results.values()
    )
    return 0 if clean else 1
