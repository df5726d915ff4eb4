"""The Kimina-compatible HTTP server (aiohttp): routes, auth, admission, lifecycle.

    start_gateway(verify, config) -> Gateway      (Gateway.stop() to shut down)

Every snippet is resolved by the same resolver (services.resolve) and run by
the same `Verifier.run` as gRPC, so the
same pool, fencing, limits and cache apply; the same bearer tokens
(edge.auth) guard it, the caller's identity is named by the same rule
(edge.identity) and passed to Verify (fair admission counts it as that
client), and the same queue admission check refuses a batch
the queue cannot take (429 with Retry-After, as Kimina's "No available
REPLs"). Every accepted snippet gets exactly one result: a refusal after
admission is that snippet's `error`, never a lost entry.

Slow or greedy peers (issue 26 item 6): aiohttp closes a connection whose
request headers are not complete `gateway.header_timeout_s` after it opened
(or after the last answer on it: its keep-alive timer, which also closes a
connection that is only idle); a peer address holding
`gateway.max_connections_per_peer` connections gets its next one answered 429
and closed (`_PeerCap`). Bodies (access first, the byte budget, 401/413/503/408
answered readably) are gateway/intake.py's middleware, on every route (issue 44).

May import: config, errors, results, services.ports, services.resolve, edge.auth, edge.identity,
edge.limiter, edge.budget, gateway.intake, gateway.kimina, gateway.observe (request log
and metrics), gateway.openapi, gateway.reward.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import math

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from ..config import Config
from ..edge.auth import (
    bearer_token_valid,
    load_tokens,
    refuse_open_plain_http,
)
from ..edge.budget import ByteBudget
from ..edge.identity import CallerIdentity
from ..edge.limiter import ClientLimiter, LimitExceeded
from ..errors import LeanServiceError, NotServingError, OverloadedError, RequestError
from ..results import Status
from ..services.ports import Verifier
from ..services.resolve import VerifyOptions
from . import kimina, openapi, reward
from .intake import intake_middleware
from .observe import note_outcome, note_refused, observe_middleware

log = logging.getLogger("leanrpc.gateway")

JSON = "application/json"
NOT_IMPLEMENTED = {
    "/api/ast": "leanrpc does not export Lean ASTs (kimina-ast-server's `lake exe ast-export`); "
    'use /api/check with "infotree", or leanrpc\'s gRPC Extract for tactic steps',
    "/api/ast_code": "leanrpc does not export Lean ASTs (kimina-ast-server's `lake exe ast-export`); "
    'use /api/check with "infotree", or leanrpc\'s gRPC Extract for tactic steps',
}


def _json(payload, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(
        body=kimina.encode(payload), status=status, content_type=JSON, headers=headers
    )


def _detail(status: int, detail, headers: dict | None = None) -> web.Response:
    """FastAPI's error shape, which Kimina's server and client use."""
    return _json({"detail": detail}, status, headers)


class KiminaGateway:
    """Request handlers over one Verifier (services.ports)."""

    def __init__(self, verify: Verifier, config: Config) -> None:
        self._verify = verify
        self._config = config
        self._tokens = [t.encode() for t in load_tokens(config.server)]
        self._identity = CallerIdentity(tokens_checked=bool(self._tokens))
        self._shift_to_body = config.gateway.message_lines == "body"
        # The one per-client limiter every door uses (edge/limiter.py).
        self.limiter = ClientLimiter(config.server.max_concurrent_per_client)
        self._batches = 0
        self._batch_numbers = itertools.count(1)
        self.idle = asyncio.Event()
        self.idle.set()

    # ---- access -------------------------------------------------------------

    def _refuse_access(self, request: web.Request) -> web.Response | None:
        if not self._tokens:
            return None
        header = request.headers.get("Authorization")
        if not header:
            return _detail(401, "Missing API key")
        # Kimina strips an optional "Bearer " prefix; leanrpc tokens are bearer tokens.
        if not header.startswith("Bearer "):
            header = "Bearer " + header
        if not bearer_token_valid(header, self._tokens):
            return _detail(401, "Invalid API key")
        return None

    def _client(self, request: web.Request) -> str:
        # A made-up key buys no new identity when keys are not checked.
        return self._identity.of_http(request.headers.get("Authorization"), request.remote)

    # ---- endpoints ----------------------------------------------------------

    async def check(self, request: web.Request) -> web.Response:
        return await self._batch(
            request,
            kimina.decode_check,
            kimina.check_items,
            kimina.check_options,
            debug_of=lambda r: r.debug,
            backward=False,
        )

    async def verify(self, request: web.Request) -> web.Response:
        return await self._batch(
            request,
            kimina.decode_verify,
            kimina.verify_items,
            kimina.verify_options,
            debug_of=lambda r: False,
            backward=True,
        )

    async def health(self, request: web.Request) -> web.Response:
        snapshot = self._verify.info()
        info = {
            "serving": snapshot.serving,
            "workers": snapshot.size,
            "queue_depth": snapshot.queue_depth,
            "queue_limit": snapshot.queue_limit,
        }
        if snapshot.serving:
            return _json({"status": "ok", kimina.EXTENSION_KEY: info})
        info["reason"] = snapshot.not_serving_reason
        return _json(
            {
                "status": "unavailable",
                "detail": snapshot.not_serving_reason,
                kimina.EXTENSION_KEY: info,
            },
            503,
        )

    async def not_implemented(self, request: web.Request) -> web.Response:
        refused = self._refuse_access(request)
        if refused is not None:
            return refused
        return _detail(
            501, NOT_IMPLEMENTED.get(request.path.rstrip("/"), "not implemented by leanrpc")
        )

    # ---- the batch path -----------------------------------------------------

    async def _batch(
        self, request, decode, items_of, options_of, *, debug_of, backward: bool
    ) -> web.Response:
        refused = self._refuse_access(request)
        if refused is not None:
            return refused
        body = await request.read()  # read, charged and timed by gateway/intake.py
        try:
            parsed = decode(body)
        except kimina.RequestInvalid as exc:
            return _detail(422, exc.detail)
        items = items_of(parsed)
        options = options_of(parsed)
        limit = self._config.server.max_snippets_per_batch
        if len(items) > limit:
            return _detail(
                422,
                [
                    {
                        "type": "too_long",
                        "loc": ["body"],
                        "msg": f"the batch has {len(items)} snippets, over the limit of {limit}; split it",
                    }
                ],
            )
        try:
            self._verify.admission(len(items))  # the pool's one admission check
        except NotServingError as exc:
            return _detail(503, f"not serving: {exc.message}")
        except OverloadedError as exc:
            return _detail(
                429, exc.message, {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
            )
        client = self._client(request)
        try:
            self.limiter.enter(client)
        except LimitExceeded as exc:
            return _detail(429, exc.message, {"Retry-After": "1"})
        self._batches += 1
        self.idle.clear()
        try:
            results = await self._run_all(items, options, debug=debug_of(parsed), client=client)
        finally:
            self.limiter.leave(client)
            self._batches -= 1
            if not self._batches:
                self.idle.set()
        if backward:
            results = [kimina.backward_response(r) for r in results]
        return _json({"results": results})

    async def _run_all(
        self, items: list[tuple[str, str, str]], options: VerifyOptions, *, debug: bool, client: str
    ) -> list[dict]:
        stream_id = f"rest-{next(self._batch_numbers)}"
        tasks = [
            asyncio.ensure_future(
                self._run_one(
                    sid,
                    code,
                    _pinned(options, reference),
                    debug,
                    client=client,
                    stream_id=stream_id,
                )
            )
            for sid, code, reference in items
        ]
        try:
            return await asyncio.gather(*tasks)
        except BaseException:  # the client went away (handler cancelled): free the queue
            for task in tasks:
                task.cancel()
            raise

    async def _run_one(
        self,
        snippet_id: str,
        code: str,
        options: VerifyOptions,
        debug: bool,
        *,
        client: str,
        stream_id: str,
    ) -> dict:
        try:
            # Resolved once (services.resolve): validation, split, the default timeout.
            request = self._verify.resolver.resolve(
                snippet_id, code, options, client_id=client, stream_id=stream_id
            )
            result = await self._verify.run(request)
        except LeanServiceError as exc:
            if not kimina.expected_refusal(exc):
                log.error("snippet %s failed: %r", snippet_id, exc)
            note_refused()  # counted REJECTED under door="rest", as gRPC counts it
            return kimina.refused_response(snippet_id, kimina.refusal_text(exc))
        note_outcome(result)
        shift = (
            kimina.body_line_offset(code)
            if self._shift_to_body and result.status is not Status.REJECTED
            else 0
        )
        return kimina.repl_response(result, timeout_s=request.timeout_s, shift=shift, debug=debug)


@web.middleware
async def _errors_as_detail(request: web.Request, handler):
    """aiohttp's own refusals (404, 405, 413) in FastAPI's `{"detail": ...}` shape."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _detail(
            exc.status, exc.reason, {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        )


