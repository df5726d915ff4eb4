"""The Node.js client (clients/node) against a live server on loopback."""

from __future__ import annotations

import json
import subprocess

import grpc

from eco_support import start_app
from leanrpc.client import HEADER_HASH_KEY, AsyncClient, header_hash
from testkit import node_json


async def test_node_client_verifies_100_snippets(node_client):
    app = await start_app(workers=2)
    try:
        summary = await node_json(
            node_client, "test/verify100.js", f"127.0.0.1:{app.port}", timeout=240
        )
        assert summary["streamed"] + summary["batched"] == 100
        assert summary["statuses"] == {"VALID": 34, "SORRY": 33, "INVALID": 33}
        assert summary["empty_batch"] == "INVALID_ARGUMENT"
        # The server answered exactly those 100 snippets.
        assert app.pool.stats.jobs_finished == 100
    finally:
        await app.stop(2.0)


def test_node_header_hash_matches_the_vectors(node_client):
    """The Node client against the one vector file (proto/leanrpc/v1/header_hash_vectors.json),
    read from the copy inside the package, as the Python client's test reads the original."""
    script = (
        "const fs=require('fs');const {headerHash}=require('.');"
        "const v=JSON.parse(fs.readFileSync('proto/leanrpc/v1/header_hash_vectors.json','utf8')).vectors;"
        "console.log(JSON.stringify(v.map((x)=>[x.name,headerHash(x.code),x.header_hash])))"
    )
    out = subprocess.run(
        ["node", "-e", script],
        cwd=node_client,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = json.loads(out.stdout)
    assert len(rows) >= 10
    assert [(name, got) for name, got, _want in rows] == [(name, want) for name, _got, want in rows]
    vectors = json.loads(
        (
            node_client.parents[1] / "proto" / "leanrpc" / "v1" / "header_hash_vectors.json"
        ).read_text()
    )["vectors"]
    assert [want for _n, _g, want in rows] == [header_hash(v["code"]) for v in vectors]


class _SeenMetadata(grpc.aio.ServerInterceptor):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    async def intercept_service(self, continuation, details):
        self.seen.append(
            (details.method, dict(details.invocation_metadata or ()).get(HEADER_HASH_KEY))
        )
        return await continuation(details)


async def test_python_client_sends_header_hash(monkeypatch):
    spy = _SeenMetadata()
    real_server = grpc.aio.server

    def server_with_spy(*args, interceptors=(), **kwargs):
        return real_server(*args, interceptors=[spy, *interceptors], **kwargs)

    monkeypatch.setattr(grpc.aio, "server", server_with_spy)
    app = await start_app(workers=1)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        mathlib = "import Mathlib\n\ntheorem t : 1 = 1 := rfl\n"
        await client.verify_batch(
            [("a", mathlib), ("b", mathlib), ("c", "import Aesop\n\ntheorem u : True := trivial\n")]
        )
        await client.verify([("d", mathlib)])
        sent = {method.rsplit("/", 1)[1]: key for method, key in spy.seen}
        assert sent["Verify"] == header_hash(mathlib)
        assert sent["VerifyStream"] == header_hash(mathlib)
    finally:
        await client.close()
        await app.stop(2.0)
