"""One channel per process (and per event loop), made again after a fork.

Owns `async_client(address, token, retries)`: the AsyncClient of the running event
loop in this process, and `sync_runner()`: a private event loop on a daemon thread
for callers without one (TRL's sync reward functions, verl's executor threads,
OpenRLHF's file form). Trainers fork workers (Ray, DataLoader, multiprocessing): a
gRPC channel does not survive a fork, so every cache is keyed by the process id
and a child builds its own on first use. May import: the client (AsyncClient).
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Coroutine

from ..aio import AsyncClient

_lock = threading.Lock()
_clients: dict[tuple[int, int, str, str | None, int], AsyncClient] = {}
_runner: "_Runner | None" = None


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
    loop and channels end first (made again on the next call, in each process)."""
    global _runner
    with _lock:
        runner, _runner = _runner, None
    if runner is not None and runner.pid == os.getpid():
        runner.stop()


os.register_at_fork(before=_before_fork)