def build_app(gateway: KiminaGateway, config: Config, metrics=None, budget=None) -> web.Application:
    intake = intake_middleware(
        budget or ByteBudget.from_config(config), config, gateway._refuse_access
    )
    middlewares = [observe_middleware(metrics, bool(gateway._tokens)), _errors_as_detail, intake]
    app = web.Application(
        middlewares=middlewares, client_max_size=config.server.max_message_mb * 2**20
    )
    routes = [
        web.post("/api/check", gateway.check),
        web.post("/api/check/", gateway.check),
        web.post("/verify", gateway.verify),
        web.post("/one_pass_verify_batch", gateway.verify),
        web.get("/health", gateway.health),
        web.get("/health/", gateway.health),
        web.get("/", gateway.health),
    ]
    for path in NOT_IMPLEMENTED:
        routes += [web.post(path, gateway.not_implemented), web.get(path, gateway.not_implemented)]
    routes += openapi.routes() + reward.routes(gateway, config)  # openapi, docs; POST /reward
    app.add_routes(routes)
    return app


_TOO_MANY = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _peer_of(transport) -> str:
    peer = transport.get_extra_info("peername") if transport is not None else None
    return str(peer[0]) if isinstance(peer, (tuple, list)) and peer else str(peer)


class _PeerCap:
    """aiohttp's protocol factory, with at most `cap` open connections per peer address."""

    def __init__(self, server, cap: int) -> None:
        self._server = server
        self.open: collections.Counter[str] = collections.Counter()
        peers: dict[int, str] = {}
        counts = self.open

        class Capped(RequestHandler):
            __slots__ = ()

            def connection_made(self, transport) -> None:
                super().connection_made(transport)
                peer = peers[id(self)] = _peer_of(transport)
                counts[peer] += 1
                if counts[peer] > cap:
                    log.warning(
                        "REST gateway: %s holds %d connections (gateway.max_connections_per_peer %d); "
                        "refusing one",
                        peer,
                        counts[peer] - 1,
                        cap,
                    )
                    transport.write(_TOO_MANY)
                    self.force_close()

            def connection_lost(self, exc) -> None:
                peer = peers.pop(id(self), None)
                if peer is not None:
                    counts[peer] -= 1
                    if counts[peer] <= 0:
                        del counts[peer]
                super().connection_lost(exc)

        self._handler_class = Capped

    def __call__(self) -> RequestHandler:
        handler = self._server()
        handler.__class__ = self._handler_class  # same layout (no new slots)
        return handler

    def __getattr__(self, name: str):
        return getattr(self._server, name)


