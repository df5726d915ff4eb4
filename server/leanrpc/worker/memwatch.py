"""The memory watch of one worker: whether its process tree is over its memory limit, and a
timer that looks while commands are in flight.

Owns: `MemoryWatch` (`verdict`, the check the channel also asks when a command's time runs
out; `start`/`stop`, around the worker's serving life; `exchanging`, around each
exchange) and the one poll timer the watches of an event loop share (`_Ticker`). What the
tree's memory is, is worker/memory.py's (through the sample function it is given: asked
with the limit, it may answer an upper bound that is within it); what happens when the tree
is over, the worker's (`on_over`). May import: leanrpc.config, leanrpc.errors,
leanrpc._native.memwatch (only once a tree has a plan: worker/memory.py chose that build),
asyncio, itertools, os, weakref.

One timer per event loop and poll period (no task), shared by every watch (issue 38 item
6: one wakeup per period for all workers, not one per worker): a watch joins it when a
command starts, it looks at every joined watch every `limits.memory_poll_s` while commands
are in flight, a watch leaves at the first look that finds none, and the timer stops when
no watch is left, so an idle server costs no wakeup. A watch that joins mid-period gets its
first look at the timer's next tick, within `memory_poll_s` (never later than a timer of
its own would have looked). Between commands the tree is measured at release
(Pool.release) and when a command's time runs out, so a short-request workload (tactics)
pays one cheap sample per request and no task churn. Boot probes are not watched.

Off the event loop where it can be (`_NativeTicker`, issue 38 item 6): a look on the loop
woke the server and ran Python and /proc reads cold, about 0.2 ms of the main thread per
tick. A watch whose tree has a plan (`tree_plan`: the statm files and the rest of the poll's
fast path, worker/memory.py `TreeMemory.native_plan`) is armed on one C thread per process and
period (leanrpc._native.memwatch: no GIL while it looks) from the start of each exchange
to its end (then paused, and released at the thread's next tick unless the next exchange
resumes it: back-to-back exchanges cost no system call), and the loop is woken only for a tree that thread cannot answer "within"
for (over the bound, Shmem grown, a child its list lacks or a shared-memory file held at the
thread's own once-a-second list refresh and fd scan, a file unreadable): that tree gets the
whole Python look (`_look`, the same verdict as on the loop ticker) and is armed again.
A tree in its own cgroup is armed with its memory.stat. Where the extensions are off, or
the plan is None (shared-memory files seen, a large tree), the loop ticker below looks,
as before.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import weakref
from typing import Callable, Protocol

from ..config import LimitsConfig
from ..errors import WorkerOutOfMemory

__all__ = ["MeasuredTree", "MemoryWatch"]


class MeasuredTree(Protocol):
    """The watch's port to a worker's tree (worker/process.py `ReplProcess`)."""

    def tree_within(self, limit: int) -> int:
        """The tree's memory in bytes, or an upper bound of it that is within `limit`."""

    def tree_plan(self):
        """The poll's numbers for the C thread (worker/memory.py `NativePlan`), or None."""


class MemoryWatch:
    def __init__(
        self,
        name: str,
        limits: LimitsConfig,
        tree: MeasuredTree,
        stderr_tail: Callable[[], str],
        *,
        on_over: Callable[[WorkerOutOfMemory], None],
    ) -> None:
        self._name = name
        self._limits = limits
        self._tree_memory = tree.tree_within  # (limit in bytes) -> bytes, or a bound within it
        self._stderr_tail = stderr_tail
        self._on_over = on_over
        self._watching = False  # the watch runs (after the handshake)
        self._ticker: _Ticker | None = None  # the shared timer, while this watch is on it
        self._exchanging = False  # a command is in flight (the watch looks then)
        self._native_plan = tree.tree_plan  # the tree's numbers for the C thread, or None
        self._native: _NativeTicker | None = None  # the C thread's, while armed on it

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
        self._leave_native()

    def exchanging(self, active: bool) -> None:
        """A command (or batch) starts or ends. A start arms the C thread (or resumes its
        arming, or joins the loop's shared timer); an end pauses the C thread's arming,
        released at its next tick unless the next exchange comes first (the loop's timer
        is left at its next look)."""
        self._exchanging = active
        if not active:
            if self._native is not None:
                self._native.pause(self)
        elif self._watching and self._ticker is None:
            if self._native is not None and self._native.resume(self):
                return
            self._native = None
            self._join()

    def _join(self) -> None:
        """On the C thread where the tree has a plan for it, else on the loop's timer."""
        plan = self._native_plan()
        if plan is not None:
            try:
                native = _NativeTicker.of(self._limits.memory_poll_s)
            except OSError:  # no thread (eventfd refused): the loop's timer looks instead
                native = None
            if native is not None and native.arm(
                self, self._limits.max_worker_rss_mb * 2**20, plan
            ):
                self._native = native
                return
        self._ticker = _Ticker.of(asyncio.get_running_loop(), self._limits.memory_poll_s)
        self._ticker.join(self)

    def _leave_native(self) -> None:
        if self._native is not None:
            self._native.disarm(self)
            self._native = None

    def _looked_natively(self) -> None:
        """The C thread could not answer for this tree: the whole look, here on the loop,
        then armed again (or on the loop's timer) while commands are still in flight."""
        self._native = None
        if self._look() and self._exchanging and self._watching and self._ticker is None:
            self._join()

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


