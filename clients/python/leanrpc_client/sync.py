"""The blocking client: an AsyncClient on one private event-loop thread.

Owns: the loop thread and handing calls to it. Every method submits its
coroutine to the client's own loop (asyncio.run_coroutine_threadsafe) and
waits for the answer, so one Client can be shared by several threads and
used inside a running event loop (a notebook) without touching that loop.
`Client.local(...)` connects to a server of the process's own (_local).
A Client pickles as its address and options (trainers and Ray tasks pickle
their callables): the copy opens a channel of its own where it is loaded.
May import: aio, _types, _convert, _local.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, Iterable, Sequence

from . import _local
from ._convert import snippet_list
from ._types import Interrupted, Result, SessionResult
from .aio import AsyncClient
from .formalizer import SyncFormalizerCalls
from .prover import SyncProverCalls


class Client(SyncProverCalls, SyncFormalizerCalls):
    """Blocking client; same methods as AsyncClient. Thread-safe; close() once done."""

    def __init__(self, address: str = "127.0.0.1:50051", **kwargs) -> None:
        self._address = address
        self._kwargs = dict(kwargs)
        self._local_key: tuple | None = None
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="leanrpc-client-loop", daemon=True
        )
        self._thread.start()
        try:
            self._async: AsyncClient = self._run(self._make(address, kwargs))
        except BaseException:
            self._stop_loop()
            raise

    @classmethod
    def local(
        cls,
        *,
        workers: int | None = None,
        config=None,
        repl_cmd: str | None = None,
        **kwargs,
    ) -> "Client":
        """A Client of a server this process starts on a free loopback port
        (`leanrpc serve`; no separate server to run). One server is shared by
        every `Client.local` call with the same settings in the process, and it
        stops when the process exits; closing the Client closes only its channel.

        Args:
            workers: REPL worker processes (None: the server's default).
            config: a leanrpc.toml path, or a dict of sections
                ({"pool": {"default_timeout_s": 30}}); None: the defaults.
            repl_cmd: the REPL command line (None: the config's, else the stand-in).
            **kwargs: the Client's own options (token, max_retries, ...).
        """
        server = _local.shared(workers, config, repl_cmd)
        client = cls(server.address, **kwargs)
        client._local_key = (workers, config, repl_cmd)
        return client

    @staticmethod
    def stop_local() -> None:
        """Stops every server `Client.local` started in this process (they stop
        at exit anyway); a later `Client.local` starts a fresh one."""
        _local.stop_all()

    def __reduce__(self):
        if "credentials" in self._kwargs:
            raise TypeError(
                "a Client with credentials= cannot be pickled (gRPC credentials cannot); "
                "build the Client where it is used"
            )
        return (_rebuilt, (self._address, self._kwargs, self._local_key))

    @staticmethod
    async def _make(address: str, kwargs: dict) -> AsyncClient:
        return AsyncClient(address, **kwargs)  # the channel binds to this (the private) loop

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if self._closed:
            coro.close()
            raise RuntimeError("this leanrpc Client is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a blocking Client method was called from its own loop thread")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt in the caller: stop the work too
            raise

    @property
    def address(self) -> str:
        """The server address this client was made for ("host:port")."""
        return self._address

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result()
        finally:
            self._stop_loop()

    async def _shutdown(self) -> None:
        await self._async.close()
        # gRPC leaves status-watcher tasks behind; finish them as asyncio.run
        # would, so closing the loop prints no warnings.
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        await self._loop.shutdown_asyncgens()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def verify(self, snippets: Iterable, **kwargs) -> list[Result]:
        """AsyncClient.verify, blocking. Ctrl-C raises `Interrupted` (a
        KeyboardInterrupt) whose `partial` holds the results received so far;
        `on_result` is called on the client's loop thread."""
        snippets = snippet_list(snippets, "verify")
        received: dict[int, Result] = {}
        user = kwargs.pop("on_result", None)

        def on_result(n: int, result: Result) -> None:
            received[n] = result
            if user is not None:
                user(n, result)

        try:
            return self._run(self._async.verify(snippets, on_result=on_result, **kwargs))
        except KeyboardInterrupt as exc:
            if isinstance(exc, Interrupted):
                raise
            partial = [received[n] for n in sorted(dict(received))]
            raise Interrupted(partial, len(snippets)) from None

    def verify_batch(self, snippets: Sequence, **kwargs) -> list[Result]:
        snippets = snippet_list(snippets, "verify_batch")
        return self._run(self._async.verify_batch(snippets, **kwargs))

    def extract(self, code: str, **kwargs):
        return self._run(self._async.extract(code, **kwargs))

    def score_formalization(self, candidates, **kwargs):
        return self._run(self._async.score_formalization(candidates, **kwargs))

    def server_info(self):
        return self._run(self._async.server_info())

    def open_session(self, code: str, **kwargs) -> SessionResult:
        return self._run(self._async.open_session(code, **kwargs))

    def run_in_session(self, session: str, code: str, **kwargs) -> SessionResult:
        return self._run(self._async.run_in_session(session, code, **kwargs))

    def close_session(self, session: str) -> bool:
        return self._run(self._async.close_session(session))


def _rebuilt(address: str, kwargs: dict, local_key: tuple | None) -> Client:
    """A pickled Client, loaded: a local one reaches its loading process's own server."""
    if local_key is not None:
        workers, config, repl_cmd = local_key
        return Client.local(workers=workers, config=config, repl_cmd=repl_cmd, **kwargs)
    return Client(address, **kwargs)
