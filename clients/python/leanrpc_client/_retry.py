"""When and how long the client waits before trying again.

Owns: which RPC codes are retried, which per-snippet REJECTED results are
re-sent (those with `retry_after` set: queue full, server shutting down),
reading the server's rich status (google.rpc.Status: RetryInfo, ErrorInfo,
BadRequest) of a failed call, and the backoff with the server's hint as a
floor. May import: grpc, grpcio-status, google.rpc messages, _types.
"""

from __future__ import annotations

import random

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ._types import ClientError, Result

RETRYABLE_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)

# What grpc's aio client reports when a write of its own is in flight as the
# call ends (the server finished the stream first: a graceful stop, the call's
# deadline): the write fails in grpc's core, and the call's status, the
# server's included, is replaced by this local INTERNAL. Nothing left the client.
LOCAL_WRITE_RACE = "Internal error from Core"
WRITE_RACE_TEXT = (
    "the stream ended while the client was still sending (grpc reports a local "
    f"INTERNAL {LOCAL_WRITE_RACE!r}); snippets without an answer never ran here"
)


def stream_code(exc: grpc.aio.AioRpcError) -> grpc.StatusCode:
    """A broken stream's code for the retry logic: grpc's local write race is
    UNAVAILABLE (the stream broke under the client; what it did not answer can
    be re-sent), any other code is the call's own."""
    if exc.code() is grpc.StatusCode.INTERNAL and exc.details() == LOCAL_WRITE_RACE:
        return grpc.StatusCode.UNAVAILABLE
    return exc.code()


def resend_hint_s(result: Result) -> float | None:
    """Seconds to wait before re-sending this snippet, or None if the result is final.

    A REJECTED result is re-sendable when the server says so with
    `retry_after` (the snippet never ran: queue full or shutting down).
    """
    if result.status != "REJECTED":
        return None
    return result.retry_after_s


def rich_details(exc: grpc.aio.AioRpcError | grpc.RpcError) -> dict:
    """The details of a failed call's google.rpc.Status, as keyword arguments of ClientError:
    reason (ErrorInfo), field_violations (BadRequest), retry_after_s (RetryInfo)."""
    out: dict = {}
    try:
        status = rpc_status.from_call(exc)
    except ValueError:  # a trailer whose code disagrees with the call's: ignore it
        status = None
    for packed in status.details if status is not None else ():
        if packed.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            packed.Unpack(info)
            out["retry_after_s"] = info.retry_delay.ToNanoseconds() / 1e9
        elif packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            packed.Unpack(info)
            out["reason"] = info.reason
        elif packed.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            info = error_details_pb2.BadRequest()
            packed.Unpack(info)
            out["field_violations"] = [(v.field, v.description) for v in info.field_violations]
    return out


# A stream answers a snippet the server could not run because no REPL worker
# can start (its circuit breaker is open) REJECTED with this reason; a
# unary Verify fails UNAVAILABLE. `verify` raises the same UNAVAILABLE for the
# stream, so a broken REPL command never reads as refused proofs (issue 41 item 2).
NOT_SERVING_TEXT = "no REPL worker can start"


def not_serving(result: Result) -> bool:
    return result.status == "REJECTED" and result.error.startswith(NOT_SERVING_TEXT)


def not_serving_error(results: list[Result]) -> ClientError | None:
    """UNAVAILABLE when some snippet was refused for want of a worker; its
    `partial` holds the other results."""
    down = [r for r in results if not_serving(r)]
    if not down:
        return None
    details = " ".join(down[0].error.split())
    others = [r for r in results if not not_serving(r)]
    return ClientError(grpc.StatusCode.UNAVAILABLE, details, others, reason="NOT_SERVING")


def client_error(exc: grpc.aio.AioRpcError, partial: list | None = None) -> ClientError:
    if stream_code(exc) is not exc.code():
        return ClientError(stream_code(exc), WRITE_RACE_TEXT, partial)
    return ClientError(exc.code(), exc.details() or "", partial, **rich_details(exc))


# The longest pause the client picks by itself (a server's hint may ask for more).
MAX_BACKOFF_S = 30.0


def backoff_s(
    base_s: float, attempt: int, hint_s: float = 0.0, exc: grpc.aio.AioRpcError | None = None
) -> float:
    """The server's retry hint (argument, or the RetryInfo of a failed call) is a
    floor; the exponential backoff (jitter x0.5..x1.5, at most MAX_BACKOFF_S)
    makes sure a long overload is not hammered at the hint's pace."""
    if exc is not None:
        hint_s = max(hint_s, rich_details(exc).get("retry_after_s") or 0.0)
    exponent = min(attempt - 1, 30)  # 2**30 x any base is past the cap already
    return max(hint_s, min(MAX_BACKOFF_S, base_s * (2**exponent) * (0.5 + random.random())))
