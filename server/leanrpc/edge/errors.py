"""The one table from leanrpc errors to gRPC status codes, and the rich status.

Owns: which gRPC code each leanrpc error gets (STATUS_FOR_ERROR), the
`google.rpc.Status` sent with it (ErrorInfo always, RetryInfo for a retry
hint, BadRequest when a request field is at fault; the contract is in
proto/leanrpc/v1/verifier.proto), and the decorators servicer methods use:
`maps_errors` (the error ends the call with its status) and `answers_errors`
(a stream door's pair: the error becomes that pair's answer, its text
starting with the same status code's name, and the stream goes on).
May import: grpc, grpcio-status, googleapis' google.rpc messages, leanrpc.errors.
"""

from __future__ import annotations

import functools
import inspect
import logging

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from .. import errors

log = logging.getLogger("leanrpc.edge")

# ErrorInfo.domain of every error this server sends.
ERROR_DOMAIN = "leanrpc.dev"

# Most specific first: the first isinstance match wins.
# (error type, gRPC code, ErrorInfo.reason)
STATUS_FOR_ERROR: list[tuple[type[BaseException], grpc.StatusCode, str]] = [
    (errors.AuthError, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    (errors.OverloadedError, grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED"),
    (errors.NotFoundError, grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    (errors.RequestError, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
    # Not a RequestError (no `except RequestError` catches it), but the caller's imports are at fault.
    (errors.HeaderLoadError, grpc.StatusCode.INVALID_ARGUMENT, "HEADER_NOT_LOADED"),
    (errors.ConfigError, grpc.StatusCode.FAILED_PRECONDITION, "CONFIG"),
    (errors.ModelNotConfigured, grpc.StatusCode.FAILED_PRECONDITION, "MODEL_NOT_CONFIGURED"),
    (errors.NotServingError, grpc.StatusCode.UNAVAILABLE, "NOT_SERVING"),
    (errors.WorkerTimeout, grpc.StatusCode.DEADLINE_EXCEEDED, "WORKER_TIMEOUT"),
    (errors.WorkerOutOfMemory, grpc.StatusCode.RESOURCE_EXHAUSTED, "WORKER_OUT_OF_MEMORY"),
    (errors.WorkerError, grpc.StatusCode.UNAVAILABLE, "WORKER_FAILED"),
    (errors.InternalError, grpc.StatusCode.INTERNAL, "INTERNAL"),
]


def _lookup(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    for error_type, code, reason in STATUS_FOR_ERROR:
        if isinstance(exc, error_type):
            return code, reason
    return grpc.StatusCode.INTERNAL, "INTERNAL"


def status_for(exc: BaseException) -> grpc.StatusCode:
    return _lookup(exc)[0]


def reason_for(exc: BaseException) -> str:
    """The ErrorInfo reason of `exc` (e.g. "OVERLOADED"), for doors that are not gRPC."""
    return _lookup(exc)[1]


# The HTTP status of each gRPC code, for the doors that answer in HTTP (the REST
# gateway, its /reward route): Google's mapping (google/rpc/code.proto's
# comments; grpc-gateway's HTTPStatusFromCode). With STATUS_FOR_ERROR it is the
# one table from an error to a status code, whatever the door.
HTTP_STATUS_FOR_CODE: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}


def http_status_for(exc: BaseException) -> int:
    """The HTTP status of `exc` (e.g. 429 for OVERLOADED), for doors that speak HTTP."""
    return HTTP_STATUS_FOR_CODE[status_for(exc)]


def duration_of(seconds: float) -> duration_pb2.Duration:
    out = duration_pb2.Duration()
    out.FromNanoseconds(round(seconds * 1e9))
    return out


def _packed(message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def rich_status(exc: BaseException) -> status_pb2.Status:
    """The google.rpc.Status for `exc`: code, message and details."""
    code, reason = _lookup(exc)
    message = exc.message if isinstance(exc, errors.LeanServiceError) else str(exc)
    details = [_packed(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN))]
    if isinstance(exc, errors.OverloadedError):
        details.append(
            _packed(error_details_pb2.RetryInfo(retry_delay=duration_of(exc.retry_after_s)))
        )
    if isinstance(exc, errors.RequestError) and getattr(exc, "field", ""):
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=exc.field, description=message
        )
        details.append(_packed(error_details_pb2.BadRequest(field_violations=[violation])))
    return status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=details)


async def abort_with(context: grpc.aio.ServicerContext, exc: BaseException) -> None:
    """Ends the call with the code from the table and the rich status as trailer."""
    status = rpc_status.to_status(rich_status(exc))
    if status.code is grpc.StatusCode.INTERNAL:
        log.error("internal error: %r", exc, exc_info=exc)
    await context.abort(status.code, status.details, status.trailing_metadata)


def maps_errors(method):
    """Decorator for servicer methods: leanrpc errors become status codes."""

    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def stream_wrapper(self, request, context):
            try:
                async for item in method(self, request, context):
                    yield item
            except errors.LeanServiceError as exc:
                await abort_with(context, exc)

        return stream_wrapper

    @functools.wraps(method)
    async def unary_wrapper(self, request, context):
        try:
            return await method(self, request, context)
        except errors.LeanServiceError as exc:
            await abort_with(context, exc)

    return unary_wrapper


def in_band(exc: BaseException) -> str:
    """An error answered inside a stream instead of ending the call (an Expand
    pair): the name of its status code from the table, then its message.
    Anything the table does not know is INTERNAL, logged as `abort_with` logs it."""
    code = status_for(exc)
    if isinstance(exc, errors.LeanServiceError):
        message = exc.message
    else:
        message = repr(exc)
    if code is grpc.StatusCode.INTERNAL:
        log.error("internal error: %r", exc, exc_info=exc)
    return f"{code.name}: {message}"


def answers_errors(reject):
    """Decorator for a stream door's `run(self, request)`: a failure becomes
    `reject(request, in_band(exc))`, that request's one answer (the stream
    goes on). Cancellation is not a failure: it still raises."""

    def decorate(method):
        @functools.wraps(method)
        async def run(self, request):
            try:
                return await method(self, request)
            except Exception as exc:  # noqa: BLE001 - every pair gets one answer
                return reject(request, in_band(exc))

        return run

    return decorate
