"""The REST doors' refusals: one error, one HTTP answer, through the one error table.

`refusal(exc)` answers a refused batch (admission, the per-client limit) in
FastAPI's `{"detail": ...}` shape, which Kimina's server and client use. The
status is edge/errors.py's (`http_status_for`: the gRPC code of STATUS_FOR_ERROR
mapped to HTTP), never an `except` clause of the gateway's own; a retry hint
(`retry_after_s`, OVERLOADED) becomes `Retry-After` in whole seconds, at least
1, and NOT_SERVING (503: draining, no worker could start) says 1 s, so a
trainer's HTTP client waits before it tries the next gateway or again. The
per-client limiter's `LimitExceeded` is OVERLOADED, as on the MCP door.

May import: aiohttp, errors, edge.errors, edge.limiter, gateway.kimina.
"""

from __future__ import annotations

import math

from aiohttp import web

from ..edge.errors import http_status_for, reason_for
from ..edge.limiter import LimitExceeded
from ..errors import LeanServiceError, OverloadedError
from . import kimina

NOT_SERVING_RETRY_S = 1.0


def as_service_error(exc: LeanServiceError | LimitExceeded) -> LeanServiceError:
    if isinstance(exc, LimitExceeded):
        return OverloadedError(exc.message, retry_after_s=1.0)
    return exc


def refusal(exc: LeanServiceError | LimitExceeded) -> web.Response:
    exc = as_service_error(exc)
    detail = exc.message
    retry_after_s = getattr(exc, "retry_after_s", None)
    if reason_for(exc) == "NOT_SERVING":
        detail = f"not serving: {detail}"
        retry_after_s = retry_after_s or NOT_SERVING_RETRY_S
    headers = {}
    if retry_after_s is not None:
        headers["Retry-After"] = str(max(1, math.ceil(retry_after_s)))
    return web.Response(
        body=kimina.encode({"detail": detail}),
        status=http_status_for(exc),
        content_type="application/json",
        headers=headers,
    )
