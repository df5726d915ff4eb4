"""The stdio relay: MCP over stdin/stdout, for an agent host that starts a process,
to a leanrpc server's MCP door over streamable HTTP.

    relay_stdio(url, token)     until stdin ends

One tool set, one place: the relay lists and calls the server's tools as the
server describes them (names, schemas, annotations, structured results,
errors), so a stdio agent gets exactly what an HTTP agent gets, under the
identity of its token. It holds no state of its own. When the server cannot
be reached a call gets the door's error shape (NOT_SERVING, retryable), never
a traceback on the agent's pipe. May import: agents.shapes, errors, and the
mcp SDK (its low-level Server, stdio transport and Client).
"""

from __future__ import annotations

import json
import logging

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .. import __version__
from ..errors import NotServingError
from . import shapes

__all__ = ["relay_stdio"]

log = logging.getLogger("leanrpc.agents")


def _unreachable(url: str, exc: BaseException) -> types.CallToolResult:
    error = shapes.error_of(
        NotServingError(f"the leanrpc server at {url} did not answer: {type(exc).__name__}: {exc}")
    )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(error))],
        structured_content=error,
        is_error=True,
    )


async def relay_stdio(url: str, token: str | None = None, *, read_timeout_s: float = 3600.0):
    """Serves MCP on this process's stdin/stdout, forwarding to the door at `url`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=read_timeout_s))
    async with http, Client(streamable_http_client(url, http_client=http)) as remote:

        async def list_tools(ctx, params) -> types.ListToolsResult:
            return await remote.list_tools()

        async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
            try:
                return await remote.call_tool(params.name, params.arguments or {})
            except Exception as exc:  # noqa: BLE001 - the agent gets an answer, not a broken pipe
                log.warning("relay: %s failed: %r", params.name, exc)
                return _unreachable(url, exc)

        server = Server(
            "leanrpc",
            version=__version__,
            instructions=remote.session.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
