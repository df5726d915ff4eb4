"""The axiom plan's CPU per body, two checkouts side by side in one process (issue 38 item 6).

    python -m benchmarks.axiom_plan_bench --before <main checkout> --workload minif2f --repeats 3

Loads `server/leanrpc/core/declarations.py` of `--before` (with the core modules it imports
from its own folder) and of this checkout (core layer: text in, text out), checks that both plan every body of the
workload alike (the rewritten body, the names, the edits), then times `plan_axiom_check` on
all of them, the two alternating `--repeats` times, in process CPU time (less sensitive to
other load on the machine than wall time). May import: benchmarks.workloads, leanrpc.core.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import types
from pathlib import Path

from . import workloads


def load(core: Path, name: str):
    """`core/declarations.py` of a checkout, its relative imports (core.masking,
    core.lexer) read from the same folder: the folder stands in as a package
    `name` whose `__init__` is not run (it loads the Cython core)."""
    package = types.ModuleType(name)
    package.__path__ = [str(core)]
    sys.modules[name] = package  # dataclasses look their module up
    return importlib.import_module(f"{name}.declarations")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout to compare with")
    parser.add_argument("--workload", default="minif2f")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from leanrpc.core import declarations as after
    from leanrpc.core.headers import split_header

    before = load(args.before / "server/leanrpc/core", "core_before")
    try:
        items = workloads.load(args.workload, scale=workloads.DEFAULT_SCALE)
    except workloads.SharedNotFound as exc:
        workloads.no_data(str(exc))
    bodies = [split_header(item.code).body for item in items]

    def plans(module) -> list:
        return [
            (c.body, c.names, c.edits)
            for c in (module.plan_axiom_check(b, 3, 2, nonce="n") for b in bodies)
        ]

    same = plans(before) == plans(after)
    print(
        f"# axiom_plan_bench: {args.workload}, {len(bodies)} bodies, "
        f"mean {sum(map(len, bodies)) / len(bodies):.0f} chars; same plans: {same}"
    )
    print("| repeat | before ms/body | after ms/body | ratio |")
    print("|---:|---:|---:|---:|")
    for n in range(args.repeats):
        times = []
        for module in (before, after) if n % 2 == 0 else (after, before):
            start = time.process_time()
            for body in bodies:
                module.plan_axiom_check(body, 3, 2, nonce="n")
            times.append((module is after, 1000 * (time.process_time() - start) / len(bodies)))
        b = next(t for is_after, t in times if not is_after)
        a = next(t for is_after, t in times if is_after)
        print(f"| {n + 1} | {b:.3f} | {a:.3f} | {b / a:.1f}x |")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
