"""When and how long the client waits before trying again.

Owns: which RPC codes are retried, which per-snippet REJECTED results are
re-sent (queue full, server shutting down) and the backoff with the
server's hint as a floor. May import: grpc, _types.
"""

from __future__ import annotations

import random
import re

import grpc

from ._types import Result

RETRYABLE_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
# How VerifyStream answers a snippet the full queue refused (status REJECTED).
OVERLOADED_PREFIX = "RESOURCE_EXHAUSTED: "
# How the server answers, on shutdown, each accepted snippet it did not run.
SHUTTING_DOWN_PREFIX = "server shutting down"
# Both carry the same hint form at the end: "...; retry after N ms".
_RETRY_HINT = re.compile(r"retry after (?P<ms>\d+) ms\s*$")


def resend_hint_s(result: Result) -> float | None:
    """Seconds to wait before re-sending this snippet, or None if the result is final.

    A REJECTED result is re-sendable when the server refused it for overload
    or because it was shutting down; the snippet never ran.
    """
    if result.status != "REJECTED":
        return None
    if not (result.error.startswith(OVERLOADED_PREFIX) or result.error.startswith(SHUTTING_DOWN_PREFIX)):
        return None
    hint = _RETRY_HINT.search(result.error)
    return int(hint.group("ms")) / 1000 if hint else 0.0


def backoff_s(base_s: float, attempt: int, hint_s: float = 0.0, exc: grpc.aio.AioRpcError | None = None) -> float:
    """The server's retry-after hint is a floor; the exponential backoff makes
    sure a long overload is not hammered at the hint's pace."""
    for key, value in (exc.trailing_metadata() or ()) if exc is not None else ():
        if key == "retry-after-ms":
            hint_s = max(hint_s, int(value) / 1000)
    return max(hint_s, base_s * (2 ** (attempt - 1)) * (0.5 + random.random()))
