"""The one log line a worker's exit gets, in words a person reads (issue 29).

Owns: which level and words each `ExitCause` gets, and `log_worker_exit`, the
line itself: the words, a poisoned worker's reason (the channel logs it only at
debug), the exit status (the signal's name), and for a crash or running out of
memory the REPL's last stderr line. The supervisor calls it when it reaps a
worker. May import: worker (the Worker's public reads, its exit words).
"""

from __future__ import annotations

import logging

from ..worker.process import describe_status
from ..worker.worker import ExitCause, Worker, last_stderr_line

__all__ = ["log_worker_exit"]

log = logging.getLogger("leanrpc.pool")

# One log line per worker exit, in words a person reads (docs: issue 29).
_EXIT_WORDS = {
    ExitCause.TIMEOUT: ("warning", "killed after a timeout"),
    ExitCause.CRASH: ("warning", "crashed"),
    ExitCause.OUT_OF_MEMORY: ("warning", "ran out of memory"),
    ExitCause.GARBAGE: ("warning", "poisoned (wrote garbage on stdout)"),
    ExitCause.POISONED: ("warning", "poisoned"),
    ExitCause.CANCELLED: ("info", "killed: its request was cancelled"),
    ExitCause.MAX_REQUESTS: ("info", "recycled after max_requests"),
    ExitCause.SYSTEM_MEMORY: ("warning", "recycled: memory"),
    ExitCause.HEADER_SWITCH: ("info", "recycled for another header"),
    ExitCause.HEADER_FAILED: ("warning", "stopped: its header failed to load"),
    ExitCause.STDERR: ("warning", "stopped: too much stderr"),
    ExitCause.BOOT_FAILURE: ("debug", "gone after a failed boot"),  # the boot line said why
    ExitCause.SHUTDOWN: ("debug", "stopped for shutdown"),
    ExitCause.TRUSTED_CODE: ("info", "retired: it ran a trusted client's code"),
}


def log_worker_exit(worker: Worker) -> None:
    cause = worker.exit_cause or ExitCause.CRASH
    level, words = _EXIT_WORDS.get(cause, ("warning", cause.value))
    status = describe_status(worker.returncode)
    last = (
        last_stderr_line(worker.stderr_tail())
        if cause in (ExitCause.CRASH, ExitCause.OUT_OF_MEMORY)
        else ""
    )
    # A poisoned worker's one line carries the channel's reason (the channel logs it at debug).
    why = worker.poisoned_why if cause in (ExitCause.GARBAGE, ExitCause.POISONED) else ""
    log.log(
        logging.getLevelName(level.upper()),
        "worker %s %s%s%s%s",
        worker.name,
        words,
        f": {why}" if why else "",
        status,
        f": {last}" if last else "",
        extra={"worker": worker.name, "event": cause.value},
    )
