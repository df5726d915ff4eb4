"""The code policy's CPU per snippet before and after a change, side by side
in one run (issue 43 item 7): `benchmarks.policy_bench` (a `leanrpc serve`
subprocess on the stand-in, the miniF2F proofs as one VerifyStream, the
server's CPU per snippet, and the scan alone timed between rounds) run
alternately against two checkouts' `server/` directories, the order swapped
every round, so both sides see the same machine load.

    python -m benchmarks.policy_compare --before <main checkout>/server [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

AFTER = Path(__file__).resolve().parent.parent / "server"


def one_round(server_dir: Path) -> str:
    # Each side's own client too: a newer client may send options an older
    # server's stubs do not have.
    client_dir = server_dir.parent / "clients" / "python"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(server_dir), str(client_dir)))}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.policy_bench", "--rounds", "1"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    return next(line for line in out.splitlines() if line.startswith("1 | "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    sides = [("before", args.before.resolve()), ("after", AFTER)]
    print(
        "side | round | server CPU/snippet | policy scan/snippet | scan share | wall s | valid | load"
    )
    for n in range(args.rounds):
        for name, path in sides if n % 2 == 0 else sides[::-1]:
            row = one_round(path).split(" | ", 1)[1]
            print(f"{name} | {n + 1} | {row}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