class _NativeTicker:
    """The C thread of a process and poll period (leanrpc._native.memwatch.Watcher), shared by
    the watches of every event loop: each armed watch is looked at there every period, and
    handed back to its own loop when that look cannot answer "within"."""

    _of: dict[float, _NativeTicker] = {}
    _pid = os.getpid()

    def __init__(self, period: float) -> None:
        # Imported here: a tree has a plan only where worker/memory.py chose this compiled
        # build (Linux, extensions on), and only a tree with a plan starts a thread.
        from .._native import memwatch as native

        self._keys = itertools.count(1)  # a fresh key per arming: a late hand-back is ignored
        self._armed: dict[int, tuple[asyncio.AbstractEventLoop, MemoryWatch]] = {}
        self._key_of: dict[MemoryWatch, int] = {}
        self._watcher = native.Watcher(period, self._notify, os.sysconf("SC_PAGE_SIZE"))

    @classmethod
    def of(cls, period: float) -> _NativeTicker:
        if os.getpid() != cls._pid:  # a forked child: the parent's thread is not here
            cls._of, cls._pid = {}, os.getpid()
        ticker = cls._of.get(period)
        if ticker is None:
            ticker = cls._of[period] = cls(period)
        return ticker

    def arm(self, watch: MemoryWatch, limit: int, plan) -> bool:
        """True when the watch is armed on the C thread with its tree's `plan`
        (worker/memory.py `NativePlan`); False: the loop's timer must look."""
        self.disarm(watch)  # an earlier arming, released by the thread or not
        key = next(self._keys)
        try:
            self._watcher.arm(
                key,
                plan.statm_fds,
                plan.held,
                limit,
                plan.shmem_base,
                plan.shmem_step,
                plan.due,
                plan.cgroup_fd,
                plan.pids,
                plan.rescan_s,
            )
        except (ValueError, OSError, MemoryError):
            return False
        self._armed[key] = (asyncio.get_running_loop(), watch)
        self._key_of[watch] = key
        return True

    def disarm(self, watch: MemoryWatch) -> None:
        key = self._drop(watch)
        if key is not None:
            self._watcher.disarm(key)

    def pause(self, watch: MemoryWatch) -> None:
        key = self._key_of.get(watch)
        if key is not None:
            self._watcher.pause(key)

    def resume(self, watch: MemoryWatch) -> bool:
        """True when the watch's arming was still there (now looked at again)."""
        key = self._key_of.get(watch)
        return key is not None and self._watcher.resume(key)

    def _drop(self, watch: MemoryWatch) -> int | None:
        key = self._key_of.pop(watch, None)
        if key is not None:
            self._armed.pop(key, None)
        return key

    def _notify(self, keys: list[int]) -> None:
        """On the C thread (GIL held): each key's look goes to its own loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[int]] = {}
        for key in keys:
            armed = self._armed.get(key)
            if armed is not None:
                by_loop.setdefault(armed[0], []).append(key)
        for loop, those in by_loop.items():
            try:
                loop.call_soon_threadsafe(self._looks, those)
            except RuntimeError:  # the loop is closed: nobody is left to look
                for key in those:
                    self._drop(self._armed[key][1])

    def _looks(self, keys: list[int]) -> None:
        """On the watches' loop: the whole look at each tree handed back."""
        for key in keys:
            armed = self._armed.get(key)
            if armed is None:
                continue  # disarmed (or armed again) since
            watch = armed[1]
            self._drop(watch)
            try:
                watch._looked_natively()
            except Exception as exc:  # noqa: BLE001 - one watch's failure stops only that watch
                asyncio.get_running_loop().call_exception_handler(
                    {"message": "memory watch look failed", "exception": exc}
                )
