"""`python -m benchmarks.load {run,scaling,compare}`: arguments and the three commands.

May import: benchmarks.{config,driver,report,plots,workloads,peers.compare}.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from . import workloads
from .config import REPO, SCHEMA, TARGETS, RunConfig
from .driver import run_async, run_rounds
from .peers import compare
from .plots import PlotsUnavailable, plot_scaling
from .report import table


def scaling_configs(base: RunConfig, worker_counts: list[int]) -> dict[str, RunConfig]:
    top = max(worker_counts)
    configs = {
        f"workers={w}": dataclasses.replace(
            base, workers=w, rpc="unary", reuse=True, pure_python=False
        )
        for w in worker_counts
    }
    ref = configs[f"workers={top}"]
    configs["cache miss (reuse=false)"] = dataclasses.replace(ref, reuse=False)
    configs["streaming"] = dataclasses.replace(ref, rpc="stream")
    configs["pure-Python core"] = dataclasses.replace(ref, pure_python=True)
    return configs


def _config_from_args(args) -> RunConfig:
    return RunConfig(
        target=args.target,
        rpc=args.rpc,
        mode=args.mode,
        concurrency=args.concurrency,
        rate=args.rate,
        duration_s=args.duration,
        requests=args.requests,
        workers=args.workers,
        workload=args.workload,
        scale=args.scale,
        limit=args.limit,
        reuse=not args.no_reuse,
        pure_python=args.pure_python,
        warmup=args.warmup,
        seed=args.seed,
        timeout_s=args.timeout,
        progress=not args.quiet,
        checks=args.checks,
    )


def write_json(path: str | None, data) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2) + "\n")


def warm_without_reuse(summary: dict) -> str | None:
    """A reuse=false run answered by warm workers measures no fresh process: the reason, or None."""
    warm = summary["requests"].get("warm_answers", 0)
    if summary["config"].get("reuse", True) or not warm:
        return None
    return (
        f"reuse=false run ({summary.get('label') or summary['target']}) got {warm} answers from warm workers: "
        "it did not measure fresh processes"
    )


def cmd_run(args) -> int:
    summary = asyncio.run(run_async(_config_from_args(args)))
    write_json(args.json, summary)
    print(table([summary]))
    if not args.json:
        print(json.dumps(summary, indent=2))
    warm = warm_without_reuse(summary)
    if warm:
        print(warm, file=sys.stderr)
    return 0 if summary["requests"]["lost"] == 0 and not warm else 1


def cmd_scaling(args) -> int:
    base = _config_from_args(args)
    worker_counts = sorted({int(w) for w in args.worker_counts.split(",")})
    configs = scaling_configs(base, worker_counts)
    for cfg in configs.values():
        cfg.validate()
    results = asyncio.run(run_rounds(configs, args.rounds))
    for name, summary in results.items():
        summary["label"] = name
    write_json(args.json, {"schema": SCHEMA, "kind": "scaling", "results": results})
    print(table(list(results.values())))
    print("\nconfigurations: " + "; ".join(f"{i + 1}. {n}" for i, n in enumerate(results)))
    try:
        for path in plot_scaling(results, worker_counts, Path(args.out_dir)):
            print(f"wrote {path}")
    except PlotsUnavailable as exc:
        print(f"plots skipped: {exc}", file=sys.stderr)
    warm = [w for w in map(warm_without_reuse, results.values()) if w]
    for line in warm:
        print(line, file=sys.stderr)
    return 0 if all(s["requests"]["lost"] == 0 for s in results.values()) and not warm else 1


def cmd_compare(args) -> int:
    return compare.main(args, _config_from_args(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.load", description="Load generator for leanrpc and its peers"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, help_text in (
        ("run", cmd_run, "one run against one target"),
        (
            "scaling",
            cmd_scaling,
            "leanrpc matrix: workers, cache hit/miss, unary/stream, native/pure; PNG plots",
        ),
        (
            "compare",
            cmd_compare,
            "leanrpc vs Kimina vs LeanInteract, alternating rounds in one run",
        ),
    ):
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        p.add_argument("--target", default="leanrpc", choices=TARGETS)
        p.add_argument("--rpc", default="unary", choices=("unary", "stream"))
        p.add_argument("--mode", default="closed", choices=("closed", "open"))
        p.add_argument(
            "--concurrency",
            type=int,
            default=0,
            help="closed loop: requests in flight (default 2 x workers)",
        )
        p.add_argument(
            "--rate", type=float, default=0.0, help="open loop: Poisson arrivals per second"
        )
        p.add_argument("--duration", type=float, default=0.0, help="seconds of load")
        p.add_argument(
            "--requests",
            type=int,
            default=0,
            help="number of requests (with or instead of --duration)",
        )
        p.add_argument("--workers", type=int, default=2)
        p.add_argument("--workload", default="kimina", choices=workloads.SOURCES)
        p.add_argument(
            "--scale",
            type=float,
            default=workloads.DEFAULT_SCALE,
            help="cost scale (1 = real Lean timings)",
        )
        p.add_argument(
            "--limit", type=int, default=0, help="use only the first N proofs of the workload"
        )
        p.add_argument(
            "--no-reuse",
            action="store_true",
            help="cache miss: fresh REPL per request (reuse=false)",
        )
        p.add_argument(
            "--pure-python", action="store_true", help="server with LEANRPC_NO_EXTENSIONS=1"
        )
        p.add_argument(
            "--checks",
            default="default",
            choices=("default", "off"),
            help="leanrpc's axiom check and code policy: as shipped, or off (compare: the peer rows "
            "use off and a second leanrpc row shows the default)",
        )
        p.add_argument(
            "--warmup", type=int, default=-1, help="unmeasured requests first (default 2 x workers)"
        )
        p.add_argument("--seed", type=int, default=1)
        p.add_argument(
            "--timeout", type=float, default=120.0, help="per-request verify timeout, seconds"
        )
        p.add_argument("--quiet", action="store_true", help="no progress line")
        p.add_argument("--json", help="write the JSON summary (or list of summaries) here")
        if name != "run":
            p.add_argument("--out-dir", default=str(REPO / "benchmarks"), help="where PNG plots go")
            p.add_argument(
                "--rounds", type=int, default=2, help="alternating rounds per configuration"
            )
            p.add_argument("--worker-counts", default="1,2", help="comma-separated worker counts")
            p.add_argument("--targets", default="leanrpc,kimina_rest,kimina,leaninteract")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except workloads.SharedNotFound as exc:
        print(f"benchmarks.load {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
