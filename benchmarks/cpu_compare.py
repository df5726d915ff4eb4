"""Server CPU per request, two checkouts side by side in one run (issue 28).

    python -m benchmarks.cpu_compare /work/main /work/wt-28b --rounds 2 --duration 20

Alternates `python -m benchmarks.load run` between the checkouts (each run imports leanrpc
from its own checkout's server/ and uses its own harness), round by round, and prints per run:
throughput, server CPU ms per answered request, REPL CPU, and the foreign load: CPU used on
the machine during the run by anything but that run's client, server and REPLs (from /proc/stat), in
percent of all cores. Only rounds with a low foreign load say anything about a 2-core box.

`--checks off` (the default) runs every checkout without the axiom and statement checks:
checkouts from before issue 25 had no `--checks` flag and checked no axioms by default, so
both sides then do the same REPL work. `--checks default` leaves each checkout's defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .measure import foreign_load_pct, machine_busy_s


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_one(checkout: Path, args, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{checkout / 'server'}{os.pathsep}{checkout}")
    env.setdefault("LEANRPC_SHARED", "/work/shared")
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.load",
        "run",
        "--workers",
        str(args.workers),
        "--workload",
        args.workload,
        "--duration",
        str(args.duration),
        "--quiet",
        "--json",
        str(out),
    ]
    if args.checks == "off" and _has_checks_flag(checkout):
        cmd += ["--checks", "off"]
    busy0, ours0, t0 = machine_busy_s(), _children_cpu_s(), time.monotonic()
    subprocess.run(cmd, cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    busy, ours, wall = machine_busy_s() - busy0, _children_cpu_s() - ours0, time.monotonic() - t0
    summary = json.loads(out.read_text())
    summary = summary[0] if isinstance(summary, list) else summary
    server = summary["server"]
    answered = max(1, summary["requests"]["answered"])
    # Ours: the whole run's process tree (client, server, REPLs; all reaped, so in RUSAGE_CHILDREN).
    foreign = foreign_load_pct(busy, ours, wall)
    return {
        "checkout": str(checkout),
        "rps": summary["throughput_rps"],
        "ratio_to_ideal": summary["ratio_to_ideal"],
        "server_cpu_ms_per_req": round(1000 * server["cpu_s"] / answered, 3),
        "repl_cpu_s": server["repl_cpu_s"],
        "answered": answered,
        "foreign_load_pct": foreign,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def _has_checks_flag(checkout: Path) -> bool:
    """Whether that checkout's load harness takes `--checks` (issue 25 and later)."""
    cli = checkout / "benchmarks" / "cli.py"
    return cli.is_file() and '"--checks"' in cli.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workload", default="minif2f")
    parser.add_argument(
        "--checks",
        default="off",
        choices=("off", "default"),
        help="off: no axiom/statement checks on any side (the same work as a "
        "checkout from before issue 25); default: each checkout's defaults",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            order = (args.before, args.after) if round_no % 2 == 0 else (args.after, args.before)
            for checkout in order:
                row = run_one(checkout.resolve(), args, Path(tmp) / "run.json")
                row["round"] = round_no + 1
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| round | checkout | req/s | share of ideal | server CPU ms/req | foreign load % |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['round']} | {r['checkout']} | {r['rps']:.2f} | {r['ratio_to_ideal']:.3f} | "
            f"{r['server_cpu_ms_per_req']:.2f} | {r['foreign_load_pct']:.0f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
