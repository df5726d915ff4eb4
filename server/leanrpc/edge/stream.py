"""VerifyStream's door on the shared stream machinery (edge/streaming.py).

Owns: what a VerifyStream message means (a snippet to verify, options for
the snippets after it, a cancel by id), each snippet's answer (every
failure becomes a result, never an exception), the "server shutting down"
result, and the size bound of each answer (convert.fit_result). Permits,
the in-flight cap, the endings (half-close, an invalid message, shutdown)
and one answer per accepted snippet are edge/streaming.py's, shared with
the Prover's Expand. May import: errors, results, services.ports, services.resolve, v1,
edge.convert, edge.streaming; never the pool.

Endings (edge/streaming.py):

* the client half-closes: every accepted snippet is answered, then OK;
* an invalid message: reading stops, every snippet accepted before it is
  answered, then INVALID_ARGUMENT with the reason;
* `Shutdown.begin(grace)`: snippets read from then on are answered at once,
  and running ones get until the shutdown deadline (shortly before the grace
  ends); what is left is answered REJECTED "server shutting down ... safe to
  resend" with `retry_after` set; reading stops at the deadline; then OK.
"""

from __future__ import annotations

import asyncio

from ..errors import OverloadedError, RequestError
from ..results import Status, VerifyResult
from ..services.ports import Verifier
from ..services.resolve import VerifyOptions
from ..v1 import verifier_pb2 as pb
from . import convert
from .streaming import Answer, Cancel, Run, Shutdown
from .streaming import StreamCall as _StreamCall

__all__ = ["SHUTDOWN_RETRY_AFTER_S", "Shutdown", "StreamCall", "answer", "shutdown_result"]

# Resend hint given with "server shutting down" answers.
SHUTDOWN_RETRY_AFTER_S = 1.0


def shutdown_result(snippet_id: str) -> VerifyResult:
    return VerifyResult(
        id=snippet_id,
        status=Status.REJECTED,
        error=convert.SHUTTING_DOWN_TEXT,
        retry_after_s=SHUTDOWN_RETRY_AFTER_S,
    )


async def answer(
    verify: Verifier,
    snippet_id: str,
    code: str,
    options: VerifyOptions,
    *,
    deadline: float | None,
    client_id: str,
    stream_id: str,
    shutdown: Shutdown,
) -> VerifyResult:
    """One snippet's result; every failure becomes a result, never an exception."""
    try:
        # Resolved once here (services.resolve), then run as it is.
        request = verify.resolver.resolve(
            snippet_id, code, options, deadline=deadline, client_id=client_id, stream_id=stream_id
        )
        return await verify.run(request)
    except asyncio.CancelledError:
        if shutdown.started:
            return shutdown_result(snippet_id)
        return VerifyResult(id=snippet_id, status=Status.CANCELLED, error="cancelled by the client")
    except OverloadedError as exc:
        # A stream cannot fail one snippet with a status code: the snippet is
        # REJECTED with the retry hint as a field (Result.retry_after).
        return VerifyResult(
            id=snippet_id,
            status=Status.REJECTED,
            error=convert.overloaded_error_text(exc),
            retry_after_s=exc.retry_after_s,
        )
    except RequestError as exc:
        return VerifyResult(id=snippet_id, status=Status.REJECTED, error=exc.message)
    except Exception as exc:  # not serving, internal: still one answer
        return VerifyResult(id=snippet_id, status=Status.REJECTED, error=str(exc))


class _VerifyDoor:
    """VerifyStream's StreamDoor: snippets in, VerifyStreamResponse out."""

    def __init__(
        self,
        verify: Verifier,
        *,
        max_result_bytes: int,
        client_id: str,
        stream_id: str,
        shutdown: Shutdown,
        deadline: float | None,
    ) -> None:
        self._verify = verify
        self._max_result_bytes = max_result_bytes
        self._client_id = client_id
        self._stream_id = stream_id
        self._shutdown = shutdown
        self._deadline = deadline
        self._options = VerifyOptions()

    def take(self, message):
        kind = message.WhichOneof("kind")
        if kind == "snippet":
            snippet = message.snippet
            if self._shutdown.started:
                return Answer(shutdown_result(snippet.id))
            if not snippet.id:
                return Answer(
                    VerifyResult(
                        id="",
                        status=Status.REJECTED,
                        error="VerifyStream snippets need a non-empty id",
                    )
                )
            return Run(
                snippet.id,
                (snippet.id, snippet.code, convert.snippet_options(snippet, self._options)),
            )
        if kind == "options":
            self._options = convert.options_from_pb(message.options)
        elif kind == "cancel_id":
            return Cancel(message.cancel_id)
        return None

    async def run(self, request) -> VerifyResult:
        snippet_id, code, options = request
        return await answer(
            self._verify,
            snippet_id,
            code,
            options,
            deadline=self._deadline,
            client_id=self._client_id,
            stream_id=self._stream_id,
            shutdown=self._shutdown,
        )

    def shutting_down(self, request) -> VerifyResult:
        return shutdown_result(request[0])

    def cancelled(self, request) -> VerifyResult:
        return VerifyResult(id=request[0], status=Status.CANCELLED, error="cancelled by the client")

    def duplicate(self, request) -> VerifyResult:
        return VerifyResult(
            id=request[0],
            status=Status.REJECTED,
            error="duplicate id: a snippet with this id is in flight",
        )

    def to_wire(self, result: VerifyResult) -> pb.VerifyStreamResponse:
        return pb.VerifyStreamResponse(
            result=convert.fit_result(convert.result_to_pb(result), self._max_result_bytes)
        )


def StreamCall(
    verify: Verifier,
    context,
    *,
    limit: int,
    max_result_bytes: int,  # noqa: N802 - was a class
    client_id: str,
    stream_id: str,
    shutdown: Shutdown,
    deadline: float | None,
) -> _StreamCall:
    """One VerifyStream call: the shared machinery with VerifyStream's door."""
    door = _VerifyDoor(
        verify,
        max_result_bytes=max_result_bytes,
        client_id=client_id,
        stream_id=stream_id,
        shutdown=shutdown,
        deadline=deadline,
    )
    return _StreamCall(door, context, limit=limit, shutdown=shutdown)
