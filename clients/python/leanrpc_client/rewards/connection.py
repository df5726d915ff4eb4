"""One channel per process (and per event loop), made again after a fork.

Owns `async_client(address, token, retries)`: the AsyncClient of the running event
loop in this process, and `sync_runner()`: a private event loop on a daemon thread
for callers without one (TRL's sync reward functions, verl's executor threads,
OpenRLHF's file form). Trainers fork workers (Ray, DataLoader, multiprocessing): a
gRPC channel does not survive a fork, so every cache is keyed by the process id
and a child builds its own on first use. Before a fork the parent's loop and channels
close, and the fork waits (at most 2 s; 10 s while the core's shutdown thread runs) until
gRPC's core has shut down (`_quiesced`): closing the last channel hands the core's shutdown
to a detached thread, and a child forked while that thread and the core's event-engine
threads still run inherits their locks held and hangs in its first `insecure_channel`
(seen 3 times in 600 forks under load, 2026-12-05). May import: the client (AsyncClient).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, Coroutine

from ..aio import AsyncClient

_lock = threading.Lock()
_clients: dict[tuple[int, int, str, str | None, int], AsyncClient] = {}
_runner: "_Runner | None" = None

# Threads gRPC's core starts and names (src/core: init.cc's "grpc_shutdown", the event
# engine's pool and its lifeguard, the timer manager "grpc_global_timer", which the
# kernel cuts to 15 characters). Read from /proc/self/task/*/comm (Linux; elsewhere
# nothing is read and a fork does not wait).
_CORE_THREADS = frozenset({"grpc_shutdown", "event_engine", "lifeguard", "grpc_global_tim"})
_QUIESCE_S = 2.0
# How long a fork waits once the core's shutdown thread is seen running: gRPC's shutdown waits
# for its thread pool to quiesce, and the pool's lifeguard checks on a backoff that grows to a
# second (grpc/grpc#39258), so under load a shutdown took over 2 s (CI, 2026-12-07).
_SHUTDOWN_S = 10.0


def async_client(address: str, token: str | None, retries: int) -> AsyncClient:
    """This process's client for `address` on the running loop (one channel each)."""
    loop = asyncio.get_running_loop()
    key = (os.getpid(), id(loop), address, token, retries)
    with _lock:
        client = _clients.get(key)
        if client is None:
            for stale in [k for k in _clients if k[0] != os.getpid()]:
                del _clients[stale]  # inherited across a fork: never touched here
            client = _clients[key] = AsyncClient(address, token=token, max_retries=retries)
    return client


class _Runner:
    """An event loop on a daemon thread, owned by one process."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, name="leanrpc-rewards", daemon=True)
        self.thread.start()
        ready.wait()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        """Closes the channels made on this loop and ends its thread."""

        async def close_all() -> None:
            mine = [k for k in _clients if k[1] == id(self.loop)]
            for key in mine:
                await _clients.pop(key).close()

        asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def sync_runner() -> _Runner:
    global _runner
    with _lock:
        if _runner is None or _runner.pid != os.getpid():
            _runner = _Runner()
        return _runner


def _before_fork() -> None:
    """gRPC's core cannot cross a fork with a channel in use: the parent's own
    loop and channels end first (made again on the next call, in each process),
    and the fork waits for the core's shutdown to end (`_quiesced`)."""
    global _runner
    with _lock:
        runner, _runner = _runner, None
    if runner is not None and runner.pid == os.getpid():
        before = set(_native_threads())
        runner.stop()
        _quiesced(before, _QUIESCE_S)


def _native_threads() -> dict[int, str]:
    """This process's threads that are not Python's (thread id -> name); empty
    where /proc/self/task cannot be read."""
    python = {t.native_id for t in threading.enumerate()}
    out: dict[int, str] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in map(int, tasks):
        if tid in python:
            continue
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="ascii", errors="replace") as f:
                out[tid] = f.read().strip()
        except OSError:
            continue  # a thread that ended meanwhile
    return out


def _settled(before: set[int], now: dict[int, str]) -> bool:
    """No gRPC core thread is left, and no native thread born since `before` (the
    core's shutdown thread is born as the last channel closes and takes its name
    only once it runs). Other native threads (a trainer's BLAS or OpenMP pool) stay."""
    return all(tid in before and name not in _CORE_THREADS for tid, name in now.items())


def _quiesced(
    before: set[int],
    bound_s: float,
    clock=time.monotonic,
    nap=time.sleep,
    shutdown_s: float = _SHUTDOWN_S,
) -> bool:
    """True once `_settled`, False at the bound: gRPC still in use elsewhere in the
    process keeps its threads, and the fork then goes on as it would have without us.
    While the core's shutdown thread is seen running, the bound is `shutdown_s`: that
    shutdown is under way, and a child forked before it ends may hang."""
    start = clock()
    while True:
        threads = _native_threads()
        if _settled(before, threads):
            return True
        shutting = "grpc_shutdown" in threads.values()
        if clock() - start >= (shutdown_s if shutting else bound_s):
            return False
        nap(0.002)


os.register_at_fork(before=_before_fork)
