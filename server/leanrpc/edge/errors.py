"""The one table from leanrpc errors to gRPC status codes."""

from __future__ import annotations

import functools
import inspect
import logging

import grpc

from .. import errors

log = logging.getLogger("leanrpc.edge")

# Most specific first: the first isinstance match wins.
STATUS_FOR_ERROR: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (errors.AuthError, grpc.StatusCode.UNAUTHENTICATED),
    (errors.OverloadedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.NotFoundError, grpc.StatusCode.NOT_FOUND),
    (errors.RequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.ModelNotConfigured, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.NotServingError, grpc.StatusCode.UNAVAILABLE),
    (errors.WorkerTimeout, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.WorkerOutOfMemory, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.WorkerError, grpc.StatusCode.UNAVAILABLE),
    (errors.InternalError, grpc.StatusCode.INTERNAL),
]


def status_for(exc: BaseException) -> grpc.StatusCode:
    for error_type, code in STATUS_FOR_ERROR:
        if isinstance(exc, error_type):
            return code
    return grpc.StatusCode.INTERNAL


async def abort_with(context: grpc.aio.ServicerContext, exc: BaseException) -> None:
    code = status_for(exc)
    if isinstance(exc, errors.OverloadedError):
        context.set_trailing_metadata((("retry-after-ms", str(int(exc.retry_after_s * 1000))),))
    if code is grpc.StatusCode.INTERNAL:
        log.error("internal error: %r", exc, exc_info=exc)
    await context.abort(code, str(exc) if not isinstance(exc, errors.LeanServiceError) else exc.message)


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
