"""A worker's states and exit causes, as data: the transition table the Worker obeys.

Owns: `WorkerState`, the legal transitions, the state sets the Worker reads
(`_MAY_EXCHANGE`, `_LIVE`, `_HELD`), `ExitCause` (why a worker went away),
`cause_of` (the exit cause an exchange error means) and `last_stderr_line`.
May import: leanrpc.errors only.
"""

from __future__ import annotations

import enum

from ..errors import WorkerError, WorkerOutOfMemory, WorkerPoisoned, WorkerTimeout

__all__ = ["ExitCause", "WorkerState", "cause_of", "last_stderr_line"]


class WorkerState(enum.Enum):
    SPAWNING = "spawning"  # process being launched
    PROBING = "probing"  # handshake (identity, fork) in flight
    READY = "ready"  # booted, not yet handed to the pool's idle set
    LOADING = "loading"  # loading a header or preamble
    IDLE = "idle"
    RESERVED = "reserved"  # the pool picked it for a job
    RUNNING = "running"  # a job's command is in flight
    DRAINING = "draining"  # finishing its job; stopped at release
    STOPPING = "stopping"  # being killed or shut down; never reused
    DEAD = "dead"
    FAILED = "failed"  # could not boot


S = WorkerState
_TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    S.SPAWNING: frozenset({S.PROBING, S.STOPPING, S.FAILED}),
    S.PROBING: frozenset({S.READY, S.STOPPING, S.FAILED}),
    S.READY: frozenset({S.IDLE, S.RESERVED, S.LOADING, S.STOPPING}),
    S.LOADING: frozenset({S.IDLE, S.RESERVED, S.DRAINING, S.STOPPING}),
    S.IDLE: frozenset({S.RESERVED, S.LOADING, S.STOPPING}),
    S.RESERVED: frozenset({S.RUNNING, S.LOADING, S.IDLE, S.DRAINING, S.STOPPING}),
    S.RUNNING: frozenset({S.RESERVED, S.DRAINING, S.STOPPING}),
    S.DRAINING: frozenset({S.STOPPING}),
    S.STOPPING: frozenset({S.DEAD}),
    S.DEAD: frozenset(),
    S.FAILED: frozenset({S.DEAD}),
}
# States in which a command may be sent (the guarded path: `request`).
_MAY_EXCHANGE = frozenset({S.PROBING, S.READY, S.LOADING, S.RESERVED, S.RUNNING, S.DRAINING})
_LIVE = frozenset(
    {S.SPAWNING, S.PROBING, S.READY, S.LOADING, S.IDLE, S.RESERVED, S.RUNNING, S.DRAINING}
)
_HELD = frozenset({S.RESERVED, S.RUNNING, S.DRAINING})


class ExitCause(enum.Enum):
    """Why a worker went away; counted in metrics as restarts by cause."""

    TIMEOUT = "timeout"
    CRASH = "crash"
    OUT_OF_MEMORY = "out_of_memory"
    GARBAGE = "garbage"
    POISONED = "poisoned"
    CANCELLED = "cancelled"
    MAX_REQUESTS = "max_requests"
    SYSTEM_MEMORY = "system_memory"
    HEADER_SWITCH = "header_switch"
    HEADER_FAILED = "header_failed"
    STDERR = "stderr"
    BOOT_FAILURE = "boot_failure"
    SHUTDOWN = "shutdown"
    TRUSTED_CODE = "trusted_code"  # ran a trusted client's code; retired before anyone else's job


def last_stderr_line(tail: str) -> str:
    """The last non-blank stderr line (the exec error, the panic), at most 300 characters."""
    for line in reversed(tail.splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


def cause_of(exc: WorkerError) -> ExitCause:
    if isinstance(exc, WorkerTimeout):
        return ExitCause.TIMEOUT
    if isinstance(exc, WorkerOutOfMemory):
        return ExitCause.OUT_OF_MEMORY
    if isinstance(exc, WorkerPoisoned):
        return ExitCause.POISONED
    return ExitCause.CRASH
