"""Prometheus metrics: one registry per server, scraped over plain HTTP.

    gRPC call --> MetricsInterceptor --> rpcs by method and code, latency,
                                         snippets by result status, phase times
    scrape    --> PoolCollector      --> queue depth, workers by state, restarts
                                         by cause, header cache hits (from the
                                         snapshot the pool publishes at scrape
                                         time: PoolOwner.metrics)
              --> CacheCollector     --> result cache hits by tier, misses, and
                                         entries refused: forged (bad MAC),
                                         revoked, withdrawn, corrupt

The HTTP endpoint is an aiohttp app on the server's event loop (aiohttp is
already a dependency, for the REST gateway; it replaced a hand-written HTTP
reader). Not `prometheus_client.start_http_server`: that serves from its own
thread, while a scrape must take the pool's snapshot on the loop, the thread
that mutates the pool; the text is then rendered in a thread, so a large scrape
never stalls health checks or RPCs.

Every door counts under the same names: `door="grpc"`, `door="rest"` (the
Kimina gateway, whose `method` label is its route and `code` the HTTP
status) or `door="mcp"` (the agents' door: `method` is the tool, `code` OK or
the error's status code name). Labels are bounded: a method the server does not serve is `unknown` (random
method names cannot grow the series). Besides the `leanrpc_*` families, the
stock gRPC names (`grpc_server_started_total`, `grpc_server_handled_total`,
`grpc_server_handling_seconds`, as go-grpc-prometheus and py-grpc-prometheus
name them) feed ready-made dashboards; `process_*` come from prometheus_client;
`leanrpc_worker_memory_bytes` is each live worker's tree (resident anonymous
and shared memory plus held memfds, see worker/memory.py).

The interceptor (edge/interceptors/metrics.py) feeds the RPC and snippet
series; this module owns the registry and the endpoint; edge/collectors.py reads
the pool's and the cache's snapshots at scrape time.
Results are read through protobuf descriptors, not the generated stubs.

May import: prometheus_client, aiohttp, protobuf descriptors, leanrpc (version, logsetup),
leanrpc.edge.interceptors.metrics. The pool comes in as a `pool.PoolOwner`
(`attach_pool`), never by import, and is read only through its published
`metrics()` snapshot and its state listener (a `WorkerInfo`, not the worker);
the result cache's counters come in as an object too (`attach_cache`).
"""

from __future__ import annotations

import asyncio
import logging
import socket

from aiohttp import web
from google.protobuf import descriptor_pool
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..logsetup import ProtocolJunkFilter
from .collectors import CacheCollector, PoolCollector
from .interceptors.metrics import MetricsInterceptor

log = logging.getLogger("leanrpc.metrics")

# Messages whose `result`/`results` fields carry snippet verdicts.
_RESULT_CARRIERS = {
    "leanrpc.v1.VerifyResponse": "results",
    "leanrpc.v1.VerifyStreamResponse": "result",
    "leanrpc.v1.ExtractResponse": "result",
}
_PHASES = ("queue", "header", "body", "total")
# Services whose methods get their own label; any other method is "unknown".
_SERVICES = ("leanrpc.v1.Verifier", "leanrpc.v1.Formalizer", "grpc.health.v1.Health")
UNKNOWN_METHOD = "unknown"


def known_methods() -> dict[str, tuple[str, str, str]]:
    """'/pkg.Service/Method' -> (service, method, grpc_type) for the served services."""
    known = {}
    descriptors = descriptor_pool.Default()
    for name in _SERVICES:
        try:
            service = descriptors.FindServiceByName(name)
        except KeyError:
            continue
        for method in service.methods:
            kind = {
                (False, False): "unary",
                (False, True): "server_stream",
                (True, False): "client_stream",
                (True, True): "bidi_stream",
            }[(method.client_streaming, method.server_streaming)]
            known[f"/{name}/{method.name}"] = (name, method.name, kind)
    return known


