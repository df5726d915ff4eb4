"""The circuit breaker of REPL boots: when boot failures stop the pool.

Owns `CircuitBreaker` (split from pool/supervisor.py, which owns one and
counts every boot through it). May import nothing of the project.
"""

from __future__ import annotations

import logging
import re
import time

__all__ = ["CircuitBreaker"]

log = logging.getLogger("leanrpc.pool")

_WORKER_NAME = re.compile(r"\bworker w\d+\b")


def _one_line(exc: BaseException) -> str:
    """A boot failure for the health reason: its message on one line, without
    the stderr tail kept as its detail (the message already quotes the cause)."""
    return " ".join(str(getattr(exc, "message", None) or exc).split())


class CircuitBreaker:
    """Opens after `limit` consecutive boot failures; half-open after `cooldown_s`.

    The clock is passed in, so tests drive it without sleeping.
    """

    def __init__(self, limit: int, cooldown_s: float, clock=time.monotonic) -> None:
        self.limit = limit
        self.cooldown_s = cooldown_s
        self._clock = clock
        self.consecutive_failures = 0
        self.opened_at: float | None = None
        self.reason = ""
        self.first_cause = ""  # the first failure of the current streak (the real cause, usually)

    def record_failure(self, exc: BaseException) -> bool:
        """Counts a boot failure; True when this one opened (or re-opened) it."""
        cause = _one_line(exc)
        if self.consecutive_failures == 0:
            self.first_cause = cause
        self.consecutive_failures += 1
        if self.consecutive_failures < self.limit:
            return False
        first = self.opened_at is None
        self.opened_at = self._clock()
        same = _WORKER_NAME.sub("worker", cause) == _WORKER_NAME.sub("worker", self.first_cause)
        last = "" if same else f"; last: {cause}"
        self.reason = f"{self.consecutive_failures} consecutive REPL boot failures; first: {self.first_cause}{last}"
        if first:
            log.error(
                "circuit breaker open after %d boot failures: %s", self.consecutive_failures, exc
            )
        return True

    def record_success(self) -> None:
        if self.opened_at is not None:
            log.info("REPL booted again; closing the circuit breaker")
        self.consecutive_failures = 0
        self.opened_at = None
        self.first_cause = ""

    def allow(self) -> bool:
        """False while open; True when closed or half-open (the next boot may try)."""
        if self.opened_at is None:
            return True
        return self._clock() - self.opened_at >= self.cooldown_s
