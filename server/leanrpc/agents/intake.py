"""The MCP door's share of the byte budget for requests in flight (issue 44 item 1).

Owns: `Budgeted`, a pure ASGI middleware that charges each HTTP request's
body to the server's one `ByteBudget` (edge/budget.py) under its peer's
address, as the REST gateway (gateway/intake.py) and gRPC
(edge/interceptors/budget.py) do: a declared Content-Length is charged before
a byte of the body is read, a chunked body chunk by chunk as it arrives, and
the decoded request (the SDK parses the JSON into Python objects) up to
`decoded_bound` of the raw bytes once the body is whole. Past the peer's or the
server's budget the request gets 503 with Retry-After before anything more is
read; the rest of a refused body is read and thrown away up to
`memory.discard_mb`, so the client reads the refusal instead of a reset. Every
charge is given back once the app has answered.

Copies: the body is read here, one chunk list joined once, and handed to the
SDK as one `http.request` message (the SDK reads the whole body into memory
anyway before it parses it), so the middleware adds no copy beyond the join.

May import: edge.budget (the one budget), the standard library.
"""

from __future__ import annotations

import json

from ..edge.budget import BudgetExceeded, ByteBudget, decoded_bound

__all__ = ["Budgeted"]


class Budgeted:
    """ASGI middleware: `app` with every request body charged to `budget`."""

    def __init__(self, app, budget: ByteBudget, discard_bytes: int) -> None:
        self._app = app
        self._budget = budget
        self._discard = discard_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        client = scope.get("client")
        ticket = self._budget.ticket(client[0] if client else "?")
        try:
            body = await self._read(scope, receive, ticket)
        except BudgetExceeded as exc:
            ticket.close()  # the discarded rest was never charged
            await _refuse(send, exc)
            return
        try:
            sent = False

            async def replay():
                nonlocal sent
                if sent:  # the body was given: what follows is the client going away
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self._app(scope, replay, send)
        finally:
            ticket.close()

    async def _read(self, scope, receive, ticket) -> bytes:
        """The whole body, charged as it arrives; BudgetExceeded after discarding the rest."""
        charged = _content_length(scope)
        chunks: list[bytes] = []
        seen = 0
        more = True
        try:
            if charged:
                ticket.acquire(charged)  # before a byte of the body is read
            while more:
                message = await receive()
                if message["type"] != "http.request":  # the client went away mid-body
                    break
                chunk = message.get("body", b"")
                more = message.get("more_body", False)
                seen += len(chunk)
                if seen > charged:  # chunked, or more than it declared
                    ticket.acquire(seen - charged)
                    charged = seen
                chunks.append(chunk)
        except BudgetExceeded:
            if more:
                await self._drain(receive, seen)
            raise
        body = b"".join(chunks)
        ticket.acquire(decoded_bound(body))  # the SDK's parsed copy of it
        return body

    async def _drain(self, receive, already: int) -> None:
        """Read and drop the rest of a refused body, up to the discard limit."""
        read = already
        while read <= self._discard:
            message = await receive()
            if message["type"] != "http.request":
                return
            read += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def _content_length(scope) -> int:
    for key, value in scope.get("headers", ()):
        if key == b"content-length":
            try:
                return max(0, int(value))
            except ValueError:
                return 0
    return 0


async def _refuse(send, exc: BudgetExceeded) -> None:
    body = json.dumps({"error": str(exc), "retry_after_s": exc.retry_after_s}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", str(max(1, round(exc.retry_after_s))).encode()),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
