"""A snippet refused before it runs is counted alike at both doors (issue 41 item 7):
an empty snippet sent to `/api/check` counts REJECTED under door="rest", as the
same snippet over gRPC's VerifyStream counts under door="grpc"."""

from __future__ import annotations

import asyncio
import urllib.request

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from testkit import free_port, loopback_config


def _rejected(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "leanrpc_snippets_total" and sample.labels["status"] == "REJECTED":
                counts[sample.labels["door"]] = sample.value
    return counts


async def test_an_empty_snippet_is_counted_at_the_rest_door_as_at_grpc():
    metrics_port, http_port = free_port(), free_port()
    config = loopback_config(1, server__metrics_port=metrics_port, gateway__http_port=http_port)
    app = await create_server(config)
    try:
        async with aiohttp.ClientSession() as http:
            body = {"snippets": [{"id": "e", "code": "   "}]}
            async with http.post(f"http://127.0.0.1:{http_port}/api/check", json=body) as reply:
                assert reply.status == 200
                [answer] = (await reply.json())["results"]
                assert "empty" in answer["error"]
        async with AsyncClient(f"127.0.0.1:{app.port}", max_retries=0) as client:
            [streamed] = await client.verify([("e", "   ")])
            assert streamed.status == "REJECTED"
        counts = await asyncio.to_thread(_rejected, metrics_port)
        assert counts == {"rest": 1.0, "grpc": 1.0}, counts
    finally:
        await app.stop(2.0)
