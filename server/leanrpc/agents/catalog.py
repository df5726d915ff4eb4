"""The tool catalogue of the MCP door: the SDK's MCPServer with the ten tools, their
parameters, descriptions and annotations, and how one call is answered.

Owns: each tool's MCP face (name, parameter schema, description, read-only /
destructive hints) and `_Answers`, which runs one call for its caller (the
identity `door._Access` put on the request's ASGI scope), shapes a refusal as a
structured error (agents/shapes.py), fits a result to the output budget
(agents/budget.py), and logs and counts the call (door="mcp"). What each tool
does is agents/tools.py. May import: config, errors, agents.budget,
agents.shapes, agents.tools, and the mcp SDK.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from .. import __version__
from ..config import Config
from ..errors import InternalError, LeanServiceError
from . import budget, shapes
from .tools import AgentTools

__all__ = ["CLIENT_KEY", "build_mcp"]

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
