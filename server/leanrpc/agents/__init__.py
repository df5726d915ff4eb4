"""The agents' door: Lean over the Model Context Protocol (issue 40; docs/AGENTS.md).

Owns: the MCP tool set (lean_check, lean_verify_proof, lean_proof_state,
lean_tactic, lean_multi_attempt, lean_release, lean_extract, lean_search,
lean_environments, lean_status) on the server's own services, served over
streamable HTTP for many agents (`[mcp]`, `serve --mcp-port`), and the stdio
relay `leanrpc mcp` runs for an agent host that starts a process.

Rooms: `tools` (each tool on the services, for one caller), `shapes` (results
and errors as structured dicts), `budget` (the output budget of one result),
`catalog` (the SDK's MCPServer: the tools' schemas, annotations, answers),
`door` (access and identity, the ASGI app, uvicorn lifecycle), `relay`
(stdio to a server's HTTP door). A view, never a second verifier: every
snippet goes through the doors' one resolver and `Verifier.run`, every proof
state through the Prover's registry.

May import: config, errors, results, formalize (config, retrieval), services,
edge.auth, edge.identity, edge.limiter, edge.errors (the one status table),
and the `mcp` SDK (the `mcp` extra). Imported only by the composition root
and commands.
"""

from .door import McpDoor, start_mcp
from .tools import AgentTools

__all__ = ["AgentTools", "McpDoor", "start_mcp"]
