"""The metrics interceptor: every RPC by final code and latency, every snippet result sent.

Install it first, so calls refused by later interceptors (auth) count too.
The series it feeds live in `edge.metrics.Metrics`; it reads results through
protobuf descriptors, never the generated stubs.

May import: grpc, leanrpc.edge.interceptors.wrap.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from .wrap import CallWrapper


class MetricsInterceptor(CallWrapper):
    """Counts every RPC (by final code) and every snippet result it sends."""

    def __init__(self, metrics) -> None:
        self._metrics = metrics

    async def enter(self, details, context) -> tuple[str, float]:
        method = details.method
        self._metrics.grpc_started.labels(*self._metrics.method_labels(method)[1]).inc()
        return method, time.perf_counter()

    def sent(self, token, response) -> None:
        self._metrics.observe_response(response)

    def exit(self, token, context, error: BaseException | None) -> None:
        method, started = token
        metrics = self._metrics
        label, grpc_labels = metrics.method_labels(method)
        code = final_code(context, error)
        elapsed = time.perf_counter() - started
        metrics.rpcs.labels(label, code, "grpc").inc()
        metrics.rpc_seconds.labels(label, "grpc").observe(elapsed)
        metrics.grpc_handled.labels(*grpc_labels, code).inc()
        metrics.grpc_seconds.labels(*grpc_labels).observe(elapsed)


def final_code(context, error: BaseException | None) -> str:
    """The status code name a call ended with (CANCELLED for a cancelled one)."""
    if isinstance(error, (asyncio.CancelledError, GeneratorExit)):
        return grpc.StatusCode.CANCELLED.name
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):  # some grpcio versions keep the raw number
        for status in grpc.StatusCode:
            if status.value[0] == code:
                return status.name
    return grpc.StatusCode.UNKNOWN.name if error is not None else grpc.StatusCode.OK.name
