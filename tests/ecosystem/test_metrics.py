"""The Prometheus endpoint during a load: counters add up to what was sent."""

from __future__ import annotations

import asyncio
import collections
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from eco_support import snippet, start_app
from leanrpc.client import AsyncClient, ClientError
from testkit import free_port

STREAMED = 60
BATCHED = 18
BAD_CALLS = 3


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    """metric sample name -> {sorted label items: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        assert response.status == 200
        text = response.read().decode()
    samples: dict[str, dict[tuple, float]] = collections.defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def by_label(samples, name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: value for labels, value in samples.get(name, {}).items()}


async def test_counters_add_up_under_load():
    metrics_port = free_port()
    app = await start_app(workers=2, metrics_port=metrics_port)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        assert app.metrics.port == metrics_port
        streamed = [snippet(i) for i in range(STREAMED)]
        batched = [snippet(i) for i in range(STREAMED, STREAMED + BATCHED)]

        async def load():
            stream_task = asyncio.ensure_future(
                client.verify([(i, c) for i, c, _ in streamed], window=16)
            )
            batch = await client.verify_batch([(i, c) for i, c, _ in batched])
            return await stream_task, batch

        async def bad_calls():
            for _ in range(BAD_CALLS):
                with pytest.raises(ClientError) as info:
                    await client.verify_batch([("empty", "   ")])
                assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT

        load_task = asyncio.ensure_future(load())
        during = []
        while not load_task.done():
            during.append(await asyncio.to_thread(scrape, metrics_port))
            await asyncio.sleep(0.05)
        streamed_results, batch_results = await load_task
        await bad_calls()

        sent = STREAMED + BATCHED
        expected = collections.Counter(status for _, _, status in streamed + batched)
        got = collections.Counter(r.status for r in streamed_results + batch_results)
        assert got == expected

        assert during, "no scrape happened while the load ran"
        for samples in during:
            assert "leanrpc_queue_depth" in samples
            assert sum(by_label(samples, "leanrpc_snippets_total", "status").values()) <= sent

        final = await asyncio.to_thread(scrape, metrics_port)
        # Every result sent is counted once, under its own status.
        assert by_label(final, "leanrpc_snippets_total", "status") == {
            k: float(v) for k, v in expected.items()
        }
        # Requests by gRPC code: one stream, one batch, the refused batches.
        rpcs = {
            (dict(ls)["method"], dict(ls)["code"]): v
            for ls, v in final["leanrpc_rpcs_total"].items()
        }
        assert rpcs[("/leanrpc.v1.Verifier/VerifyStream", "OK")] == 1
        assert rpcs[("/leanrpc.v1.Verifier/Verify", "OK")] == 1
        assert rpcs[("/leanrpc.v1.Verifier/Verify", "INVALID_ARGUMENT")] == BAD_CALLS
        assert (
            final["leanrpc_rpc_duration_seconds_count"][
                (("door", "grpc"), ("method", "/leanrpc.v1.Verifier/Verify"))
            ]
            == 1 + BAD_CALLS
        )
        # Pool side: each job either hit a warm header or loaded one.
        pool_jobs = final["leanrpc_jobs_finished_total"][()]
        assert pool_jobs == sent
        hits, loads = (
            final["leanrpc_header_cache_hits_total"][()],
            final["leanrpc_header_cache_loads_total"][()],
        )
        assert 0 < hits < sent
        assert hits + loads >= sent  # loads also count pre-warmed replacements
        phases = final["leanrpc_snippet_phase_seconds_count"]
        assert phases[(("door", "grpc"), ("phase", "total"))] == sent
        assert final["leanrpc_queue_depth"][()] == 0
        workers = by_label(final, "leanrpc_workers", "state")
        assert 1 <= workers["idle"] <= 2, (
            workers,
            app.pool.worker_states(),
            final["leanrpc_workers"],
        )
        assert final["leanrpc_workers_configured"][()] == 2
        assert final["leanrpc_serving"][()] == 1
        info = next(iter(final["leanrpc_build_info"]))
        assert dict(info)["verifier_kind"] == "stand-in"
    finally:
        await client.close()
        await app.stop(2.0)


async def test_restarts_are_counted_by_cause():
    metrics_port = free_port()
    app = await start_app(workers=1, metrics_port=metrics_port)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        code = "import Mathlib\n\ntheorem t : True := by\n  --@standin: hang\n  trivial\n"
        [result] = await client.verify_batch([("hang", code)], timeout_s=0.5)
        assert result.status == "TIMEOUT"
        for _ in range(200):  # the killed worker is reaped asynchronously
            samples = await asyncio.to_thread(scrape, metrics_port)
            if by_label(samples, "leanrpc_worker_restarts_total", "cause").get("timeout"):
                break
            await asyncio.sleep(0.05)
        assert by_label(samples, "leanrpc_worker_restarts_total", "cause")["timeout"] == 1
        assert by_label(samples, "leanrpc_snippets_total", "status") == {"TIMEOUT": 1.0}
        assert by_label(samples, "leanrpc_worker_transitions_total", "state")["dead"] >= 1
    finally:
        await client.close()
        await app.stop(2.0)


async def test_unknown_path_is_404():
    metrics_port = free_port()
    app = await start_app(workers=1, metrics_port=metrics_port)
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            await asyncio.to_thread(
                urllib.request.urlopen, f"http://127.0.0.1:{metrics_port}/nope", timeout=30
            )
        assert info.value.code == 404
    finally:
        await app.stop(2.0)


async def test_random_method_names_share_one_label_and_stock_grpc_names_exist():
    """Issue 16: calls to made-up methods (no token) must not grow the series."""
    metrics_port = free_port()
    app = await start_app(workers=1, metrics_port=metrics_port, auth_tokens=["tok"])
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            for n in range(50):
                call = channel.unary_unary(f"/leanrpc.v1.Verifier/Nope{n}")
                with pytest.raises(grpc.aio.AioRpcError):
                    await call(b"")
            # No token probe (a tokenless GetServerInfo): only Verify is called here.
            client = AsyncClient(
                f"127.0.0.1:{app.port}", token="tok", max_retries=0, warn_unchecked_token=False
            )
            try:
                await client.verify_batch([snippet(0)[:2]])
            finally:
                await client.close()
        samples = await asyncio.to_thread(scrape, metrics_port)
        methods = {dict(ls)["method"] for ls in samples["leanrpc_rpcs_total"]}
        assert methods == {"unknown", "/leanrpc.v1.Verifier/Verify"}, methods
        assert (
            samples["leanrpc_rpcs_total"][
                (("code", "UNAUTHENTICATED"), ("door", "grpc"), ("method", "unknown"))
            ]
            == 50
        )
        handled = {
            (dict(ls)["grpc_method"], dict(ls)["grpc_code"]): v
            for ls, v in samples["grpc_server_handled_total"].items()
        }
        assert handled[("Verify", "OK")] == 1 and handled[("unknown", "UNAUTHENTICATED")] == 50
        started = {
            dict(ls)["grpc_method"]: dict(ls)["grpc_type"]
            for ls in samples["grpc_server_started_total"]
        }
        assert started["Verify"] == "unary"
        assert samples["process_resident_memory_bytes"][()] > 0
        (worker_memory,) = samples["leanrpc_worker_memory_bytes"].values()
        assert worker_memory > 1 << 20, "a live worker's tree holds at least a MiB"
    finally:
        await app.stop(2.0)


async def test_a_scrape_renders_off_the_event_loop(monkeypatch):
    """The exposition text is built in a thread: the loop keeps answering meanwhile."""
    import threading

    metrics_port = free_port()
    app = await start_app(workers=1, metrics_port=metrics_port)
    try:
        threads = []
        original = app.metrics.render

        def slow_render():
            threads.append(threading.current_thread() is threading.main_thread())
            return original()

        monkeypatch.setattr(app.metrics, "render", slow_render)
        await asyncio.to_thread(scrape, metrics_port)
        assert threads == [False], "render ran on the event loop's thread"
    finally:
        await app.stop(2.0)


async def test_the_endpoint_is_aiohttp_head_keepalive_and_junk_is_one_line(caplog):
    from leanrpc.edge import metrics as endpoint

    for junk_filter in endpoint._HTTP_LOG.filters:  # the rate limit starts fresh for this test
        junk_filter._last = None
    metrics_port = free_port()
    app = await start_app(workers=1, metrics_port=metrics_port)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", metrics_port)
        # Two requests on one connection (keep-alive), the second a HEAD.
        writer.write(
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nHEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        await writer.drain()
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert first.startswith(b"HTTP/1.1 200") and b"text/plain; version=" in first
        length = int(
            next(
                line.split(b":")[1]
                for line in first.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        assert b"leanrpc_" in await asyncio.wait_for(reader.readexactly(length), 30)
        second = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert second.startswith(b"HTTP/1.1 200")
        writer.close()
        # A gRPC client (HTTP/2 preface) on the metrics port: 400 and one WARNING line naming the port.
        with caplog.at_level("WARNING", logger="leanrpc.metrics.http"):
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", metrics_port)
                writer.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                await writer.drain()
                answer = await asyncio.wait_for(reader.read(), 30)
                writer.close()
                assert b" 400 " in answer.split(b"\r\n")[0], answer
        junk = [r.getMessage() for r in caplog.records if r.name == "leanrpc.metrics.http"]
        assert len(junk) == 1 and junk[0].startswith("not HTTP/1.1 on the metrics port"), junk
        assert all(r.exc_info is None for r in caplog.records if r.name == "leanrpc.metrics.http")
    finally:
        await app.stop(2.0)
