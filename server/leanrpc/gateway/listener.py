"""The gateway's listening socket: accept, at most N connections per peer address, slow peers cut off.

    listen(app, host, port, cap=..., header_timeout_s=...) -> Listener
    Listener.port, .open (connections by peer), .stop_accepting(), .close()

Built from public API only (issue 42 item 4): aiohttp's low-level `web.Server`
is a documented asyncio protocol factory (aiohttp "Low Level Server":
`loop.create_server(server, host, port)`), reached through the runner's public
`server` property, and `asyncio.loop.create_server` takes any factory. The cap
wraps that factory: `PeerCap()` returns a small protocol (`_Counted`) that
counts the connection under its peer address and forwards every asyncio
protocol callback to aiohttp's handler, or, over the cap, answers 429 and
closes without ever handing the connection to aiohttp. Nothing of aiohttp's is
overridden or retyped (the old cap overrode `AppRunner._make_server` and
swapped the handler's `__class__`).

Slow or greedy peers (issue 26 item 6): aiohttp closes a connection whose
request headers are not complete `header_timeout_s` after it opened (or after
the last answer on it: its keep-alive timer, which also closes a connection
that is only idle); such a connection counts against its peer's cap until it
is closed. Bodies are gateway/intake.py's (its middleware times them).

May import: asyncio, collections, logging, aiohttp (public API).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging

from aiohttp import web

log = logging.getLogger("leanrpc.gateway")

_TOO_MANY = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _peer_of(transport) -> str:
    peer = transport.get_extra_info("peername") if transport is not None else None
    return str(peer[0]) if isinstance(peer, (tuple, list)) and peer else str(peer)


class _Counted(asyncio.Protocol):
    """One connection: counted under its peer, then aiohttp's handler (or a 429 over the cap)."""

    def __init__(self, cap: PeerCap) -> None:
        self._cap = cap
        self._inner: asyncio.Protocol | None = None
        self._peer: str | None = None

    def connection_made(self, transport) -> None:
        cap = self._cap
        peer = self._peer = _peer_of(transport)
        cap.open[peer] += 1
        if cap.limit > 0 and cap.open[peer] > cap.limit:
            log.warning(
                "REST gateway: %s holds %d connections (gateway.max_connections_per_peer %d); "
                "refusing one",
                peer,
                cap.open[peer] - 1,
                cap.limit,
            )
            transport.write(_TOO_MANY)
            transport.close()  # after the 429 is flushed; aiohttp never sees it
            return
        self._inner = cap.factory()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        peer, self._peer = self._peer, None
        if peer is not None:
            self._cap.open[peer] -= 1
            if self._cap.open[peer] <= 0:
                del self._cap.open[peer]
        if self._inner is not None:
            self._inner.connection_lost(exc)


class PeerCap:
    """A protocol factory for `loop.create_server`: aiohttp's `factory`, at most
    `limit` open connections per peer address (0: no cap, still counted)."""

    def __init__(self, factory, limit: int) -> None:
        self.factory = factory
        self.limit = limit
        self.open: collections.Counter[str] = collections.Counter()

    def __call__(self) -> asyncio.Protocol:
        return _Counted(self)


@dataclasses.dataclass
class Listener:
    runner: web.AppRunner
    server: asyncio.AbstractServer
    cap: PeerCap
    port: int

    @property
    def open(self) -> dict[str, int]:
        """Open connections by peer address (those refused over the cap until closed)."""
        return dict(self.cap.open)

    def stop_accepting(self) -> None:
        self.server.close()

    async def close(self) -> None:
        """Stop accepting, then aiohttp's own shutdown of the open connections and the app."""
        self.server.close()
        await self.runner.cleanup()


async def listen(
    app: web.Application,
    host: str,
    port: int,
    *,
    cap: int,
    header_timeout_s: float,
    backlog: int = 4096,
) -> Listener:
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=0.5,
        keepalive_timeout=header_timeout_s,
        lingering_time=0,
    )
    await runner.setup()
    peer_cap = PeerCap(runner.server, cap)
    try:
        server = await asyncio.get_running_loop().create_server(
            peer_cap, host, port, backlog=backlog, reuse_address=True
        )
    except OSError:
        await runner.cleanup()
        raise
    bound = server.sockets[0].getsockname()[1] if server.sockets else port
    return Listener(runner=runner, server=server, cap=peer_cap, port=bound)