_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    """All metrics of one server; `interceptor` feeds them, `render` reads them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.rpcs = Counter(
            "leanrpc_rpcs",
            "Finished requests by method (gRPC) or route (REST), status code and door",
            ["method", "code", "door"],
            registry=self.registry,
        )
        self.rpc_seconds = Histogram(
            "leanrpc_rpc_duration_seconds",
            "Request latency by method or route, and door",
            ["method", "door"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.snippets = Counter(
            "leanrpc_snippets",
            "Snippet results sent, by result status and door",
            ["status", "door"],
            registry=self.registry,
        )
        self.phase_seconds = Histogram(
            "leanrpc_snippet_phase_seconds",
            "Per-snippet time by phase (queue, header, body, total) and door",
            ["phase", "door"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.transitions = Counter(
            "leanrpc_worker_transitions",
            "Worker state transitions by new state",
            ["state"],
            registry=self.registry,
        )
        grpc_labels = ["grpc_service", "grpc_method", "grpc_type"]
        self.grpc_started = Counter(
            "grpc_server_started", "RPCs started on the server", grpc_labels, registry=self.registry
        )
        self.grpc_handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, by code",
            grpc_labels + ["grpc_code"],
            registry=self.registry,
        )
        self.grpc_seconds = Histogram(
            "grpc_server_handling_seconds",
            "RPC handling time",
            grpc_labels,
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)
        self.known_methods = known_methods()
        self._pool_collector: PoolCollector | None = None
        self._cache_collector: CacheCollector | None = None
        self.interceptor = MetricsInterceptor(self)
        self._endpoint: MetricsEndpoint | None = None

    def attach_pool(self, pool, config) -> None:
        pool.add_state_listener(self._on_worker_state)
        self._pool_collector = PoolCollector(pool, config)
        self.registry.register(self._pool_collector)

    def attach_cache(self, stats) -> None:
        """`stats`: the result cache's counters (leanrpc.cache.CacheStats)."""
        self._cache_collector = CacheCollector(stats)
        self.registry.register(self._cache_collector)

    def method_labels(self, method: str) -> tuple[str, tuple[str, str, str]]:
        """(leanrpc method label, (grpc_service, grpc_method, grpc_type)); unknown ones folded."""
        known = self.known_methods.get(method)
        if known is None:
            return UNKNOWN_METHOD, (UNKNOWN_METHOD, UNKNOWN_METHOD, UNKNOWN_METHOD)
        return method, known

    def observe_rest(
        self, route: str, http_status: int, seconds: float, statuses, phases=()
    ) -> None:
        """One finished REST request (the gateway's door): the same families
        as gRPC with door="rest"; `code` is the HTTP status, `method` the route.
        `phases`: one (queue, header, body, total) in seconds per snippet answered."""
        self.rpcs.labels(route, str(http_status), "rest").inc()
        self.rpc_seconds.labels(route, "rest").observe(seconds)
        for status, count in statuses.items():
            self.snippets.labels(status, "rest").inc(count)
        for times in phases:
            for phase, value in zip(_PHASES, times):
                self.phase_seconds.labels(phase, "rest").observe(max(0.0, value))

    def observe_tool(self, tool: str, code: str, seconds: float, status: str = "") -> None:
        """One finished MCP tool call (the agents' door, leanrpc.agents): door="mcp";
        `code` is "OK" or the error's status code name, `status` a verdict's result status."""
        self.rpcs.labels(tool, code, "mcp").inc()
        self.rpc_seconds.labels(tool, "mcp").observe(seconds)
        if status:
            self.snippets.labels(status, "mcp").inc()

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
            self.snippets.labels(_status_name(result), "grpc").inc()
            if result.HasField("timings"):
                for phase in _PHASES:
                    seconds = getattr(result.timings, phase).ToNanoseconds() / 1e9  # a Duration
                    self.phase_seconds.labels(phase, "grpc").observe(max(0.0, seconds))

    def render(self) -> bytes:
        """The exposition text (thread-safe: pool state comes from the last `snapshot`)."""
        return generate_latest(self.registry)

    def snapshot(self) -> None:
        """Reads pool state; call on the event loop before `render` in a thread."""
        if self._pool_collector is not None:
            self._pool_collector.snapshot()
        if self._cache_collector is not None:
            self._cache_collector.snapshot()

    async def render_off_loop(self) -> bytes:
        self.snapshot()
        return await asyncio.get_running_loop().run_in_executor(None, self.render)

    @property
    def port(self) -> int:
        return self._endpoint.port if self._endpoint else 0

    async def close(self) -> None:
        if self._endpoint is not None:
            await self._endpoint.close()


def _status_name(result) -> str:
    enum = result.DESCRIPTOR.fields_by_name["status"].enum_type
    value = enum.values_by_number.get(result.status)
    # Label values stay the short names ("VALID"), not the contract's STATUS_VALID.
    return value.name.removeprefix("STATUS_") if value is not None else str(result.status)


class MetricsEndpoint:
    """`GET /metrics` (and `/`) on the event loop, served by aiohttp (a
    dependency already, for the REST gateway): HTTP parsing, keep-alive, HEAD
    and 404/405 are aiohttp's, not ours. Protocol junk is one line a minute."""

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
        http = web.Application()
        http.router.add_get("/metrics", self._scrape)
        http.router.add_get("/", self._scrape)
        self._runner = web.AppRunner(
            http, handle_signals=False, access_log=None, logger=_HTTP_LOG, shutdown_timeout=0.5
        )
        self._starting = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()

    async def _scrape(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=await self._metrics.render_off_loop(),
            headers={"Content-Type": CONTENT_TYPE_LATEST},
        )

    async def close(self) -> None:
        await self._starting
        await self._runner.cleanup()


# The metrics port's own aiohttp server log: junk there is named as such.
_HTTP_LOG = logging.getLogger("leanrpc.metrics.http")
_HTTP_LOG.addFilter(
    ProtocolJunkFilter(door="metrics port", hint="a client pointed at --metrics-port?")
)


def start_metrics(app, port: int, metrics: Metrics | None = None) -> Metrics:
    """Serves `metrics` (or a new set) on `port`, fed by `app`'s pool.

    Pass the `Metrics` whose interceptor the gRPC server was built with, so
    RPC and snippet counters are filled too.
    """
    metrics = metrics or Metrics()
    metrics.attach_pool(app.pool, app.config)
    cache = getattr(app.verify, "cache", None)  # the result cache, when it is on
    if cache is not None:
        metrics.attach_cache(cache.stats)
    metrics._endpoint = MetricsEndpoint(metrics, app.config.server.host, port)
    log.info("Prometheus metrics on http://%s:%d/metrics", app.config.server.host, metrics.port)
    return metrics
