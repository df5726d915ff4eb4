"""The MCP door: the official `mcp` SDK's MCPServer with leanrpc's tools, served over
streamable HTTP at `[mcp] path` (default /mcp) for many agents at once.

    start_mcp(tools, config) -> McpDoor        (McpDoor.stop(grace) to shut down)

Why the SDK: it is what every Lean MCP server uses (docs/AGENTS.md), it owns
the protocol (versions, sessions, JSON-RPC, the streamable HTTP transport,
body reading and its size cap), and its client is what the tests drive. It is
served by uvicorn (the SDK's own dependency) inside the server's event loop.

Access is edge/auth.py's, exactly as on gRPC and REST: when the server has
tokens, a request without `Authorization: Bearer <token>` naming one of them
gets 401 before the SDK reads its body; the caller's identity is
edge/identity.py's rule (the token's hash, else the peer host), set on the
request's ASGI scope by `_Access` and read by each tool call. Identity is per
HTTP request, not per MCP session: a session id another agent learnt buys it
nothing. A plain-HTTP door off loopback without tokens refuses to start.

The ASGI app `build_app` returns is what uvicorn serves: a wrapper may be put
around it there (a byte budget for requests in flight, as on the other doors).

Each call is one request-log line and counts in the Prometheus families of
every door with door="mcp" (edge/metrics.py's `observe_tool`, when the server
has a metrics port).

May import: config, errors, edge.auth, edge.identity, agents.budget,
agents.shapes, agents.tools, and the mcp SDK, uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import socket
import time
from typing import Annotated, Any

import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from .. import __version__
from ..config import Config
from ..edge.auth import AccessConfigError, bearer_token_valid, is_loopback, load_tokens
from ..edge.identity import CallerIdentity
from ..errors import InternalError, LeanServiceError
from . import budget, shapes
from .tools import AgentTools

__all__ = ["McpDoor", "build_app", "build_mcp", "start_mcp"]

log = logging.getLogger("leanrpc.agents")
requests_log = logging.getLogger("leanrpc.requests")  # one line per call, as the other doors

CLIENT_KEY = "leanrpc.client"  # the ASGI scope key `_Access` sets

INSTRUCTIONS = (
    "Lean 4 on a shared, sandboxed REPL pool. Send code as strings. A verdict counts only "
    "when `status` is VALID and its `checks` say what was checked: `proved` in "
    "lean_verify_proof is true only when the statement check and the axiom check passed. "
    "Proof state ids are yours alone; release them when done. An error's `retry` says "
    "whether and when to send the call again. A result whose verifier kind is `stand-in` "
    "did not come from Lean."
)

READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, open_world_hint=False
)
MAKES_STATES = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
RELEASES = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

Code = Annotated[str, Field(description="Lean 4 source text (imports first, as in a file)")]
# Ranges are checked by the services (a structured INVALID_ARGUMENT naming the field),
# not by the schema, whose refusals the SDK answers as plain text.
Timeout = Annotated[float, Field(description="seconds the REPL may take; 0 = the server's default")]
StateId = Annotated[str, Field(description="a state id from lean_proof_state or lean_tactic")]


def _client(ctx: Context) -> str:
    request = ctx.request_context.request
    scope = getattr(request, "scope", None) or {}
    client = scope.get(CLIENT_KEY)
    if not client:  # not through `_Access`: no identity, no service
        raise InternalError("the MCP request came in without a caller identity")
    return client


def _text(payload: dict) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))]


class _Answers:
    """Runs one tool call for its caller and shapes what comes back (budget, errors);
    one request-log line and the door="mcp" metrics per call."""

    def __init__(self, tools: AgentTools, config: Config, metrics=None) -> None:
        self.tools = tools
        self._max = config.mcp.max_output_chars
        self._field = config.mcp.max_field_chars
        self._metrics = metrics

    async def __call__(self, ctx: Context, tool: str, work) -> types.CallToolResult:
        started = time.perf_counter()
        client = "unknown"
        try:
            client = _client(ctx)
            with self.tools.call(client):
                payload = work(client)
                if asyncio.iscoroutine(payload):
                    payload = await payload
        except Exception as exc:  # noqa: BLE001 - still an answer, never a traceback
            if not isinstance(exc, LeanServiceError):
                log.exception("MCP tool call failed")
                exc = InternalError(f"{type(exc).__name__}: {exc}")
            error = shapes.error_of(exc)
            self._observe(tool, client, error["error"]["code"], "", started)
            return types.CallToolResult(
                content=_text(error), structured_content=error, is_error=True
            )
        fitted = budget.fit(payload, self._max, self._field)
        self._observe(tool, client, "OK", str(fitted.get("status", "")), started)
        return types.CallToolResult(content=_text(fitted), structured_content=fitted)

    def _observe(self, tool: str, client: str, code: str, status: str, started: float) -> None:
        seconds = time.perf_counter() - started
        if self._metrics is not None:
            self._metrics.observe_tool(tool, code, seconds, status)
        if requests_log.isEnabledFor(logging.INFO):
            ms = seconds * 1000
            requests_log.info(
                "MCP %s from %s: %s in %.0f ms",
                tool,
                client,
                status or code,
                ms,
                extra={
                    "rpc": tool,
                    "door": "mcp",
                    "client": client,
                    "code": code,
                    "ms": round(ms, 1),
                },
            )


def build_mcp(tools: AgentTools, config: Config, metrics=None) -> MCPServer:
    """The MCPServer with the ten tools (names and parameters: issue 40, docs/AGENTS.md)."""
    server = MCPServer(
        name="leanrpc", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    answer = _Answers(tools, config, metrics)

    async def lean_check(
        code: Code, ctx: Context, profile: str = "", timeout_s: Timeout = 0.0
    ) -> dict[str, Any]:
        """Elaborate Lean code and report: status, checks and levels, axioms, messages with
        positions, sorries with their goals. The code policy refuses code that runs while
        Lean elaborates (#eval, run_tac, …) as on every other door."""
        return await answer(ctx, "lean_check", lambda c: tools.check(c, code, profile, timeout_s))

    async def lean_verify_proof(
        statement: Annotated[str, Field(description="the theorem statement, proved by `sorry`")],
        proof: Annotated[str, Field(description="the whole proof: the same theorem, proved")],
        ctx: Context,
        allowed_axioms: Annotated[
            list[str] | None, Field(description="narrow the server's axiom allow-list")
        ] = None,
    ) -> dict[str, Any]:
        """Check a proof pinned to its statement: `proved` is true only when the proof
        elaborates, proves exactly this statement, and uses only allowed axioms."""
        return await answer(
            ctx,
            "lean_verify_proof",
            lambda c: tools.verify_proof(c, statement, proof, allowed_axioms),
        )

    async def lean_proof_state(
        code_with_sorry: Annotated[str, Field(description="code whose proofs have `sorry` holes")],
        ctx: Context,
        timeout_s: Timeout = 0.0,
    ) -> dict[str, Any]:
        """Elaborate code with `sorry` and return one proof state (id and goals) per hole."""
        return await answer(
            ctx, "lean_proof_state", lambda c: tools.proof_state(c, code_with_sorry, timeout_s)
        )

    async def lean_tactic(
        state_id: StateId, tactic: str, ctx: Context, timeout_s: Timeout = 0.0
    ) -> dict[str, Any]:
        """Run one tactic on a proof state: the new state id and its goals; COMPLETED when the
        whole proof then checks as a normal snippet."""
        return await answer(
            ctx, "lean_tactic", lambda c: tools.tactic(c, state_id, tactic, timeout_s)
        )

    async def lean_multi_attempt(
        state_id: StateId,
        tactics: Annotated[list[str], Field(description="tactics to try, each on the state")],
        ctx: Context,
        timeout_s: Timeout = 0.0,
    ) -> dict[str, Any]:
        """Try several tactics on one state, in parallel across the pool: one result each."""
        return await answer(
            ctx,
            "lean_multi_attempt",
            lambda c: tools.multi_attempt(c, state_id, tactics, timeout_s),
        )

    async def lean_release(
        state_ids: Annotated[list[str], Field(description="state ids to free")],
        ctx: Context,
        proof_ids: Annotated[list[str], Field(description="proof ids: all their states")] = [],  # noqa: B006
    ) -> dict[str, Any]:
        """Free proof states (and whole proofs) you hold; unknown ids come back as not_found."""
        return await answer(ctx, "lean_release", lambda c: tools.release(c, state_ids, proof_ids))

    async def lean_extract(code: Code, ctx: Context, timeout_s: Timeout = 0.0) -> dict[str, Any]:
        """Elaborate code and cut its tactic proofs into steps with the goals before and after."""
        return await answer(ctx, "lean_extract", lambda c: tools.extract(c, code, timeout_s))

    async def lean_search(
        query: Annotated[str, Field(description="a declaration name, or words about it")],
        ctx: Context,
        k: Annotated[
            int, Field(description="how many declarations (1 to [mcp] max_search_k)")
        ] = 10,
    ) -> dict[str, Any]:
        """Mathlib declarations for a name (close names) or for words (BM25 over names and
        modules), from the server's local index: no rate limit."""
        return await answer(ctx, "lean_search", lambda c: tools.search(c, query, k))

    async def lean_environments(ctx: Context) -> dict[str, Any]:
        """The REPL profiles you may use, with Lean version, REPL and project revisions."""
        return await answer(ctx, "lean_environments", tools.environments)

    async def lean_status(ctx: Context) -> dict[str, Any]:
        """Workers, the queue, and your own usage against your limits."""
        return await answer(ctx, "lean_status", tools.status)

    for fn, hints in (
        (lean_check, READ_ONLY),
        (lean_verify_proof, READ_ONLY),
        (lean_proof_state, MAKES_STATES),
        (lean_tactic, MAKES_STATES),
        (lean_multi_attempt, MAKES_STATES),
        (lean_release, RELEASES),
        (lean_extract, READ_ONLY),
        (lean_search, READ_ONLY),
        (lean_environments, READ_ONLY),
        (lean_status, READ_ONLY),
    ):
        server.add_tool(fn, annotations=hints)
    return server


class _Access:
    """ASGI wrapper: edge/auth.py's bearer check, then edge/identity.py's name on the scope."""

    def __init__(self, app, tokens: list[bytes], identity: CallerIdentity) -> None:
        self._app = app
        self._tokens = tokens
        self._identity = identity

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        header = None
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                header = value.decode("latin-1")
                break
        if self._tokens and not bearer_token_valid(header, self._tokens):
            await _refuse(send, "missing token" if not header else "invalid token")
            return
        client = scope.get("client")
        scope[CLIENT_KEY] = self._identity.of_http(
            header if self._tokens else None, client[0] if client else None
        )
        await self._app(scope, receive, send)


async def _refuse(send, why: str) -> None:
    body = json.dumps(
        {"error": f"{why}: send `Authorization: Bearer <token>` (a token the server lists)"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="leanrpc"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def build_app(tools: AgentTools, config: Config, host: str, metrics=None):
    """The ASGI app of the door: access and identity around the SDK's streamable HTTP app."""
    section = config.mcp
    sdk_app = build_mcp(tools, config, metrics).streamable_http_app(
        streamable_http_path=section.path,
        json_response=True,
        max_request_body_size=config.server.max_message_mb * 2**20,
        session_idle_timeout=section.session_idle_timeout_s,
        max_sessions=section.max_sessions,
        host=host,
    )
    tokens = [t.encode() for t in load_tokens(config.server)]
    return _Access(sdk_app, tokens, CallerIdentity(tokens_checked=bool(tokens)))


class _Server(uvicorn.Server):
    """uvicorn inside leanrpc's loop: the server's own signal handlers stay in charge."""

    def capture_signals(self):
        return contextlib.nullcontext()


@dataclasses.dataclass
class McpDoor:
    server: _Server
    task: asyncio.Task
    tools: AgentTools
    host: str
    port: int
    path: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting; calls in flight get up to `grace` s, then the rest is closed."""
        self.server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self.task), grace + 1.0)
        except asyncio.TimeoutError:
            log.warning("MCP door: still busy after %.1f s; closing", grace)
            self.server.force_exit = True
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(4096)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def check_access(config: Config, host: str) -> None:
    """Plain HTTP: refuses a non-loopback host without tokens (the REST gateway's rule)."""
    if load_tokens(config.server):
        return
    if not (config.server.allow_unauthenticated_loopback and is_loopback(host)):
        raise AccessConfigError(
            f"refusing to serve the MCP door on {host} without authentication: set "
            f"server.auth_tokens, server.auth_token_file or ${config.server.auth_token_env}"
        )


async def start_mcp(
    tools: AgentTools,
    config: Config,
    *,
    host: str | None = None,
    port: int | None = None,
    metrics=None,
) -> McpDoor:
    """Serve MCP over streamable HTTP on `host:port` (default: [mcp] host/port, server.host)."""
    host = host or config.mcp.host or config.server.host
    port = config.mcp.port if port is None else port
    check_access(config, host)
    app = build_app(tools, config, host, metrics)  # a byte budget would wrap `app` here
    server = _Server(
        uvicorn.Config(
            app,
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=max(1, int(config.pool.shutdown_grace_s)),
        )
    )
    sock = _listen(
        host.strip("[]"), port
    )  # bound here: a taken port is an OSError, not uvicorn's exit
    task = asyncio.create_task(server.serve(sockets=[sock]), name="leanrpc-mcp")
    while not server.started:
        if task.done():
            sock.close()
            raise OSError(f"the MCP door could not start on {host}:{port}")
        await asyncio.sleep(0.01)
    bound = sock.getsockname()[1]
    log.info("MCP door on http://%s:%d%s", host, bound, config.mcp.path)
    return McpDoor(server, task, tools, host, bound, config.mcp.path)
