"""How a REST request body comes in: access first, then the byte budget, then the body.

Owns: the aiohttp middleware (every route, so routes added later are covered
too) that, for a request with a body,

1. checks access before reading a byte (no token: 401);
2. refuses a body over `server.max_message_mb` (413) or past the byte
   budget (edge/budget.py, per peer address and in all: 503 with
   Retry-After), charging a declared Content-Length before reading and a
   chunked body chunk by chunk as it arrives, never after it is in memory;
3. charges what decoding the JSON will hold, bounded from the bytes before
   any decoding (`decoded_bound`), so no handler decodes past the budget;
4. reads the body within `gateway.body_timeout_s` (else 408);
5. answers every refusal readably (issue 44 item 3): it reads and throws
   away at most `memory.discard_mb` of the rest of the body (the client is
   still sending it, and a close with unread bytes would reach it as a TCP
   reset instead of the answer), answers, then closes the connection.

Copies of a body: the kernel's bytes arrive in aiohttp's chunks (at most
2 x 64 KiB buffered per connection: aiohttp's own `read()` raises that to
2 x client_max_size, which is why this middleware reads instead), each copied
once into one bytearray of the declared length (chunked: grown by extend).
That bytearray is handed to the handler as the request's body (aiohttp's
`read()`, `text()` and `json()` return it; `_read_bytes` is where aiohttp
caches a body it read, pinned by tests/memory/test_budget_units.py). The handler
decodes it (msgspec: one more copy, the decoded strings, charged in step 3).
So two whole copies remain, both charged: the bytes, since msgspec decodes a
whole document (it has no incremental decoding into typed structs), and the
decoded strings, which are what the handler works on. The bytes stay charged
until the response is built, and are freed then (`_drop`); the response's
own bytes are not charged.

May import: aiohttp, config, edge.budget, gateway.kimina (the refusal's JSON shape).
"""

from __future__ import annotations

import asyncio
import math

from aiohttp import web

from ..edge.budget import BudgetExceeded, ByteBudget, Ticket, decoded_bound
from . import kimina

__all__ = ["intake_middleware"]


def _answer(status: int, detail: str, headers: dict | None = None) -> web.Response:
    return web.Response(
        body=kimina.encode({"detail": detail}),
        status=status,
        content_type="application/json",
        headers={**(headers or {}), "Connection": "close"},
    )


async def _discard(request: web.Request, limit: int, timeout_s: float) -> None:
    """Reads and drops up to `limit` bytes of the body, for at most `timeout_s`."""
    seen = 0
    try:
        async with asyncio.timeout(timeout_s):
            while seen <= limit:
                chunk = await request.content.readany()
                if not chunk:
                    return
                seen += len(chunk)
    except (asyncio.TimeoutError, ConnectionError):
        return


def intake_middleware(budget: ByteBudget, config, refuse_access):
    """The middleware; `refuse_access(request)` returns a 401 response or None."""
    max_body = config.server.max_message_mb * 2**20
    discard = config.memory.discard_mb * 2**20
    timeout_s = config.gateway.body_timeout_s

    async def refuse(request: web.Request, response: web.Response) -> web.Response:
        await _discard(request, discard, timeout_s)
        response.headers["Connection"] = "close"
        return response

    @web.middleware
    async def intake(request: web.Request, handler):
        if not request.body_exists:
            return await handler(request)
        refused = refuse_access(request)
        if refused is not None:
            return await refuse(request, refused)
        ticket = budget.ticket(str(request.remote))
        body = None
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    body = await _read(request, ticket, max_body)
                ticket.acquire(decoded_bound(body))
            except BudgetExceeded as exc:
                ticket.close()  # nothing kept: the discarded rest is never charged
                retry = str(max(1, math.ceil(exc.retry_after_s)))
                return await refuse(request, _answer(503, exc.message, {"Retry-After": retry}))
            except web.HTTPRequestEntityTooLarge:
                ticket.close()
                return await refuse(
                    request,
                    _answer(
                        413,
                        f"the request body is over {max_body // 2**20} MB (server.max_message_mb)",
                    ),
                )
            except asyncio.TimeoutError:
                return _answer(
                    408,
                    f"the request body did not arrive within {timeout_s:g} s (gateway.body_timeout_s)",
                )
            request._read_bytes = body  # aiohttp's cache of a read body (see the docstring)
            return await handler(request)
        finally:
            _drop(request, body)
            ticket.close()

    return intake


def _drop(request: web.Request, body: bytearray | None) -> None:
    """Frees the body's bytes now, before they are given back to the budget.

    aiohttp keeps a connection's last request alive until the next request,
    and a handler's frames can sit in a reference cycle (an exception's
    traceback) until the cyclic collector runs: either would keep the
    bytearray, so it is emptied, not only dropped.
    """
    request._read_bytes = None
    if body is not None:
        try:
            body.clear()
        except BufferError:  # a view of it is still exported: freed when that goes
            pass


async def _read(request: web.Request, ticket: Ticket, max_body: int) -> bytearray:
    """The body, each byte charged to `ticket` before it is kept."""
    declared = request.content_length
    if declared is not None:
        if declared > max_body:
            raise web.HTTPRequestEntityTooLarge(max_size=max_body, actual_size=declared)
        ticket.acquire(declared)
        body = bytearray(declared)
        view = memoryview(body)
        filled = 0
        while filled < declared:
            chunk = await request.content.readany()
            if not chunk:
                break  # aiohttp's parser ends a short body with an error of its own
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
        view.release()
        if filled < declared:
            del body[filled:]
        return body
    body = bytearray()
    while True:
        chunk = await request.content.readany()
        if not chunk:
            return body
        if len(body) + len(chunk) > max_body:
            raise web.HTTPRequestEntityTooLarge(
                max_size=max_body, actual_size=len(body) + len(chunk)
            )
        ticket.acquire(len(chunk))
        body += chunk
