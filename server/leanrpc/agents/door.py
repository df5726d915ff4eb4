"""The MCP door: the official `mcp` SDK's MCPServer with leanrpc's tools (agents/catalog.py),
served over streamable HTTP at `[mcp] path` (default /mcp) for many agents at once.

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

The ASGI app `build_app` returns is what uvicorn serves; with the server's byte
budget for requests in flight (issue 44, one budget for every door) the SDK's
app is wrapped, inside access, in agents/intake.py's `Budgeted`, which charges
each body as it is read.

Each call is one request-log line and counts in the Prometheus families of
every door with door="mcp" (edge/metrics.py's `observe_tool`, when the server
has a metrics port).

May import: config, edge.auth, edge.identity, agents.catalog, agents.intake, agents.tools,
and uvicorn (the SDK's HTTP server).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import socket

import uvicorn

from ..config import Config
from ..edge.auth import (
    bearer_token_valid,
    load_tokens,
    refuse_open_plain_http,
)
from ..edge.identity import CallerIdentity
from .catalog import CLIENT_KEY, build_mcp
from .intake import Budgeted
from .tools import AgentTools

__all__ = ["McpDoor", "build_app", "start_mcp"]

log = logging.getLogger("leanrpc.agents")


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


def build_app(tools: AgentTools, config: Config, host: str, metrics=None, budget=None):
    """The ASGI app of the door: access and identity around the SDK's streamable HTTP app,
    and inside access (a refused caller is never charged nor read) the byte budget."""
    section = config.mcp
    sdk_app = build_mcp(tools, config, metrics).streamable_http_app(
        streamable_http_path=section.path,
        json_response=True,
        max_request_body_size=config.server.max_message_mb * 2**20,
        session_idle_timeout=section.session_idle_timeout_s,
        max_sessions=section.max_sessions,
        host=host,
    )
    if budget is not None:  # the server's one ByteBudget (edge/budget.py), shared by every door
        sdk_app = Budgeted(sdk_app, budget, config.memory.discard_mb * 2**20)
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


async def start_mcp(
    tools: AgentTools,
    config: Config,
    *,
    host: str | None = None,
    port: int | None = None,
    metrics=None,
    budget=None,
) -> McpDoor:
    """Serve MCP over streamable HTTP on `host:port` (default: [mcp] host/port, server.host)."""
    host = host or config.mcp.host or config.server.host
    port = config.mcp.port if port is None else port
    refuse_open_plain_http(config.server, host, "the MCP door")
    app = build_app(tools, config, host, metrics, budget)
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
