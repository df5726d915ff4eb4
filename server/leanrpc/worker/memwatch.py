"""The memory watch of one worker: whether its process tree is over its memory limit, and a
timer that looks while commands are in flight.

Owns: `MemoryWatch` (`verdict`, the check the channel also asks when a command's time runs
out; `start`/`stop`, around the worker's serving life; `exchanging`, around each
exchange) and the one poll timer the watches of an event loop share (`_Ticker`). What the
tree's memory is, is worker/memory.py's (through the sample function it is given: asked
with the limit, it may answer an upper bound that is within it); what happens when the tree
is over, the worker's (`on_over`). May import: leanrpc.config, leanrpc.errors, asyncio,
weakref.

One timer per event loop and poll period (no task), shared by every watch (issue 38 item
6: one wakeup per period for all workers, not one per worker): a watch joins it when a
command starts, it looks at every joined watch every `limits.memory_poll_s` while commands
are in flight, a watch leaves at the first look that finds none, and the timer stops when
no watch is left, so an idle server costs no wakeup. A watch that joins mid-period gets its
first look at the timer's next tick, within `memory_poll_s` (never later than a timer of
its own would have looked). Between commands the tree is measured at release
(Pool.release) and when a command's time runs out, so a short-request workload (tactics)
pays one cheap sample per request and no task churn. Boot probes are not watched.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Callable

from ..config import LimitsConfig
from ..errors import WorkerOutOfMemory

__all__ = ["MemoryWatch"]


class MemoryWatch:
    def __init__(
        self,
        name: str,
        limits: LimitsConfig,
        tree_memory: Callable[[int], int],
        stderr_tail: Callable[[], str],
        *,
        on_over: Callable[[WorkerOutOfMemory], None],
    ) -> None:
        self._name = name
        self._limits = limits
        self._tree_memory = tree_memory  # (limit in bytes) -> bytes, or a bound within it
        self._stderr_tail = stderr_tail
        self._on_over = on_over
        self._watching = False  # the watch runs (after the handshake)
        self._ticker: _Ticker | None = None  # the shared timer, while this watch is on it
        self._exchanging = False  # a command is in flight (the watch looks then)

    def verdict(self) -> WorkerOutOfMemory | None:
        """WorkerOutOfMemory if the tree is over its limit now, else None."""
        if self._limits.max_worker_rss_mb <= 0:
            return None
        limit = self._limits.max_worker_rss_mb * 2**20
        rss = self._tree_memory(limit)
        if rss <= limit:
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
        if self._ticker is not None:
            self._ticker.leave(self)
            self._ticker = None

    def exchanging(self, active: bool) -> None:
        """A command (or batch) starts or ends; the first start joins the shared timer."""
        self._exchanging = active
        if active and self._watching and self._ticker is None:
            self._ticker = _Ticker.of(asyncio.get_running_loop(), self._limits.memory_poll_s)
            self._ticker.join(self)

    def _look(self) -> bool:
        """One look (the ticker's); False when the watch leaves the timer."""
        if not self._exchanging or not self._watching:
            self._ticker = None
            return False
        over = self.verdict()
        if over is not None:
            self._ticker = None
            self._on_over(over)
            return False
        return True


class _Ticker:
    """The one poll timer of an event loop and period: looks at each joined watch per tick."""

    _of: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Ticker]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, period: float) -> None:
        # No reference to the loop (the key of `_of`, which would then never be freed).
        self._period = period
        self._watches: dict[MemoryWatch, None] = {}  # joined, in joining order
        self._timer: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop, period: float) -> _Ticker:
        tickers = cls._of.setdefault(loop, {})
        ticker = tickers.get(period)
        if ticker is None:
            ticker = tickers[period] = cls(period)
        return ticker

    def join(self, watch: MemoryWatch) -> None:
        self._watches[watch] = None
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._period, self._tick)

    def leave(self, watch: MemoryWatch) -> None:
        self._watches.pop(watch, None)
        if not self._watches and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        for watch in list(self._watches):
            if watch not in self._watches:
                continue  # left during this tick (a worker killed by an earlier look)
            try:
                stays = watch._look()
            except Exception as exc:  # noqa: BLE001 - one watch's failure stops only that watch
                watch._ticker = None
                stays = False
                asyncio.get_running_loop().call_exception_handler(
                    {"message": "memory watch look failed", "exception": exc}
                )
            if not stays:
                self._watches.pop(watch, None)
        if self._watches and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._period, self._tick)
