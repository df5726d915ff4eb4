"""`leanrpc serve` under cProfile, switched on and off by signals (benchmarks.server_cpu --cprofile).

    python -m benchmarks.cprofile_serve OUT.prof -m leanrpc.cli serve --config ... --port ...

Runs `leanrpc serve` in this process with a `cProfile.Profile` that records nothing until
SIGUSR1 (after the caller's warm-up) and writes `OUT.prof` on SIGUSR2 (read it with
`python -m pstats OUT.prof`), so the profile holds the measured requests only. cProfile
(standard library) and not py-spy: py-spy is not installed everywhere and needs ptrace; cProfile
sees only Python frames of the main thread (the event loop's), and its overhead inflates the
share of code that makes many small calls, so read shares, not absolute times. Its clock is the
main thread's CPU (`time.thread_time`), not the wall clock: on a shared machine a wall clock
charges a function for the time the scheduler gave to another process (a pipe write that wakes
a REPL looked like 0.8 ms a call). Compiled
functions (leanrpc._native) are counted in their Python caller's own time.
May import: leanrpc.commands.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1:3] != ["-m", "leanrpc.cli"]:
        print(
            "usage: python -m benchmarks.cprofile_serve OUT.prof -m leanrpc.cli ARGS...",
            file=sys.stderr,
        )
        return 2
    out, args = argv[0], argv[3:]
    profile = cProfile.Profile(time.thread_time)

    def start(*_):
        profile.enable()

    def dump(*_):
        profile.disable()
        profile.dump_stats(out + ".part")
        os.replace(out + ".part", out)  # whole, or not there: the caller waits for the file

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, dump)
    from leanrpc.commands import main as leanrpc_main

    return leanrpc_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
