"""The Kimina-compatible REST gateway: Kimina's HTTP API over leanrpc's pool.

Owns: `POST /api/check`, `POST /verify` (and `/one_pass_verify_batch`),
`GET /health`, and 501 answers for what leanrpc lacks (`/api/ast`), with the
JSON shapes of kimina-ast-server 2.1.3 / kimina-ast-client 0.2.x, so that
Kimina's own client works by changing its URL. A view, never a second
verifier: every snippet goes through `services.verify.VerifyService`.

Rooms: `kimina` (the wire shapes, pure), `server` (aiohttp routes, auth, admission,
lifecycle), `listener` (the socket: per-peer cap, slow peers; public aiohttp API),
`refusals` (a refusal's HTTP status, from edge/errors.py's one table). May import:
config, errors, results, services, edge.auth, edge.identity, edge.errors.
Imported only by the composition root.
"""

from .server import Gateway, start_gateway, stop_gateway

__all__ = ["Gateway", "start_gateway", "stop_gateway"]
