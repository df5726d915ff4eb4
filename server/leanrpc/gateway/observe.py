"""What the REST door tells the operator: one log line per request, and the
same metric families as gRPC with door="rest".

    POST /api/check from peer:127.0.0.1: 3 snippets (VALID 2, INVALID 1) 200 in 35 ms

`observe_middleware(metrics)` is an aiohttp middleware. Snippet outcomes are
gathered through a ContextVar: `note_outcome(result)` (called where each
snippet's result is made) adds its status and phase times to the request it
runs under, since asyncio tasks inherit the request's context.

May import: aiohttp, edge.identity (client identity), the standard library.
"""

from __future__ import annotations

import collections
import contextvars
import logging
import time

from aiohttp import web

from ..edge.identity import CallerIdentity

log = logging.getLogger("leanrpc.requests")


class _Outcomes:
    """What one REST request's snippets came to: a count per status, and
    (queue, header, body, total) seconds per snippet."""

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.phases: list[tuple[float, float, float, float]] = []


_OUTCOMES: contextvars.ContextVar[_Outcomes | None] = contextvars.ContextVar(
    "leanrpc_rest_outcomes", default=None
)
# Routes whose requests are not worth a line at INFO (probes, the API page).
_QUIET = {"/health", "/health/", "/", "/openapi.json", "/docs"}


def note_outcome(result) -> None:
    """One snippet's result (results.Result) under the current REST request."""
    outcomes = _OUTCOMES.get()
    if outcomes is not None:
        outcomes.counts[result.status.name] += 1
        t = result.timings
        outcomes.phases.append((t.queue_s, t.header_s, t.body_s, t.total_s))


def note_refused() -> None:
    """One snippet refused before it ran (empty, too long, queue full): counted
    REJECTED under door="rest", as the gRPC door counts its REJECTED answer."""
    outcomes = _OUTCOMES.get()
    if outcomes is not None:
        outcomes.counts["REJECTED"] += 1


def observe_middleware(metrics, tokens_checked: bool):
    @web.middleware
    async def observe(request: web.Request, handler):
        outcomes = _Outcomes()
        reset = _OUTCOMES.set(outcomes)
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            _OUTCOMES.reset(reset)
            seconds = time.perf_counter() - started
            route = (
                request.match_info.route.resource.canonical
                if request.match_info.route.resource
                else "unknown"
            )
            if metrics is not None:
                metrics.observe_rest(route, status, seconds, outcomes.counts, outcomes.phases)
            _log_line(request, route, status, seconds, outcomes.counts, tokens_checked)

    return observe


def _log_line(
    request: web.Request, route: str, status: int, seconds: float, counts, tokens_checked: bool
) -> None:
    level = logging.DEBUG if route in _QUIET else logging.INFO
    if not log.isEnabledFor(level):
        return
    # The gateway's own rule (edge/identity.py), so both doors name a client alike.
    who = CallerIdentity(tokens_checked=tokens_checked).of_http(
        request.headers.get("Authorization"), request.remote
    )
    total = sum(counts.values())
    parts = ", ".join(f"{s} {n}" for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    what = f"{total} snippet{'s' if total != 1 else ''} ({parts}) " if total else ""
    ms = seconds * 1000
    log.log(
        level,
        "%s %s from %s: %s%d in %.0f ms",
        request.method,
        route,
        who,
        what,
        status,
        ms,
        extra={
            "rpc": f"{request.method} {route}",
            "door": "rest",
            "client": who,
            "snippets": total,
            "outcomes": dict(counts),
            "code": status,
            "ms": round(ms, 1),
        },
    )
