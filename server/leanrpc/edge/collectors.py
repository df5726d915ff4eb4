"""Scrape-time collectors: the pool's and the result cache's figures, read when Prometheus asks.

    scrape --> PoolCollector  --> queue depth, workers by state, restarts by
                                  cause, header cache hits, worker memory, build
                                  info (from the snapshot the pool publishes at
                                  scrape time: PoolOwner.metrics)
           --> CacheCollector --> result cache hits by tier, misses, and
                                  entries refused: forged (bad MAC), revoked,
                                  withdrawn, corrupt

Split from edge/metrics.py (which owns the registry, the per-call counters and
the HTTP endpoint): this room only turns a published snapshot into metric
families. `snapshot()` runs on the loop, `collect()` replays in the render thread.

May import: prometheus_client, leanrpc (version). The pool and the cache's
counters come in as objects, never by import.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

from .. import __version__


class PoolCollector:
    """Reads the pool's published snapshot at scrape time (`snapshot`, on the
    loop: `PoolOwner.metrics`); `collect` replays it."""

    def __init__(self, pool, config) -> None:
        self._pool = pool
        self._config = config
        self._families: list = []

    def snapshot(self) -> None:
        self._families = list(self._read())

    def collect(self):
        return iter(self._families)

    def _read(self):
        published = self._pool.metrics()
        snapshot, stats = published.snapshot, published.stats
        yield _gauge("leanrpc_queue_depth", "Jobs waiting for a worker", snapshot.queue_depth)
        yield _gauge(
            "leanrpc_queue_limit", "Admission queue capacity", self._config.pool.queue_limit
        )
        yield _gauge("leanrpc_workers_configured", "Configured pool size", snapshot.size)
        yield _gauge(
            "leanrpc_serving", "1 when the pool accepts work", 1 if snapshot.serving else 0
        )
        states = GaugeMetricFamily("leanrpc_workers", "Workers by state", labels=["state"])
        for state, count in snapshot.worker_states.items():
            states.add_metric([state], count)
        yield states
        restarts = CounterMetricFamily(
            "leanrpc_worker_restarts", "Workers gone, by exit cause", labels=["cause"]
        )
        for cause, count in sorted(stats.restarts.items()):
            restarts.add_metric([str(cause)], count)
        yield restarts
        for name, help_text, value in (
            (
                "leanrpc_header_cache_hits",
                "Jobs that found their import header warm",
                stats.header_hits,
            ),
            (
                "leanrpc_header_cache_loads",
                "Import headers loaded into a worker",
                stats.header_loads,
            ),
            (
                "leanrpc_header_switches",
                "Idle workers replaced to load another header",
                stats.header_switches,
            ),
            (
                "leanrpc_prefix_routed",
                "Jobs that reused an elaborated body prefix",
                stats.prefix_routed,
            ),
            ("leanrpc_jobs_submitted", "Jobs admitted to the pool", stats.jobs_submitted),
            ("leanrpc_jobs_finished", "Jobs answered by the pool", stats.jobs_finished),
            ("leanrpc_job_retries", "Jobs retried after a worker crash", stats.retries),
            (
                "leanrpc_job_fresh_retries",
                "Of those, retries not charged to the job, on a process nothing ran on",
                stats.fresh_retries,
            ),
            ("leanrpc_boot_failures", "Worker boot failures", stats.boot_failures),
        ):
            yield CounterMetricFamily(name, help_text, value=value)
        memory = GaugeMetricFamily(
            "leanrpc_worker_memory_bytes",
            "Memory of each live worker's process tree (as its limit counts it)",
            labels=["worker"],
        )
        for worker in published.workers:
            memory.add_metric([worker.name], float(worker.memory_bytes))
        yield memory
        identity = snapshot.identity
        info = InfoMetricFamily("leanrpc_build", "Server version and verifier identity")
        info.add_metric(
            [],
            {
                "version": __version__,
                "verifier_kind": identity.kind if identity else "",
                "lean_version": identity.lean_version if identity else "",
            },
        )
        yield info


class CacheCollector:
    """The result cache's counters at scrape time: `leanrpc_result_cache_hits`
    by tier and `leanrpc_result_cache_events` by event (a `forged` entry failed
    its MAC, a `revoked` one came from a poisoned worker, `withdrawn` ones were
    taken back from every tier, ...)."""

    EVENTS = (
        "lookups",
        "misses",
        "stored",
        "joined",
        "too_slow",
        "not_cacheable",
        "bypassed",
        "corrupt",
        "forged",
        "revoked",
        "withdrawn",
        "store_errors",
    )

    def __init__(self, stats) -> None:
        self._stats = stats
        self._families: list = []

    def snapshot(self) -> None:
        stats = self._stats
        hits = CounterMetricFamily(
            "leanrpc_result_cache_hits", "Result cache hits, by tier", labels=["tier"]
        )
        for tier, count in sorted(stats.hits.items()):
            hits.add_metric([tier], count)
        events = CounterMetricFamily(
            "leanrpc_result_cache_events", "Result cache events, by kind", labels=["event"]
        )
        for event in self.EVENTS:
            events.add_metric([event], getattr(stats, event, 0))
        self._families = [hits, events]

    def collect(self):
        return iter(self._families)


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)