class _Runner(web.AppRunner):
    def __init__(self, app: web.Application, *, peer_cap: int, **kwargs) -> None:
        super().__init__(app, **kwargs)
        self._peer_cap = peer_cap

    async def _make_server(self):
        server = await super()._make_server()
        return _PeerCap(server, self._peer_cap) if self._peer_cap > 0 else server


@dataclasses.dataclass
class Gateway:
    runner: web.AppRunner
    handlers: KiminaGateway
    host: str
    port: int

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, give in-flight batches up to `grace` s, then close
        (cancelling what is left, which frees its queue entries)."""
        for site in list(self.runner.sites):
            await site.stop()
        try:
            await asyncio.wait_for(self.handlers.idle.wait(), grace)
        except asyncio.TimeoutError:
            log.warning("REST gateway: batches still running after %.1f s; cancelling them", grace)
        await self.runner.cleanup()


async def start_gateway(
    verify: Verifier,
    config: Config,
    *,
    host: str | None = None,
    port: int | None = None,
    metrics=None,
    budget: ByteBudget | None = None,
) -> Gateway:
    """Serve Kimina's REST API on `host:port` (default: config.gateway / server.host)."""
    host = host or config.gateway.host or config.server.host
    port = config.gateway.http_port if port is None else port
    if config.gateway.message_lines not in ("file", "body"):
        raise RequestError(
            f'gateway.message_lines must be "file" or "body", not {config.gateway.message_lines!r}'
        )
    refuse_open_plain_http(config.server, host, "the REST gateway")
    handlers = KiminaGateway(verify, config)
    runner = _Runner(
        build_app(handlers, config, metrics, budget),
        handle_signals=False,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=0.5,
        keepalive_timeout=config.gateway.header_timeout_s,
        lingering_time=0,
        peer_cap=config.gateway.max_connections_per_peer,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1] if runner.addresses else port
    log.info("Kimina REST gateway on http://%s:%d", host, bound)
    return Gateway(runner=runner, handlers=handlers, host=host, port=bound)


async def stop_gateway(gateway: Gateway | None, grace: float = 10.0) -> None:
    if gateway is not None:
        await gateway.stop(grace)


def _pinned(options: VerifyOptions, reference: str) -> VerifyOptions:
    """The batch's options with one snippet's `reference` (leanrpc's extension)."""
    return dataclasses.replace(options, reference=reference) if reference else options
