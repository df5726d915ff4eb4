"""Server CPU of the two /proc paths per request (issue 28): the release-time memory sample and the
fence audit, measured on one idle stand-in REPL, in CPU microseconds per call of this process.

    python -m benchmarks.proc_costs /work/main /work/wt-28b     # each checkout in its own interpreter

CPU time (not wall time), so a loaded machine changes the figures less than it changes throughput.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import asyncio, json, os, subprocess, sys, time
from leanrpc.worker import memory
from leanrpc.worker.audit import PipeAudit
N = int(sys.argv[1])
repl = subprocess.Popen([sys.executable, "-m", "leanrpc.standin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
time.sleep(1.0)  # idle, reading its stdin
pid = repl.pid
def cpu_us(fn):
    fn()
    t0 = time.process_time()
    for _ in range(N):
        fn()
    return round((time.process_time() - t0) / N * 1e6, 1)
out = {"leanrpc": memory.__file__}
if hasattr(memory, "TreeMemory"):
    watch = memory.TreeMemory(pid)
    watch.sample()
    out["memory_sample_us"] = cpu_us(lambda: watch.sample(periodic_scan=False))
else:  # main: the walk Pool.release made (children listed at most once a second: not counted)
    import psutil
    proc = psutil.Process(pid)
    kids = proc.children(recursive=True)
    out["memory_sample_us"] = cpu_us(lambda: memory.tree_memory_of(proc, kids))
inodes = tuple(os.fstat(p.fileno()).st_ino for p in (repl.stdin, repl.stdout, repl.stderr))
audit = PipeAudit(pid, inodes)
async def audits():
    assert await audit.record_baseline() is None
    t0 = time.process_time()
    for _ in range(N):
        assert await audit.check() is None
    return round((time.process_time() - t0) / N * 1e6, 1)
out["audit_us"] = asyncio.run(audits())
repl.kill()
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> int:
    checkouts = [Path(p).resolve() for p in (argv if argv is not None else sys.argv[1:])]
    for checkout in checkouts:
        env = dict(os.environ, PYTHONPATH=str(checkout / "server"))
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, "2000"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        print(json.dumps({"checkout": str(checkout), **json.loads(result.stdout)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
