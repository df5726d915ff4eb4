"""What one wakeup of an idle event loop costs in CPU on this machine (issue 38 item 6).

    python -m benchmarks.wake_cost --frames 200

A child process writes `--frames` lines of 1 KB to a pipe, one every `--gap` seconds
(the pace of REPL answers at the stand-in's benchmark scale), then the same number
every `--hot-gap` seconds; a uvloop reader that does nothing with them counts the
process CPU per line in each pace. The difference is what a wakeup costs before any
work is done (the kernel's switch back to a sleeping thread, the loop's poll, caches
gone cold), paid by every answer the server reads after a pause, and by every timer
it wakes for. It explains why server CPU per snippet falls as the same snippets come
faster (`benchmarks.server_cpu --scale`): the work is the same, the wakeups fewer
per answer, or warmer. No leanrpc code runs here. May import: asyncio, uvloop, the
standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

_WRITER = """
import os, sys, time
frames, gap = int(sys.argv[1]), float(sys.argv[2])
line = b"x" * 1023 + b"\\n"
time.sleep(0.5)
for _ in range(frames):
    os.write(1, line)
    time.sleep(gap)
"""


class _Count(asyncio.Protocol):
    def __init__(self, done: asyncio.Future) -> None:
        self.reads = 0
        self.done = done

    def data_received(self, data: bytes) -> None:
        self.reads += 1

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def cpu_per_line(frames: int, gap: float) -> tuple[float, int]:
    """Process CPU (µs) per line read, and how many reads it took, at one line per `gap` s."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(frames), str(gap)], stdout=subprocess.PIPE
    )
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    transport, counter = await loop.connect_read_pipe(lambda: _Count(done), writer.stdout)
    try:
        await asyncio.sleep(0.3)  # the child is up and about to write
        cpu0 = time.process_time()
        await done
        cpu = time.process_time() - cpu0
    finally:
        transport.close()
        writer.wait()
    return 1e6 * cpu / frames, counter.reads


def main(argv: list[str] | None = None) -> int:
    import uvloop

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.037, help="seconds between lines (cold)")
    parser.add_argument("--hot-gap", type=float, default=0.001, help="seconds between lines (hot)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print("| round | gap s | reads | CPU µs per line |")
    print("|---:|---:|---:|---:|")
    for n in range(args.rounds):
        for gap in (args.gap, args.hot_gap):
            per_line, reads = uvloop.run(cpu_per_line(args.frames, gap))
            print(f"| {n + 1} | {gap:g} | {reads} | {per_line:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
