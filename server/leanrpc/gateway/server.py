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
and closed (gateway/listener.py, aiohttp's public API only). Bodies (access first, the byte budget, 401/413/503/408
answered readably) are gateway/intake.py's middleware, on every route (issue 44).

May import: config, errors, results, services.ports, services.resolve, edge.auth, edge.identity,
edge.limiter, edge.budget, edge.errors (the one error table), gateway.intake, gateway.listener, gateway.kimina, gateway.observe (request log
and metrics), gateway.openapi, gateway.reward.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging

from aiohttp import web

from ..config import Config
from ..edge.auth import (
    bearer_token_valid,
    load_tokens,
    refuse_open_plain_http,
)
from ..edge.budget import ByteBudget
from ..edge.identity import CallerIdentity
from ..edge.limiter import ClientLimiter, LimitExceeded
from ..errors import LeanServiceError, RequestError
from ..results import Status
from ..services.ports import Verifier
from ..services.resolve import VerifyOptions
from . import kimina, openapi, reward
from .intake import intake_middleware
from .listener import Listener, listen
from .observe import note_outcome, note_refused, observe_middleware
from .refusals import refusal

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
        except LeanServiceError as exc:  # status from the one error table (edge/errors.py)
            return refusal(exc)
        client = self._client(request)
        try:
            self.limiter.enter(client)
        except LimitExceeded as exc:
            return refusal(exc)
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


@dataclasses.dataclass
class Gateway:
    listener: Listener
    handlers: KiminaGateway
    host: str
    port: int

    @property
    def app(self) -> web.Application:
        return self.listener.runner.app

    @property
    def open_connections(self) -> dict[str, int]:
        """Open connections by peer address (gateway/listener.py's count)."""
        return self.listener.open

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, give in-flight batches up to `grace` s, then close
        (cancelling what is left, which frees its queue entries)."""
        self.listener.stop_accepting()
        try:
            await asyncio.wait_for(self.handlers.idle.wait(), grace)
        except asyncio.TimeoutError:
            log.warning("REST gateway: batches still running after %.1f s; cancelling them", grace)
        await self.listener.close()


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
    listener = await listen(
        build_app(handlers, config, metrics, budget),
        host,
        port,
        cap=config.gateway.max_connections_per_peer,
        header_timeout_s=config.gateway.header_timeout_s,
    )
    log.info("Kimina REST gateway on http://%s:%d", host, listener.port)
    return Gateway(listener=listener, handlers=handlers, host=host, port=listener.port)


async def stop_gateway(gateway: Gateway | None, grace: float = 10.0) -> None:
    if gateway is not None:
        await gateway.stop(grace)


def _pinned(options: VerifyOptions, reference: str) -> VerifyOptions:
    """The batch's options with one snippet's `reference` (leanrpc's extension)."""
    return dataclasses.replace(options, reference=reference) if reference else options
