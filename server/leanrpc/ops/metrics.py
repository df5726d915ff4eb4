"""Prometheus metrics: one registry per server, scraped over plain HTTP.

    gRPC call --> MetricsInterceptor --> rpcs by method and code, latency,
                                         snippets by result status, phase times
    scrape    --> PoolCollector      --> queue depth, workers by state, restarts
                                         by cause, header cache hits (read from
                                         the pool at scrape time)

The HTTP endpoint runs on the server's event loop (not in a thread, as
`prometheus_client.start_http_server` would), so a scrape reads pool state
from the thread that mutates it and never sees a half-updated dict.

The interceptor reads results through protobuf descriptors instead of
importing the generated stubs: only `leanrpc.edge` and the client import them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .. import __version__

log = logging.getLogger("leanrpc.metrics")

# Messages whose `result`/`results` fields carry snippet verdicts.
_RESULT_CARRIERS = {
    "leanrpc.v1.VerifyResponse": "results",
    "leanrpc.v1.VerifyStreamResponse": "result",
    "leanrpc.v1.ExtractResponse": "result",
}
_PHASES = ("queue", "header", "body", "total")
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    """All metrics of one server; `interceptor` feeds them, `render` reads them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.rpcs = Counter(
            "leanrpc_rpcs", "Finished RPCs by method and gRPC status code", ["method", "code"], registry=self.registry
        )
        self.rpc_seconds = Histogram(
            "leanrpc_rpc_duration_seconds", "RPC latency by method", ["method"],
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.snippets = Counter(
            "leanrpc_snippets", "Snippet results sent, by result status", ["status"], registry=self.registry
        )
        self.phase_seconds = Histogram(
            "leanrpc_snippet_phase_seconds", "Per-snippet time by phase (queue, header, body, total)", ["phase"],
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.transitions = Counter(
            "leanrpc_worker_transitions", "Worker state transitions by new state", ["state"], registry=self.registry
        )
        self.interceptor = MetricsInterceptor(self)
        self._endpoint: MetricsEndpoint | None = None

    def attach_pool(self, pool, config) -> None:
        pool.add_state_listener(self._on_worker_state)
        self.registry.register(PoolCollector(pool, config))

    def _on_worker_state(self, worker, old, new) -> None:
        self.transitions.labels(new.value).inc()

    def observe_response(self, message) -> None:
        field = _RESULT_CARRIERS.get(message.DESCRIPTOR.full_name)
        if field is None:
            return
        if field == "results":
            results = list(message.results)
        elif message.HasField(field):
            results = [getattr(message, field)]
        else:
            return
        for result in results:
            self.snippets.labels(_status_name(result)).inc()
            if result.HasField("timings"):
                for phase in _PHASES:
                    self.phase_seconds.labels(phase).observe(max(0.0, getattr(result.timings, f"{phase}_s")))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    @property
    def port(self) -> int:
        return self._endpoint.port if self._endpoint else 0

    async def close(self) -> None:
        if self._endpoint is not None:
            await self._endpoint.close()


def _status_name(result) -> str:
    enum = result.DESCRIPTOR.fields_by_name["status"].enum_type
    value = enum.values_by_number.get(result.status)
    return value.name if value is not None else str(result.status)


class PoolCollector:
    """Reads the pool at scrape time; nothing to keep in sync."""

    def __init__(self, pool, config) -> None:
        self._pool = pool
        self._config = config

    def collect(self):
        pool = self._pool
        stats = pool.stats
        yield _gauge("leanrpc_queue_depth", "Jobs waiting for a worker", pool.queue_depth)
        yield _gauge("leanrpc_queue_limit", "Admission queue capacity", self._config.pool.queue_limit)
        yield _gauge("leanrpc_workers_configured", "Configured pool size", pool.size)
        yield _gauge("leanrpc_serving", "1 when the pool accepts work", 1 if pool.serving else 0)
        states = GaugeMetricFamily("leanrpc_workers", "Workers by state", labels=["state"])
        for state, count in pool.worker_states().items():
            states.add_metric([state], count)
        yield states
        restarts = CounterMetricFamily("leanrpc_worker_restarts", "Workers gone, by exit cause", labels=["cause"])
        for cause, count in sorted(stats.restarts.items()):
            restarts.add_metric([str(cause)], count)
        yield restarts
        for name, help_text, value in (
            ("leanrpc_header_cache_hits", "Jobs that found their import header warm", stats.header_hits),
            ("leanrpc_header_cache_loads", "Import headers loaded into a worker", stats.header_loads),
            ("leanrpc_header_switches", "Idle workers replaced to load another header", stats.header_switches),
            ("leanrpc_prefix_routed", "Jobs that reused an elaborated body prefix", stats.prefix_routed),
            ("leanrpc_jobs_submitted", "Jobs admitted to the pool", stats.jobs_submitted),
            ("leanrpc_jobs_finished", "Jobs answered by the pool", stats.jobs_finished),
            ("leanrpc_job_retries", "Jobs retried after a worker crash", stats.retries),
            ("leanrpc_boot_failures", "Worker boot failures", stats.boot_failures),
        ):
            yield CounterMetricFamily(name, help_text, value=value)
        identity = pool.identity
        info = InfoMetricFamily("leanrpc_build", "Server version and verifier identity")
        info.add_metric([], {
            "version": __version__,
            "verifier_kind": identity.kind if identity else "",
            "lean_version": identity.lean_version if identity else "",
        })
        yield info


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts every RPC (by final code) and every snippet result it sends.

    Install it first, so calls refused by later interceptors (auth) count too.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            return handler._replace(unary_unary=self._wrap_unary(method, handler.unary_unary))
        if handler.stream_unary is not None and inspect.iscoroutinefunction(handler.stream_unary):
            return handler._replace(stream_unary=self._wrap_unary(method, handler.stream_unary))
        if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
            return handler._replace(unary_stream=self._wrap_stream(method, handler.unary_stream))
        if handler.stream_stream is not None and inspect.isasyncgenfunction(handler.stream_stream):
            return handler._replace(stream_stream=self._wrap_stream(method, handler.stream_stream))
        return handler  # sync handlers: not used by this server

    def _wrap_unary(self, method: str, behavior):
        metrics = self._metrics

        async def unary(request, context):
            started = time.perf_counter()
            error: BaseException | None = None
            try:
                response = await behavior(request, context)
                if response is not None:
                    metrics.observe_response(response)
                return response
            except BaseException as exc:
                error = exc
                raise
            finally:
                self._finish(method, context, error, started)

        return unary

    def _wrap_stream(self, method: str, behavior):
        metrics = self._metrics

        async def stream(request, context):
            started = time.perf_counter()
            error: BaseException | None = None
            try:
                async for response in behavior(request, context):
                    metrics.observe_response(response)
                    yield response
            except BaseException as exc:
                error = exc
                raise
            finally:
                self._finish(method, context, error, started)

        return stream

    def _finish(self, method: str, context, error: BaseException | None, started: float) -> None:
        self._metrics.rpcs.labels(method, _final_code(context, error)).inc()
        self._metrics.rpc_seconds.labels(method).observe(time.perf_counter() - started)


def _final_code(context, error: BaseException | None) -> str:
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


class MetricsEndpoint:
    """`GET /metrics` on the event loop; every other path is 404."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self._metrics = metrics
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        # Bind now, so a busy port fails `create_server` and port 0 is known.
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host.strip("[]"), port))
        self._sock.listen(64)
        self._sock.setblocking(False)
        self.port = self._sock.getsockname()[1]
        self._server: asyncio.base_events.Server | None = None
        self._starting = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, sock=self._sock)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass  # headers: nothing we need
            parts = request_line.decode("latin-1").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            if len(parts) >= 2 and parts[0] in ("GET", "HEAD") and path in ("/metrics", "/"):
                body = self._metrics.render()
                status, content_type = "200 OK", CONTENT_TYPE_LATEST
            else:
                body, status, content_type = b"not found\n", "404 Not Found", "text/plain"
            head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            writer.write(head.encode("latin-1") + (body if parts and parts[0] != "HEAD" else b""))
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        await self._starting
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def start_metrics(app, port: int, metrics: Metrics | None = None) -> Metrics:
    """Serves `metrics` (or a new set) on `port`, fed by `app`'s pool.

    Pass the `Metrics` whose interceptor the gRPC server was built with, so
    RPC and snippet counters are filled too.
    """
    metrics = metrics or Metrics()
    metrics.attach_pool(app.pool, app.config)
    metrics._endpoint = MetricsEndpoint(metrics, app.config.server.host, port)
    log.info("Prometheus metrics on http://%s:%d/metrics", app.config.server.host, metrics.port)
    return metrics
