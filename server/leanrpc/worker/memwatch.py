"""The memory watch of one worker: whether its process tree is over its memory limit, and a
timer that looks while commands are in flight.

Owns: `MemoryWatch` (`verdict`, the check the channel also asks when a command's time runs
out; `start`/`stop`, around the worker's serving life; `exchanging`, around each
exchange). What the tree's memory is, is worker/memory.py's (through the sample function it
is given); what happens when the tree is over, the worker's (`on_over`). May import:
leanrpc.config, leanrpc.errors, asyncio.

One timer per worker (no task): armed when a command starts and none is pending, it looks
every `limits.memory_poll_s` while commands are in flight and stops when it finds none, so
an idle worker costs no wakeup. Between commands the tree is measured at release
(Pool.release) and when a command's time runs out, so a short-request workload (tactics)
pays one cheap sample per request and no task churn. Boot probes are not watched.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from ..config import LimitsConfig
from ..errors import WorkerOutOfMemory

__all__ = ["MemoryWatch"]


class MemoryWatch:
    def __init__(
        self,
        name: str,
        limits: LimitsConfig,
        tree_rss: Callable[[], int],
        stderr_tail: Callable[[], str],
        *,
        on_over: Callable[[WorkerOutOfMemory], None],
    ) -> None:
        self._name = name
        self._limits = limits
        self._tree_rss = tree_rss
        self._stderr_tail = stderr_tail
        self._on_over = on_over
        self._watching = False  # the watch runs (after the handshake)
        self._timer: asyncio.TimerHandle | None = None  # its next look, while commands run
        self._exchanging = False  # a command is in flight (the watch looks then)

    def verdict(self) -> WorkerOutOfMemory | None:
        """WorkerOutOfMemory if the tree is over its limit now, else None."""
        if self._limits.max_worker_rss_mb <= 0:
            return None
        rss = self._tree_rss()
        if rss <= self._limits.max_worker_rss_mb * 2**20:
            return None
        return WorkerOutOfMemory(
            f"worker {self._name} used {rss / 2**20:.0f} MB, over the "
            f"{self._limits.max_worker_rss_mb} MB limit; killed",
            stderr_tail=self._stderr_tail(),
        )

    def start(self) -> None:
        """The worker booted: its commands are watched from now on (when a limit is set)."""
        self._watching = self._limits.max_worker_rss_mb > 0

    def stop(self) -> None:
        """The worker is gone: no more looks."""
        self._watching = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def exchanging(self, active: bool) -> None:
        """A command (or batch) starts or ends; the first start arms the timer."""
        self._exchanging = active
        if active and self._watching and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self._limits.memory_poll_s, self._look
            )

    def _look(self) -> None:
        self._timer = None
        if not self._exchanging or not self._watching:
            return
        over = self.verdict()
        if over is not None:
            self._on_over(over)
            return
        self._timer = asyncio.get_running_loop().call_later(self._limits.memory_poll_s, self._look)
