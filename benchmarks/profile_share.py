"""Where the server's CPU goes: shares of a py-spy profile, by room (issue 28).

    py-spy record --subprocesses --native --rate 100 --format raw -o prof.txt -- \
        python -m benchmarks.load run --workers 2 --workload minif2f --duration 30 --quiet
    python -m benchmarks.profile_share prof.txt

Reads py-spy's raw (collapsed) output, keeps the samples of the `leanrpc ... serve`
process, drops the threads that only wait (asyncio's child watcher in wait4, gRPC's
poller in epoll_wait: py-spy's idle test does not see native waits), and prints each
room's share of the rest. The first matching rule names a sample's room, leaf first.
A profile of the server alone (`py-spy record --pid`, benchmarks/server_cpu.py --py-spy) has
no process frames: read it with `--process ""`.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

# (room, substrings of a frame); the leaf-most frame that matches any rule decides.
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("garbage collector", ("gc_collect_main", "gc_collect_with_callback", "collect_generations")),
    ("memory watch", ("worker/memory.py",)),
    ("fence audit", ("worker/audit.py",)),
    (
        "REPL pipe I/O",
        (
            "worker/channel.py",
            "worker/process.py",
            "unix_events.py",
            "asyncio/streams.py",
            "selector_events.py",
        ),
    ),
    ("dispatch and pool", ("leanrpc/pool/",)),
    ("code policy", ("leanrpc/policy/", "_native/policy")),
    ("cache", ("leanrpc/cache/",)),
    (
        "edge and services",
        ("leanrpc/edge/", "leanrpc/services/", "leanrpc/results", "leanrpc/core/"),
    ),
    ("gRPC", ("cygrpc", "grpc/aio", "grpc/_", "libgrpc")),
    ("asyncio loop", ("asyncio/",)),
)
_WAITING = ("_do_waitpid", "epoll_wait", "ThreadedChildWatcher")


def room_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for room, needles in RULES:
            if any(n in frame for n in needles):
                return room
    return "other"


def shares(text: str, process: str = "leanrpc.cli serve") -> tuple[collections.Counter, int]:
    counts: collections.Counter = collections.Counter()
    dropped = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        owners = [f for f in frames if f.startswith("process ")]
        if process and (not owners or process not in owners[-1]):
            continue  # another process of a --subprocesses profile
        frames = [f for f in frames if not f.startswith("process ")]
        if any(w in f for f in frames for w in _WAITING):
            dropped += int(n)
            continue
        counts[room_of(frames)] += int(n)
    return counts, dropped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy record --format raw output")
    parser.add_argument(
        "--process",
        default="leanrpc.cli serve",
        help='substring of the server\'s command line; "" for a profile of '
        "one process (py-spy record --pid: benchmarks/server_cpu.py --py-spy)",
    )
    args = parser.parse_args(argv)
    if not args.profile.is_file():
        print(f"profile_share: no profile at {args.profile}", file=sys.stderr)
        return 2
    counts, dropped = shares(args.profile.read_text(), args.process)
    total = sum(counts.values())
    if not total:
        print(
            f"profile_share: no busy samples of a process matching {args.process!r} in {args.profile}",
            file=sys.stderr,
        )
        return 2
    print(f"{total} busy samples of the server ({dropped} samples of waiting threads dropped)")
    print("| share | where |\n|---|---|")
    for room, n in counts.most_common():
        print(f"| {100 * n / total:.1f}% | {room} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
