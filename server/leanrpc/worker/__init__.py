"""Worker layer: one REPL process per Worker, started by a Launcher.

Owns: `process` (the child: launch, exit watch, stderr, graded stop, memory),
`channel` (one proven exchange at a time: framing, fence, env counter,
timeouts), `fence` (how much the channel checks), `ledger` (the REPL's id
counters), `stdout` (the bytes, in the read callback), `audit` (the /proc
thief check the channel runs) with `procfs` (its held /proc handles),
`memory` (a tree's memory) and `memwatch` (the watch while commands run),
`proctree` (the one /proc tree walk), `worker` (the state machine the pool
drives with reserve()/release()), `launcher` (the launch seam; sandboxes
implement it), `states`, `identity`.
May import: leanrpc.repl, leanrpc.core, leanrpc.config, leanrpc.errors,
leanrpc.results. Never the pool, services or edge.
"""

from .fence import FenceSettings
from .launcher import Launcher, LaunchSpec, rlimits_from_config
from .process import ShutdownRung
from .worker import ExitCause, Worker, WorkerState

__all__ = [
    "ExitCause",
    "FenceSettings",
    "LaunchSpec",
    "Launcher",
    "ShutdownRung",
    "Worker",
    "WorkerState",
    "rlimits_from_config",
]
